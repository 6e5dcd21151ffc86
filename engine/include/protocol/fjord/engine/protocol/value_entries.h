// Value entries: how column values travel in a signal's section (keys,
// values to write, the values a read returns, scan bounds and filters).
//
// An entry is u16 column, u16 flags (bit 0 NULL), u32 length, then `length`
// bytes padded to 4. Columns appear at most once in a section.
//
// Pure functions; any thread. Hot path: ValueCursor and put_value (inline;
// every key and every value read passes through them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/base/status.h"

namespace fjord::engine::protocol {

struct ValueEntry {
  uint16_t column = 0;
  bool is_null = false;
  std::span<const std::byte> bytes;
};
inline constexpr std::size_t padded_to_4(std::size_t n) { return (n + 3) / 4 * 4; }
inline std::size_t value_entry_bytes(std::size_t value_bytes) { return 8 + padded_to_4(value_bytes); }
// Walks a section's entries, checking each (the bytes may come from a
// peer). Inline: every key and every value read passes through it; what
// was wrong is kept as a few numbers and worded only when error() is asked.
class ValueCursor {
 public:
  explicit ValueCursor(std::span<const std::byte> section) : rest_(section) {}
  // Next entry; false at the end or on a malformed entry (then error() says
  // why, and every later call is false too).
  bool next(ValueEntry& out) {
    if (rest_.empty() || problem_ != Problem::kNone) return false;
    if (rest_.size() < 8) return stop(Problem::kShortHeader);
    uint16_t flags;
    std::memcpy(&column_, rest_.data(), 2);
    std::memcpy(&flags, rest_.data() + 2, 2);
    std::memcpy(&length_, rest_.data() + 4, 4);
    flags_ = flags;
    if (flags > 1) return stop(Problem::kBadFlags);
    if (flags == 1 && length_ != 0) return stop(Problem::kNullWithLength);
    if (length_ > rest_.size() - 8 || value_entry_bytes(length_) > rest_.size()) return stop(Problem::kPastTheEnd);
    out.column = column_;
    out.is_null = flags == 1;
    out.bytes = rest_.subspan(8, length_);
    rest_ = rest_.subspan(value_entry_bytes(length_));
    return true;
  }
  // ok, or what stopped next() (kProtocolError, naming the column).
  Status error() const;
  std::size_t remaining_bytes() const { return rest_.size(); }

 private:
  enum class Problem : uint8_t { kNone, kShortHeader, kBadFlags, kNullWithLength, kPastTheEnd };
  bool stop(Problem problem) {
    problem_ = problem;
    return false;
  }
  std::span<const std::byte> rest_;
  Problem problem_ = Problem::kNone;
  uint16_t column_ = 0;
  uint16_t flags_ = 0;
  uint32_t length_ = 0;
};
// Writes one entry; returns bytes written or 0 if `out` is too small.
// Inline: every value a read returns passes through it.
inline std::size_t put_value(std::span<std::byte> out, uint16_t column, bool is_null,
                             std::span<const std::byte> bytes) {
  const std::size_t length = is_null ? 0 : bytes.size();
  const std::size_t n = value_entry_bytes(length);
  if (out.size() < n) return 0;
  FJORD_ASSERT(length <= UINT32_MAX);
  const uint64_t head = uint64_t{column} | uint64_t{is_null ? 1u : 0u} << 16 | uint64_t{length} << 32;
  std::memcpy(out.data(), &head, sizeof head);
  if (length % 4 != 0) {  // the padding: zero its word first, the value's last bytes go over it
    const uint32_t zero = 0;
    std::memcpy(out.data() + n - 4, &zero, sizeof zero);
  }
  // Integers (8 or 4 bytes) are copied by a fixed-size move, not a call.
  if (length == 8)
    std::memcpy(out.data() + 8, bytes.data(), 8);
  else if (length == 4)
    std::memcpy(out.data() + 8, bytes.data(), 4);
  else if (length != 0)
    std::memcpy(out.data() + 8, bytes.data(), length);
  return n;
}

}  // namespace fjord::engine::protocol
