// API internals: value entries (protocol.h's format) read back. A Row's own
// entries (written by protocol::put_value) are walked without checks but a
// bounds assertion; a RowView's, which come from outside, with
// protocol::ValueCursor's checks but none of its Status and message. The
// thread that owns the Row or RowView; hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/engine/protocol.h"

namespace fjord::api::detail {

// An entry's header: u16 column, u16 flags, u32 length (protocol.h).
inline constexpr std::size_t kEntryHeaderBytes = 8;

struct RowEntry {
  std::size_t offset = 0;       // where the entry starts in the Row's bytes
  std::size_t entry_bytes = 0;  // its whole length: header, value and padding
  uint16_t column = 0;
  bool is_null = false;
  std::span<const std::byte> value;  // empty when NULL
};

// The entry at `at` of a Row's entries, moving `at` past it; false at the end.
inline bool next_row_entry(std::span<const std::byte> entries, std::size_t& at, RowEntry& out) {
  if (at >= entries.size()) return false;
  uint16_t flags;
  uint32_t length;
  std::memcpy(&out.column, entries.data() + at, 2);
  std::memcpy(&flags, entries.data() + at + 2, 2);
  std::memcpy(&length, entries.data() + at + 4, 4);
  out.offset = at;
  out.entry_bytes = engine::protocol::value_entry_bytes(length);
  FJORD_ASSERT(at + out.entry_bytes <= entries.size());
  out.is_null = flags != 0;
  out.value = entries.subspan(at + kEntryHeaderBytes, length);
  at += out.entry_bytes;
  return true;
}

// The entry at `at` of entries from outside (a read's values from the data
// node, or any bytes a caller wraps in a RowView), with the checks of
// protocol::ValueCursor::next but without building its message: false at
// the end and at the first malformed entry, where the cursor stops too.
// Keep the two in step (row_test compares them on corrupted entries).
inline bool next_checked_entry(std::span<const std::byte> entries, std::size_t& at, RowEntry& out) {
  const std::size_t rest = entries.size() - at;
  if (rest < kEntryHeaderBytes) return false;
  uint16_t flags;
  uint32_t length;
  std::memcpy(&out.column, entries.data() + at, 2);
  std::memcpy(&flags, entries.data() + at + 2, 2);
  std::memcpy(&length, entries.data() + at + 4, 4);
  if (flags > 1 || (flags == 1 && length != 0) || length > rest - kEntryHeaderBytes) return false;
  const std::size_t n = engine::protocol::value_entry_bytes(length);
  if (n > rest) return false;
  out.offset = at;
  out.entry_bytes = n;
  out.is_null = flags == 1;
  out.value = entries.subspan(at + kEntryHeaderBytes, length);
  at += n;
  return true;
}

}  // namespace fjord::api::detail
