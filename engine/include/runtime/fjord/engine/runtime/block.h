// Blocks and signals: how engine code is written.
//
// A block is a state machine that reacts to signals (NDB's blocks: TC, LDM,
// DICT, ...). Each block instance lives on exactly one thread and is only
// ever called by that thread, so block code needs no locks. A block sends
// signals through its BlockContext: to a block on the same thread (a local
// queue), on another thread of this node (a job buffer), or on another node
// (a transporter). Signals between one (sender block, receiver block) pair
// arrive in the order they were sent.
//
// Threads: execute() and on_start() run on the block's thread. Hot path:
// execute() and everything in BlockContext.
//
// Signal, Address and the block and runtime signal numbers are in
// fjord/engine/signal.h (included here): the protocol and the API use them
// without the runtime.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "fjord/base/cache.h"
#include "fjord/base/tuning.h"
#include "fjord/engine/signal.h"
#include "fjord/transport/transporter.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

class BlockContext;

// Aligned to whole cache lines: a block's state is written by its thread
// only, and must not share a line with another thread's data.
class alignas(kCacheLineBytes) Block {
 public:
  Block(BlockNumber number, uint16_t instance, std::string name, bool prefetches = false)
      : number_(number), instance_(instance), prefetches_(prefetches), name_(std::move(name)) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  virtual ~Block() = default;

  // Called once on the block's thread before any signal.
  virtual void on_start(BlockContext&) {}
  virtual void execute(const Signal& signal, BlockContext& context) = 0;
  // Blocks that return true get kNodeConnected / kNodeDisconnected.
  virtual bool wants_node_events() const { return false; }
  // True for a runtime signal (kNodeConnected, ...) that did not come from
  // this node's runtime, which the block must then ignore; logged the first
  // time. Links never carry them (LinkAdmission): this is the block's own
  // check of what it acts on.
  bool foreign_runtime_signal(const Signal& signal) {
    if (signal.from_own_node()) return false;
    ignore_foreign_runtime_signal(signal);
    return true;
  }

  // Look-ahead for blocks whose signals miss the cache (LDM's key lookups):
  // when several signals are queued, the thread first calls prefetch() for
  // each of the next few (up to kPrefetchWindow) with stage 0, then again
  // with stage 1, and only then executes them in order, so their memory
  // loads overlap instead of stalling one after another. Stage 1 may read
  // what stage 0 asked for (a bucket) to ask for the next level (its rows).
  // A signal found alone gets stage 0 only, so its first load overlaps the
  // block's own work before the lookup.
  // A hint only: it must not change state or send, and it may see signals
  // that an earlier one in the window makes stale. Called only for blocks
  // constructed with `prefetches` set, so the others pay nothing. It may
  // leave a note on the signal for itself (Signal::prefetch_note).
  static constexpr uint32_t kPrefetchWindow = tuning::kPrefetchWindow;
  virtual void prefetch(const Signal&, int /*stage*/) const {}
  bool prefetches() const { return prefetches_; }

  BlockNumber number() const { return number_; }
  uint16_t instance() const { return instance_; }
  BlockRef ref() const { return {number_, instance_}; }
  const std::string& name() const { return name_; }

 protected:
  // Turns prefetch() calls on or off; only from on_start(), once the block
  // knows whether it has anything to prefetch (TC: a co-located LDM).
  void set_prefetches(bool on) { prefetches_ = on; }

 private:
  // Logs (the first time) a runtime signal foreign_runtime_signal() refused.
  [[gnu::cold]] void ignore_foreign_runtime_signal(const Signal& signal);

  BlockNumber number_;
  uint16_t instance_;
  bool prefetches_;
  bool foreign_logged_ = false;  // foreign_runtime_signal() logged one
  std::string name_;
};

class WorkerThread;

// A block's view of its thread while it executes. Not thread-safe: used only
// by the thread that runs the block.
class BlockContext {
 public:
  NodeId self_node() const;
  // The time this scheduler loop began (cheap; use for timeouts).
  uint64_t now_ns() const;

  // Sends one signal from the executing block. Never blocks and never drops
  // a signal to this node or to a connected node: under congestion it waits
  // in this thread's spill queue. Returns false only if `to.node` is not
  // connected (the signal is discarded and counted).
  bool send(Address to, uint16_t signal_number, std::span<const uint32_t> data,
            std::span<const std::span<const std::byte>> sections = {}, uint32_t trace = 0);

  // Sends a signal to a block of this node after `delay_ms` (NDB's
  // sendSignalWithDelay). At most kMaxDelayedDataWords words, no sections.
  void send_delayed(uint32_t delay_ms, BlockRef to, uint16_t signal_number, std::span<const uint32_t> data);
  static constexpr std::size_t kMaxDelayedDataWords = 8;

  // The block `ref` of this node when it runs on this thread, else null.
  // For NDB's EXECUTE_DIRECT: a block may call another block of its own
  // thread directly (a typed call instead of a signal) where the protocol
  // says that is equivalent; the callee must not call back into the caller.
  // Valid from on_start() on.
  Block* block_on_this_thread(BlockRef ref) const;
  // Whether this node hosts block `ref` (on any thread): a block that sends
  // to an address taken from a peer's words checks it first, as a signal to
  // a block of this node that does not exist is a bug of the sender.
  bool node_hosts(BlockRef ref) const;

  bool node_connected(NodeId node) const;
  // Send-memory pressure towards a node (kNormal for this node).
  transport::SendPressure pressure_to(NodeId node) const;

  const Block& block() const { return *block_; }

 private:
  friend class WorkerThread;
  explicit BlockContext(WorkerThread& thread) : thread_(thread) {}
  WorkerThread& thread_;
  Block* block_ = nullptr;
};

}  // namespace fjord::engine
