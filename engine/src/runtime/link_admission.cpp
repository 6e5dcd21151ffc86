// LinkAdmission: building the rules (start-up only; admits() is inline).
#include "fjord/engine/runtime/link_admission.h"

#include <string>

#include "fjord/base/assert.h"

namespace fjord::engine {

LinkAdmission::LinkAdmission() { admit_every_engine_signal(SenderKind::kDataNode, true); }

void LinkAdmission::admit_every_engine_signal(SenderKind kind, bool every) {
  FJORD_ASSERT_MSG(kind != SenderKind::kOwnNode, "the own node's signals never pass a link");
  kinds_[static_cast<std::size_t>(kind)].every_engine_signal = every;
}

Status LinkAdmission::allow(SenderKind kind, BlockNumber block, uint16_t signal_number) {
  const std::string what = std::string("a rule for ") + sender_kind_name(kind) + "s: signal " +
                           std::to_string(signal_number) + " to block " + std::to_string(block);
  if (kind == SenderKind::kOwnNode) return Status(StatusCode::kInvalidArgument, what + ": own signals pass no link");
  if (signal_number < runtime_signals::kFirstUser)
    return Status(StatusCode::kInvalidArgument, what + ": the runtime's own signals never pass a link");
  if (block >= kRuleBlocks || signal_number >= kRuleSignals)
    return Status(StatusCode::kInvalidArgument, what + ": rules name blocks below " + std::to_string(kRuleBlocks) +
                                                    " and signals below " + std::to_string(kRuleSignals));
  uint8_t& row = kinds_[static_cast<std::size_t>(kind)].row_of_block[block];
  if (row == 0) {
    if (rows_used_ == kMaxRuleBlocks)
      return Status(StatusCode::kResourceExhausted,
                    what + ": more than " + std::to_string(kMaxRuleBlocks) + " receiver blocks have rules");
    row = static_cast<uint8_t>(++rows_used_);
  }
  rows_[row - 1][signal_number / 64] |= uint64_t{1} << (signal_number % 64);
  FJORD_ASSERT(admits(kind, block, signal_number));
  return Status::ok();
}

}  // namespace fjord::engine
