// WorkerThread and RuntimeShared: the inside of the runtime (internal header).
//
// Every thread of a data node is a WorkerThread whose loop does NDB's five
// steps. Routing, spilling, timers and waking live here; runtime.cpp builds
// and wires the threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/base/cache.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/engine/runtime/job_buffer.h"
#include "fjord/engine/runtime/runtime.h"
#include "spill_queue.h"
#include "timer_queue.h"
#include "waker.h"

namespace fjord::engine {

// Names the calling thread `name` and applies a ThreadConfig entry's
// placement to it: its CPUs, realtime and thread_prio. What the OS refuses
// is logged and the thread runs on without it. Worker threads and the
// watchdog (the wd entry) call it first thing.
void apply_placement(const ThreadSpec& plan, const std::string& name);

// A tiny test-and-test-and-set lock for a link's send side. Held only while
// packing frames into the transporter and flushing it: microseconds.
class SpinLock {
 public:
  void lock() noexcept {
    // Acquire pairs with the release in unlock(): the next holder sees the
    // transporter state the previous one left.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  bool try_lock() noexcept { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// One possible link per remote node id.
struct alignas(kCacheLineBytes) LinkSlot {
  SpinLock send_lock;
  // Guarded by send_lock for senders; the receive thread owns the receive
  // side and is the only one that removes it.
  std::unique_ptr<transport::Transporter> transporter;
  // Readable by anyone without the lock (routing decisions); set true after
  // the transporter is installed, false before it is removed.
  std::atomic<bool> up{false};
  std::atomic<bool> needs_flush{false};  // for send threads
  uint32_t recv_thread = 0;
  // The peer's kind, stamped on every signal the link carries. Set by
  // attach_link before the receive thread adopts the link (its mutex
  // carries it there); read by that thread only.
  SenderKind peer_kind = SenderKind::kDataNode;
  // Frames refused from this node id, over all its links: written by the
  // receive thread, read by statistics (relaxed: a count, nothing ordered
  // by it).
  std::atomic<uint64_t> refused_signals{0};
  // Guarded by send_lock (slow paths only): the last refusal's reason, and
  // the transporter type of the last link (kept for a link that is down).
  std::string last_refusal;
  std::string type;
};

// Destination of a spilled or routed signal.
struct Destination {
  bool to_link = false;
  uint32_t index = 0;  // thread index, or node id when to_link
};

struct RuntimeShared;

// Small indices (thread indices, node ids) gathered during one loop, each
// once, in the order first added; then handed out together and forgotten
// (drain), or kept while still wanted (retain). The wake-up list, the flush
// list and the pending-flush list of a worker. Sized by init() for every
// index, so add() never allocates. One thread only; hot path.
template <typename Index>
class MarkedList {
 public:
  void init(std::size_t indices) {
    marks_.assign(indices, 0);
    list_.reserve(indices);
  }
  [[gnu::always_inline]] void add(Index index) {
    if (marks_[index]) return;
    marks_[index] = 1;
    // Each index at most once: the reserved capacity holds them all.
    FJORD_ASSERT(list_.size() < list_.capacity());
    list_.push_back(index);
  }
  // Calls take(index) for every index added since the last drain, in order,
  // and empties the list.
  template <typename Take>
  void drain(Take&& take) {
    for (Index index : list_) {
      marks_[index] = 0;
      take(index);
    }
    list_.clear();
  }
  // Calls keep(index) for every index, in order; those it returns false for
  // leave the list (and may be added again).
  template <typename Keep>
  void retain(Keep&& keep) {
    std::size_t kept = 0;
    for (Index index : list_) {
      if (keep(index))
        list_[kept++] = index;
      else
        marks_[index] = 0;
    }
    list_.resize(kept);
  }
  bool empty() const { return list_.empty(); }

 private:
  LineVector<uint8_t> marks_;  // [index]: in list_
  LineVector<Index> list_;
};

// Aligned to whole cache lines, like everything a worker writes in its loop
// (its LineVectors, its blocks), so no other thread's data shares a line.
class alignas(kCacheLineBytes) WorkerThread {
 public:
  WorkerThread(RuntimeShared& shared, uint32_t index, ThreadSpec spec);
  ~WorkerThread();

  Status init();  // allocates everything before start
  void start();
  // RuntimeOptions::caller_runs_loop: the thread that calls these is this
  // worker's thread. start_on_caller() starts the blocks; each
  // run_once_on_caller() runs one loop (steps 1-4, never waiting) and says
  // whether input or work is left for another.
  void start_on_caller();
  bool run_once_on_caller();
  void join();

  uint32_t index() const { return index_; }
  const ThreadSpec& plan() const { return plan_; }
  std::string name() const;
  bool polls_links() const;
  // Whether the thread has anything to run: blocks, links to receive, or
  // sending on behalf of others.
  bool has_work() const { return !blocks_.empty() || polls_links() || plan_.type == ThreadType::kSend; }

  void add_block(std::unique_ptr<Block> block);
  const std::vector<std::unique_ptr<Block>>& blocks() const { return blocks_; }

  // The queue this thread reads from producer `from` (a thread index, or the
  // injector row).
  JobBuffer& in_queue(uint32_t from) { return in_queues_[from]; }
  Waker& waker() { return waker_; }
  // Called by the runtime (any thread) to give this thread a new link.
  void adopt_link(NodeId node);

  ThreadStats stats_snapshot() const;
  // Nanoseconds the current step has been running (0 when idle), and what it runs.
  uint64_t step_started_ns() const { return step_started_ns_.load(std::memory_order_relaxed); }
  uint32_t current_work() const { return current_work_.load(std::memory_order_relaxed); }

  // ---- used by BlockContext while a block of this thread executes ----
  // send() is inlined into BlockContext::send, its only caller: one call
  // from the block to the commit.
  [[gnu::always_inline]] bool send(Block& from, Address to, uint16_t signal_number, std::span<const uint32_t> data,
                                   std::span<const std::span<const std::byte>> sections, uint32_t trace);
  void send_delayed(Block& from, uint32_t delay_ms, BlockRef to, uint16_t signal_number,
                    std::span<const uint32_t> data);
  uint64_t now_ns() const { return loop_now_ns_; }
  RuntimeShared& shared() { return shared_; }
  // The block `ref` when this thread hosts it, else null.
  Block* block_here(BlockRef ref) const;  // inline, below RuntimeShared

 private:
  void run();
  void prepare_start();  // the block table and output queues, before the first loop
  void start_blocks();
  // The loop until stopping; kTimedSend: SchedulerExecutionTimer is set.
  template <bool kTimedSend>
  void run_loop();
  // One loop's steps 1-4 from `now_ns`; true if any did work. kTimedSend:
  // step 4 sends only when send_due().
  template <bool kTimedSend>
  [[gnu::always_inline]] bool loop_steps(uint64_t now_ns);
  // The execution timer ran out since the last send, or a partial flush
  // waits to be finished. Stamps the send when it says yes.
  bool send_due(uint64_t now_ns) {
    if (pending_flush_.empty() && now_ns - last_send_ns_ < execution_timer_ns_) return false;
    last_send_ns_ = now_ns;
    return true;
  }
  bool adopt_pending_links();
  bool poll_links();
  bool poll_one_link(NodeId node);
  // Takes the link to `node` down for a frame it may not carry (`route`;
  // `dest` the receiver's thread, or -1 when the block does not exist
  // here): counted, logged, and nothing after it read. Cold.
  [[gnu::cold]] void refuse_frame(NodeId node, const frame::FrameRoute& route, int dest);
  std::string receiver_name(const frame::FrameRoute& route, int dest) const;
  void link_went_down(NodeId node);
  // Executing continues while the spill is below a quarter full: a little
  // slack lets two threads that spill towards each other keep draining their
  // inputs (so they do not wait on each other forever), and the bound keeps
  // memory fixed.
  bool may_execute() const { return spill_.used_bytes() < spill_.capacity() / 4; }
  // Executes up to batch_signals signals, taking the input queues in turn.
  bool execute_batch();
  bool execute_queue(JobBuffer& queue, uint32_t budget, uint32_t* executed);
  // The block an entry is for, with its signal decoded into `signal`.
  Block* decode(std::span<const std::byte> entry, Signal& signal) const;
  void execute_one(Block& block, const Signal& signal);
  bool run_timers();
  bool drain_spill();
  bool flush_links();
  void wake_destinations();
  // Thread `thread` is woken at the end of this loop: it has new input from
  // us. Not this thread itself, which looks at its own queues before it
  // sleeps.
  [[gnu::always_inline]] void wake_later(uint32_t thread) {
    if (thread != index_) wake_list_.add(thread);
  }
  // The link to `node` is flushed in step 4 of this loop: we wrote to it.
  [[gnu::always_inline]] void flush_later(NodeId node) { flush_list_.add(node); }
  // Spins, then sleeps, from `start_ns` (now) until input arrives; returns
  // the time it stopped (after a spin, a reading at most
  // tuning::kSpinPollsPerClockRead polls old).
  uint64_t idle(uint64_t start_ns);
  bool has_pending_input(uint64_t now_ns);
  void sleep_until(uint64_t deadline_ns);

  // Packs a signal into thread `thread`'s job buffer, or into the spill
  // while anything waits there (order) or the buffer is full: never lost.
  [[gnu::always_inline]] void place_local(uint32_t thread, NodeId sender_node, const frame::SignalHeader& header,
                                          std::span<const uint32_t> data,
                                          std::span<const std::span<const std::byte>> sections);
  void spill_local(uint32_t thread, NodeId sender_node, const frame::SignalHeader& header,
                   std::span<const uint32_t> data, std::span<const std::span<const std::byte>> sections,
                   std::size_t frame_len);
  bool place_remote(NodeId node, const frame::SignalHeader& header, std::span<const uint32_t> data,
                    std::span<const std::span<const std::byte>> sections);
  bool copy_to_destination(Destination destination, std::span<const std::byte> entry);

  RuntimeShared& shared_;
  uint32_t index_;
  ThreadSpec plan_;
  uint64_t execution_timer_ns_;  // 0: send after every batch
  uint64_t last_send_ns_ = 0;    // loop time of the last send, when execution_timer_ns_ > 0
  std::thread thread_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LineVector<Block*> block_table_;  // laid out as RuntimeShared::route; this thread's blocks (set by start())

  std::vector<JobBuffer> in_queues_;   // [producer]; [index_] is the local queue
  LineVector<JobBuffer*> out_queues_;  // [consumer thread]: the queue we write to it (set by start())
  SpillQueue spill_;
  TimerQueue timers_;
  Waker waker_;
  UniqueFd epoll_fd_;  // threads that poll links sleep here

  LineVector<NodeId> links_;  // links this thread receives from
  std::mutex adopt_mutex_;
  std::vector<NodeId> adopt_pending_;  // guarded by adopt_mutex_
  std::atomic<bool> adopt_flag_{false};

  MarkedList<uint32_t> wake_list_;    // threads we queued work for this loop
  MarkedList<NodeId> flush_list_;     // links we wrote to this loop
  MarkedList<NodeId> pending_flush_;  // links whose flush returned kPending
  uint64_t loop_now_ns_ = 0;
  uint32_t rr_next_queue_ = 0;
  bool signals_waiting_ = false;  // has_pending_input() found a job buffer with data
  BlockContext context_;
  Signal window_[Block::kPrefetchWindow];  // decoded entries of execute_queue

  // Statistics: one writer (this thread), relaxed readers.
  struct Counters {
    std::atomic<uint64_t> loops{0}, idle_polls{0}, signals{0}, active_loops{0}, busy_ns{0}, spin_ns{0}, sleep_ns{0};
    std::atomic<uint64_t> spill_events{0}, congestion_stops{0}, discarded{0};
  } counters_;
  std::atomic<uint64_t> step_started_ns_{0};
  std::atomic<uint32_t> current_work_{0};  // (block << 16) | signal number being executed
};

// Everything the threads share. Built by Runtime::create, immutable after
// start() except where atomics say otherwise.
struct alignas(kCacheLineBytes) RuntimeShared {
  RuntimeOptions options;
  std::vector<std::unique_ptr<WorkerThread>> threads;
  uint32_t injector_row = 0;  // producer index used by Runtime::inject
  std::mutex inject_mutex;
  // route[block * route_stride + instance] = thread index, or -1: one array,
  // so finding a signal's thread is one load, not a chain of dependent ones
  // (the routing is on every send). Written only by add_block, before start.
  LineVector<int> route;
  uint32_t route_stride = 0;              // instances per block number
  LineVector<uint32_t> receiver_threads;  // recv threads, or the single thread
  LineVector<uint32_t> send_threads;      // kSend
  std::atomic<uint32_t> next_receiver{0};
  std::unique_ptr<LinkSlot[]> links;  // [kMaxNodeId + 1]
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::vector<Block*> node_event_blocks;  // blocks that want kNodeConnected/kNodeDisconnected

  // Where `ref` sits in `route` and in every thread's block table, or
  // SIZE_MAX when it lies outside them.
  std::size_t route_slot(BlockRef ref) const {
    const std::size_t at = std::size_t{ref.block} * route_stride + ref.instance;
    return ref.instance < route_stride && at < route.size() ? at : SIZE_MAX;
  }
  int thread_of(BlockRef ref) const {
    const std::size_t at = route_slot(ref);
    return at == SIZE_MAX ? -1 : route[at];
  }
  // Routes `ref` to thread `thread`, widening the table when an instance
  // number does not fit its stride.
  void set_route(BlockRef ref, int thread);
};

inline Block* WorkerThread::block_here(BlockRef ref) const {
  const std::size_t at = shared_.route_slot(ref);  // SIZE_MAX when outside
  return at < block_table_.size() ? block_table_[at] : nullptr;
}

}  // namespace fjord::engine
