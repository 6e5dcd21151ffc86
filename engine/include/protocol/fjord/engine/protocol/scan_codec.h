// Scan bounds and filters: the sections of ScanReq and ScanFragReq that say
// which rows a scan returns, their encoders and their validating decoders.
//
// Bounds on an ordered index, as a section: u8 flags (kBound*), u8 lower
// value count, u8 upper value count, u8 zero, then the lower prefix values
// and the upper prefix values (value entries, index columns in order). An
// empty section: no bounds, the whole index.
//
// A filter, as a section: predicates ANDed together, each u16 column, u8
// FilterOp, u8 zero, then (for ops that compare) one value entry.
//
// The bytes may come from a peer: decode_bounds and FilterCursor check
// every field and say what was wrong. Pure functions; any thread. Not on
// the per-row path: a scan decodes its bounds and filter once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/status.h"
#include "fjord/engine/protocol/value_entries.h"

namespace fjord::engine::protocol {

inline constexpr uint8_t kBoundHasLower = 1 << 0;
inline constexpr uint8_t kBoundLowerInclusive = 1 << 1;
inline constexpr uint8_t kBoundHasUpper = 1 << 2;
inline constexpr uint8_t kBoundUpperInclusive = 1 << 3;

enum class FilterOp : uint8_t { kEq = 1, kNe, kLt, kLe, kGt, kGe, kIsNull, kIsNotNull };

struct Bounds {
  bool has_lower = false, lower_inclusive = false, has_upper = false, upper_inclusive = false;
  uint8_t lower_count = 0, upper_count = 0;
  std::span<const std::byte> lower;  // lower_count value entries
  std::span<const std::byte> upper;  // upper_count value entries
};
// Checks a bounds section (its header, the counts against the flags, and
// that exactly lower_count then upper_count well-formed entries fill it).
Result<Bounds> decode_bounds(std::span<const std::byte> section);
struct Predicate {
  uint16_t column = 0;
  FilterOp op = FilterOp::kEq;
  ValueEntry value;  // unused for kIsNull / kIsNotNull
};
// Walks a filter section: next() yields each predicate, checked; false at
// the end or on the first fault (then error() says what was wrong).
class FilterCursor {
 public:
  explicit FilterCursor(std::span<const std::byte> section) : rest_(section) {}
  bool next(Predicate& out);
  const Status& error() const { return error_; }

 private:
  std::span<const std::byte> rest_;
  Status error_;
};
// Encoders for bounds and predicates: return bytes written, 0 if `out` is too small.
std::size_t put_bounds_header(std::span<std::byte> out, const Bounds& b);
std::size_t put_predicate(std::span<std::byte> out, uint16_t column, FilterOp op, bool is_null,
                          std::span<const std::byte> value);

}  // namespace fjord::engine::protocol
