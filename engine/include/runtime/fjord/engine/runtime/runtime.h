// The data node runtime: threads by type, job buffers, the scheduler loop,
// links to other nodes, statistics and the watchdog.
//
// Usage (the data node program, tests and benchmarks):
//   RuntimeOptions options;  options.threads = ...;   // from ThreadConfig
//   auto rt = Runtime::create(options);
//   rt->add_block(std::make_unique<MyBlock>(...), ThreadType::kLdm, 0);
//   rt->start();
//   rt->attach_link(std::move(transporter), SenderKind::kApiNode);  // whenever a link connects
//   ... rt->stop();
//
// Each thread runs NDB's loop: (1) poll its transporters into job buffers
// (recv threads, or the single thread), (2) run expired timers, (3) execute
// a bounded batch of signals, (4) send what was produced (flush links, unless
// send threads do it), (5) spin for `spintime`, then sleep on a futex or
// epoll with a wake-up that cannot be lost.
//
// Congestion: a receive thread stops reading a link while the job buffer
// its next frame needs is above the congestion level, leaving the frames in
// the transporter (which pushes back on the peer). A thread whose output
// cannot be placed (a full job buffer or link) keeps it, in order, in its
// spill queue and executes nothing new until the spill drains. Nothing is
// dropped and all memory is sized at start-up.
//
// Trust: every signal carries its sender's node id and kind as the runtime
// knows them (Signal::sender_node, sender_kind): this node's own, or the
// link's peer given to attach_link. A frame whose signal the link's peer
// kind may not send (RuntimeOptions::admission) is refused before any
// block sees it: counted, logged, and its link taken down.
//
// Threads: create/add_block/start/stop/attach_link from one controlling
// thread; stats()/snapshot functions from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/base/tuning.h"
#include "fjord/engine/runtime/block.h"
#include "fjord/engine/runtime/link_admission.h"
#include "fjord/engine/thread_config.h"
#include "fjord/transport/transporter.h"

namespace fjord::engine {

struct RuntimeOptions {
  NodeId self = 1;
  // The threads, as ThreadConfig describes them (thread_config.h). io and wd
  // entries are accepted and not run as loops (no disk I/O; the watchdog is
  // the runtime's own thread).
  std::vector<ThreadSpec> threads;
  // NDB's ndbd: one thread receives, executes every block and sends.
  // `threads` must then hold exactly one entry (its CPUs and spintime apply).
  bool single_threaded = false;
  // Single-threaded only: start() runs no thread; the controlling thread
  // becomes the node's one thread and drives its loop with run_once()
  // (in-process harnesses such as the whole-node fuzz target, which step
  // the node between inputs instead of handing each one to a thread).
  bool caller_runs_loop = false;
  // Sizes and limits; the defaults and why they are what they are: tuning.h.
  std::size_t job_buffer_bytes = tuning::kJobBufferBytes;    // per (producer, consumer) thread pair
  std::size_t local_queue_bytes = tuning::kLocalQueueBytes;  // each thread's queue to itself
  std::size_t spill_bytes = tuning::kSpillBytes;             // each thread's overflow queue
  uint32_t congestion_percent = tuning::kCongestionPercent;  // receive threads stop reading above this fill
  uint32_t batch_signals = tuning::kBatchSignals;            // signals executed per loop before sending
  // NDB's SchedulerExecutionTimer: microseconds a thread keeps executing
  // before it sends what it produced to other nodes; it always sends before
  // it spins or sleeps. 0 = send after every batch. Send threads and a
  // caller-run loop always send after every batch.
  uint32_t execution_timer_us = 0;
  uint32_t timer_capacity = tuning::kTimerCapacity;     // pending delayed signals per thread
  uint32_t watchdog_ms = 6000;                          // a thread stuck this long is reported (0 = off)
  std::function<void(const std::string&)> on_watchdog;  // default: log an error
  // Called (on a runtime thread) when a link went down; the transporter is
  // handed back for destruction and the node may reconnect.
  std::function<void(std::unique_ptr<transport::Transporter>)> on_link_down;
  // What each kind of peer may send over its link (default: data nodes any
  // engine signal, other kinds nothing).
  LinkAdmission admission;
};

// Per-thread statistics (NDB: loops, signals, "Mean loop Counter", cpu and
// spin time, job-buffer fill).
struct ThreadStats {
  std::string name;         // "ldm 0"
  uint64_t loops = 0;       // scheduler loops that found or did work
  uint64_t idle_polls = 0;  // spin iterations: each checks every input once
  uint64_t signals = 0;
  double mean_signals_per_loop = 0;  // over loops that executed something
  uint64_t busy_ns = 0;              // executing, receiving or sending
  uint64_t spin_ns = 0;              // spinning without work
  uint64_t sleep_ns = 0;
  uint32_t job_buffer_fill_percent = 0;  // fullest incoming queue
  uint64_t spill_bytes = 0;              // output waiting for room now
  uint64_t spill_events = 0;             // times output had to spill
  uint64_t congestion_stops = 0;         // times a receive stopped for a full queue
  uint64_t discarded_to_down_nodes = 0;
  uint64_t stuck_ms = 0;  // how long the current step has lasted (watchdog view)
};

// A link, or (up false) a node whose last link went down after refused
// signals: those counts outlive the link.
struct LinkStatsView {
  NodeId node = kNoNode;
  std::string type;
  SenderKind peer_kind = SenderKind::kDataNode;
  bool up = false;
  transport::LinkStats stats;
  std::string pressure;
  uint64_t refused_signals = 0;  // frames refused from this node (LinkAdmission), over all its links
  std::string last_refusal;      // why the last one was, or empty
};

class WorkerThread;
struct RuntimeShared;
struct Watchdog;

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options);
  ~Runtime();

  // Places a block on the thread of this type and instance (in single-
  // threaded mode every block goes on the single thread). Before start().
  Status add_block(std::unique_ptr<Block> block, ThreadType type, uint32_t instance);

  Status start();
  // Stops every thread, joins them and closes the links. Idempotent.
  void stop();
  // caller_runs_loop: one pass of the loop on the calling thread (receive,
  // timers, execute, send; it never sleeps). True if work or input is left,
  // so a caller that wants the node quiet calls it until false. One thread
  // at a time, after start().
  bool run_once();

  // Hands over a connected transporter (from a listener or connect()) whose
  // peer is a node of `peer_kind` (from the cluster configuration, for the
  // node id its handshake proved; never kOwnNode). It joins a receive
  // thread's poll set and becomes routable; every signal it carries is
  // stamped with its node id and that kind. Any thread.
  Status attach_link(std::unique_ptr<transport::Transporter> transporter, SenderKind peer_kind);
  bool link_up(NodeId node) const;

  // Sends a signal into the node from outside any block (tests, the node
  // program's control paths). Any thread, but one at a time.
  Status inject(Address to, uint16_t signal_number, std::span<const uint32_t> data,
                std::span<const std::span<const std::byte>> sections = {});

  std::vector<ThreadStats> thread_stats() const;
  std::vector<LinkStatsView> link_stats() const;
  // The layout: one line per thread (role, instance, blocks, CPUs, spintime),
  // then one per io and wd entry (what runs for it, its CPUs).
  std::string describe_threads() const;
  const RuntimeOptions& options() const;

 private:
  explicit Runtime(RuntimeOptions options);
  void run_watchdog();
  std::unique_ptr<RuntimeShared> shared_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace fjord::engine
