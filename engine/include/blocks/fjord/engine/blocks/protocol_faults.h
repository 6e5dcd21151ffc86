// ProtocolFaults: what a block does with a signal it refuses as malformed
// or out of place (a peer's bytes that fail the protocol's checks, an
// answer to nothing the block asked). The signal is dropped and counted;
// the first fault from each node is logged in full, naming the block, the
// signal and the sender, and later ones from that node are only counted,
// so a peer that sends garbage cannot flood the log. Never an assertion:
// the node's own invariants are not at stake.
//
// Thread: the owning block's. Not on the hot path (refusals only).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

#include "fjord/engine/signal.h"

namespace fjord::engine {

class ProtocolFaults {
 public:
  // `block` names the owner in log lines ("TC 0", "LDM 1", "DICT").
  explicit ProtocolFaults(std::string block) : block_(std::move(block)) {}

  // Records that `signal` was refused because of `why`.
  [[gnu::cold]] void refuse(const Signal& signal, std::string_view why);
  uint64_t count() const { return count_; }

 private:
  std::string block_;
  std::bitset<kMaxNodeId + 1> logged_;
  uint64_t count_ = 0;
};

}  // namespace fjord::engine
