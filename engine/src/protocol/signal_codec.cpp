// The refusals the signal codecs share (signal_codec.h), worded.
#include "signal_codec.h"

#include <string>

namespace fjord::engine::protocol::detail {

Status bad(uint16_t number, const std::string& what) {
  return Status(StatusCode::kProtocolError, "signal " + std::to_string(number) + ": " + what);
}

Status shape_error(const Signal& s, uint16_t number, std::size_t words, std::size_t max_sections) {
  if (s.number() != number) return bad(s.number(), "expected signal " + std::to_string(number));
  if (s.word_count() != words)
    return bad(number, "has " + std::to_string(s.word_count()) + " data words, expected " + std::to_string(words));
  return bad(number, "has " + std::to_string(s.section_count()) + " sections, at most " + std::to_string(max_sections) +
                         " allowed");
}

std::string op_bits_fault(uint32_t word) {
  const uint32_t o = word & 0xFF;
  const uint32_t l = (word >> 8) & 0xFF;
  if (!in_range(o, OpType::kRead, OpType::kDelete)) return "operation type " + std::to_string(o);
  if (!in_range(l, LockMode::kCommitted, LockMode::kExclusive)) return "lock mode " + std::to_string(l);
  return "reserved operation bits set";
}

Status op_bits_error(uint16_t number, uint32_t word) { return bad(number, op_bits_fault(word)); }

Status node_error(uint16_t number, uint32_t node) {
  return bad(number, "node id " + std::to_string(node) + " outside 1.." + std::to_string(kMaxNodeId));
}

Status check_error_code(uint16_t number, uint32_t code) {
  if (code == 0) return bad(number, "error code 0 in a refusal");
  if (error_message(static_cast<ErrorCode>(code)).empty())
    return bad(number, "unknown error code " + std::to_string(code));
  return Status::ok();
}

}  // namespace fjord::engine::protocol::detail
