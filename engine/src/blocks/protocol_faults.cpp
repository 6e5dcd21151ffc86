#include "fjord/engine/blocks/protocol_faults.h"

#include "fjord/base/log.h"

namespace fjord::engine {

void ProtocolFaults::refuse(const Signal& signal, std::string_view why) {
  ++count_;
  const NodeId node = signal.sender_node;
  if (node > kMaxNodeId || logged_.test(node)) return;
  logged_.set(node);
  FJORD_LOG_WARN(
      "%s: refused signal %u from node %u (block %u instance %u): %.*s; further faults from node %u are "
      "counted, not logged",
      block_.c_str(), signal.number(), node, signal.sender().block, signal.sender().instance,
      static_cast<int>(why.size()), why.data(), node);
}

}  // namespace fjord::engine
