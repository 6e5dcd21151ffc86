// LinkAdmission: which signals a link may carry into this node, by the kind
// of node at its other end (the trust boundary of a data node's links).
//
// Every frame a receive thread takes from a link is looked up here, by the
// link's peer kind (SenderKind, fixed when the link is attached), the
// receiver block and the signal number, before anything is copied into a
// job buffer. A signal not admitted takes its link down
// (docs/architecture.md, "What a link may carry"). The runtime's own
// signals (below runtime_signals::kFirstUser) never pass a link, whatever
// the rules say.
//
// Rules are built before the runtime starts (RuntimeOptions::admission)
// and only read afterwards, by any thread. Hot path: admits(), two or three
// loads with no call and no heap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fjord/base/status.h"
#include "fjord/engine/signal.h"

namespace fjord::engine {

class LinkAdmission {
 public:
  // Block numbers and signal numbers a single rule may name (allow()). A
  // signal outside them passes only a peer kind that admits every engine
  // signal.
  static constexpr std::size_t kRuleBlocks = 256;
  static constexpr std::size_t kRuleSignals = 1024;
  // Receiver blocks that may have rules of their own, over all peer kinds.
  static constexpr std::size_t kMaxRuleBlocks = 15;

  // Data nodes may send every engine signal to any block; API and
  // management nodes nothing.
  LinkAdmission();

  // Peers of `kind` may send every engine signal (kFirstUser and up) to any
  // block, or (false) only what allow() lets them.
  void admit_every_engine_signal(SenderKind kind, bool every);
  // Peers of `kind` may send `signal_number` to any instance of `block`.
  // Refused (an error saying why) for the own node's kind, for a runtime
  // signal number, or outside the bounds above.
  Status allow(SenderKind kind, BlockNumber block, uint16_t signal_number);

  // Whether a peer of `kind` may send `signal_number` to `block`.
  bool admits(SenderKind kind, BlockNumber block, uint16_t signal_number) const noexcept {
    const KindRules& rules = kinds_[static_cast<std::size_t>(kind)];
    if (signal_number < runtime_signals::kFirstUser) return false;
    if (rules.every_engine_signal) return true;
    if (block >= kRuleBlocks || signal_number >= kRuleSignals) return false;
    const uint8_t row = rules.row_of_block[block];
    return row != 0 && ((rows_[row - 1][signal_number / 64] >> (signal_number % 64)) & 1) != 0;
  }

 private:
  using SignalBits = std::array<uint64_t, kRuleSignals / 64>;
  struct KindRules {
    bool every_engine_signal = false;
    // 0: no rule for the block; else 1 + its row in rows_.
    std::array<uint8_t, kRuleBlocks> row_of_block{};
  };
  static_assert(kMaxRuleBlocks < 255, "a row number fits row_of_block's byte, 0 kept for none");

  std::array<KindRules, kSenderKinds> kinds_{};
  std::array<SignalBits, kMaxRuleBlocks> rows_{};
  std::size_t rows_used_ = 0;
};

}  // namespace fjord::engine
