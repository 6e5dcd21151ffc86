// Signals as engine code sees them: a received signal (Signal), who sent it
// (SenderKind), where one goes (Address), the well-known block numbers and
// the signal numbers the runtime itself sends.
//
// Its own small unit (fjord_engine_signal, header only): the signal
// protocol, the API library and the data node runtime all speak in these
// terms, and the protocol and the API need nothing else of the runtime, so
// a client links no data node code.
//
// Plain values; any thread. Hot path: every accessor of Signal (inline).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/transport/frame.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

using BlockNumber = uint16_t;

// Well-known block numbers. API nodes address their own receiving block.
namespace block_numbers {
inline constexpr BlockNumber kSystem = 1;       // per-node control (start, stop, stats, node events)
inline constexpr BlockNumber kTc = 2;           // transaction coordinator instances
inline constexpr BlockNumber kLdm = 3;          // local data manager instances
inline constexpr BlockNumber kDict = 4;         // schema (create/drop/describe table)
inline constexpr BlockNumber kApi = 10;         // the API library's receiver on API nodes
inline constexpr BlockNumber kFirstTest = 100;  // tests and benchmarks use 100..199
}  // namespace block_numbers

// Signal numbers the runtime itself sends.
namespace runtime_signals {
inline constexpr uint16_t kStart = 1;             // to every block once, before any other signal
inline constexpr uint16_t kNodeConnected = 2;     // data: {node id}; to blocks that subscribe
inline constexpr uint16_t kNodeDisconnected = 3;  // data: {node id}
inline constexpr uint16_t kFirstUser = 16;
}  // namespace runtime_signals

// Who sent a received signal, as the receiving node knows it: its own
// threads (blocks, timers, the runtime), or the kind of node at the other
// end of the link it came over. A link's kind comes from its handshake's
// node id and the cluster configuration, never from a frame's bytes.
enum class SenderKind : uint8_t { kOwnNode = 0, kDataNode, kApiNode, kMgmNode };
inline constexpr std::size_t kSenderKinds = 4;

constexpr const char* sender_kind_name(SenderKind kind) noexcept {
  switch (kind) {
    case SenderKind::kOwnNode: return "own node";
    case SenderKind::kDataNode: return "data node";
    case SenderKind::kApiNode: return "API node";
    case SenderKind::kMgmNode: return "management node";
  }
  return "unknown kind";
}

// Where a signal goes: a block instance on a node.
struct Address {
  NodeId node = kNoNode;
  BlockRef block;
};

// A received signal; valid only while its receiver handles it (a block's
// execute(), the API's dispatch).
struct Signal {
  // Who sent it, as the runtime knows it (never the frame's sender field).
  // These three fill one 4-byte word, laid out as the second half of a
  // job-buffer entry's envelope, which the runtime copies in one store.
  NodeId sender_node = kNoNode;
  SenderKind sender_kind = SenderKind::kOwnNode;
  uint8_t reserved = 0;
  frame::SignalView view;
  // What the receiving block's prefetch() worked out for this signal (say,
  // where its key lives), for its later stage and its execute(): 0 unless
  // prefetch() set it. The block must be able to tell a note that no longer
  // applies (its table changed in between), and act the same with or
  // without one: a window is not always offered.
  mutable uint64_t prefetch_note = 0;

  uint16_t number() const { return view.header.signal_number; }
  // Sent by a block, timer or the runtime of this node (not over a link).
  bool from_own_node() const { return sender_kind == SenderKind::kOwnNode; }
  BlockRef sender() const { return view.header.sender; }
  Address sender_address() const { return {sender_node, view.header.sender}; }
  uint32_t trace() const { return view.header.trace; }
  std::size_t word_count() const { return view.data_words; }
  uint32_t word(std::size_t i) const { return view.word(i); }
  std::size_t section_count() const { return view.section_count; }
  std::span<const std::byte> section(std::size_t i) const { return view.sections[i]; }
};

}  // namespace fjord::engine
