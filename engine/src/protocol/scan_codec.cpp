// Scan bounds and filters: encoders and validating decoders.
#include "fjord/engine/protocol/scan_codec.h"

#include <cstring>
#include <string>

#include "fjord/engine/schema.h"

namespace fjord::engine::protocol {

std::size_t put_bounds_header(std::span<std::byte> out, const Bounds& b) {
  if (out.size() < 4) return 0;
  const uint8_t flags = (b.has_lower ? kBoundHasLower : 0) | (b.lower_inclusive ? kBoundLowerInclusive : 0) |
                        (b.has_upper ? kBoundHasUpper : 0) | (b.upper_inclusive ? kBoundUpperInclusive : 0);
  out[0] = std::byte{flags};
  out[1] = std::byte{b.lower_count};
  out[2] = std::byte{b.upper_count};
  out[3] = std::byte{0};
  return 4;
}

Result<Bounds> decode_bounds(std::span<const std::byte> section) {
  Bounds b;
  if (section.empty()) return b;  // no bounds: the whole index
  const auto fail = [](const std::string& what) { return Status(StatusCode::kProtocolError, "scan bounds: " + what); };
  if (section.size() < 4) return fail("shorter than the 4-byte header");
  const auto flags = static_cast<uint8_t>(section[0]);
  if (flags & ~0x0F) return fail("unknown flags");
  if (static_cast<uint8_t>(section[3]) != 0) return fail("reserved byte set");
  b.has_lower = flags & kBoundHasLower;
  b.lower_inclusive = flags & kBoundLowerInclusive;
  b.has_upper = flags & kBoundHasUpper;
  b.upper_inclusive = flags & kBoundUpperInclusive;
  b.lower_count = static_cast<uint8_t>(section[1]);
  b.upper_count = static_cast<uint8_t>(section[2]);
  if (!b.has_lower && (b.lower_count || b.lower_inclusive)) return fail("lower values without a lower bound");
  if (!b.has_upper && (b.upper_count || b.upper_inclusive)) return fail("upper values without an upper bound");
  if (b.lower_count > kMaxKeyColumns || b.upper_count > kMaxKeyColumns) return fail("more values than key columns");
  std::span<const std::byte> rest = section.subspan(4);
  ValueCursor cursor(rest);
  ValueEntry e;
  for (uint8_t i = 0; i < b.lower_count; ++i)
    if (!cursor.next(e)) return fail(cursor.error().is_ok() ? "missing lower values" : cursor.error().message());
  const std::size_t lower_bytes = rest.size() - cursor.remaining_bytes();
  b.lower = rest.first(lower_bytes);
  b.upper = rest.subspan(lower_bytes);
  ValueCursor up(b.upper);
  uint8_t n = 0;
  while (up.next(e)) ++n;
  if (!up.error().is_ok()) return fail(up.error().message());
  if (n != b.upper_count)
    return fail("upper value count " + std::to_string(n) + " != " + std::to_string(b.upper_count));
  return b;
}

std::size_t put_predicate(std::span<std::byte> out, uint16_t column, FilterOp op, bool is_null,
                          std::span<const std::byte> value) {
  if (out.size() < 4) return 0;
  std::memcpy(out.data(), &column, 2);
  out[2] = std::byte{static_cast<uint8_t>(op)};
  out[3] = std::byte{0};
  if (op == FilterOp::kIsNull || op == FilterOp::kIsNotNull) return 4;
  const std::size_t n = put_value(out.subspan(4), column, is_null, value);
  return n == 0 ? 0 : 4 + n;
}

bool FilterCursor::next(Predicate& out) {
  if (rest_.empty() || !error_.is_ok()) return false;
  if (rest_.size() < 4) {
    error_ = Status(StatusCode::kProtocolError, "filter predicate shorter than its header");
    return false;
  }
  std::memcpy(&out.column, rest_.data(), 2);
  const auto op = static_cast<uint8_t>(rest_[2]);
  const bool known = op >= static_cast<uint8_t>(FilterOp::kEq) && op <= static_cast<uint8_t>(FilterOp::kIsNotNull);
  if (!known || static_cast<uint8_t>(rest_[3]) != 0) {
    error_ = Status(StatusCode::kProtocolError, "filter operator " + std::to_string(op) + " unknown");
    return false;
  }
  out.op = static_cast<FilterOp>(op);
  rest_ = rest_.subspan(4);
  if (out.op == FilterOp::kIsNull || out.op == FilterOp::kIsNotNull) return true;
  ValueCursor c(rest_);
  if (!c.next(out.value)) {
    error_ = c.error().is_ok() ? Status(StatusCode::kProtocolError, "filter predicate without its value") : c.error();
    return false;
  }
  if (out.value.column != out.column) {
    error_ = Status(StatusCode::kProtocolError, "filter value names another column");
    return false;
  }
  rest_ = rest_.subspan(value_entry_bytes(out.value.is_null ? 0 : out.value.bytes.size()));
  return true;
}

}  // namespace fjord::engine::protocol
