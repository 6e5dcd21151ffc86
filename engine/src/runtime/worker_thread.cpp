// The scheduler loop of one data node thread (NDB's five steps), and the
// routing of signals to blocks, threads and links.
#include "worker_thread.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "fjord/base/clock.h"
#include "fjord/base/counter.h"
#include "fjord/base/log.h"
#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {
namespace {

constexpr uint32_t kToLinkBit = 0x8000'0000u;
using tuning::kMaxFramesPerLinkPoll;
using tuning::kMaxSleepNs;

// Spilled signals keep the job buffer's entry layout (envelope + frame).
// Only this node's own signals spill.
void write_envelope(std::byte* at, std::size_t frame_bytes, NodeId sender_node) {
  const Envelope e{static_cast<uint32_t>(JobBuffer::entry_bytes(frame_bytes)), sender_node, SenderKind::kOwnNode, 0};
  std::memcpy(at, &e, sizeof e);
}

std::size_t frame_bytes_of(std::span<const uint32_t> data, std::span<const std::span<const std::byte>> sections,
                           bool checksum = false) {
  const std::size_t n = frame::frame_bytes_for(data.size(), sections, checksum);
  FJORD_ASSERT_MSG(n != 0, "signal does not fit one frame (25 words, 3 sections, 32 KB)");
  return n;
}

}  // namespace

// Inline (always_inline in the class): every signal between blocks comes
// through here, and a call with its six arguments costs as much as the
// packing itself.
inline void WorkerThread::place_local(uint32_t thread, NodeId sender_node, const frame::SignalHeader& header,
                                      std::span<const uint32_t> data,
                                      std::span<const std::span<const std::byte>> sections) {
  // Most signals between blocks have no sections: pack those inline.
  const bool small = sections.empty();
  FJORD_ASSERT_MSG(data.size() <= frame::kMaxDataWords, "signal does not fit one frame (25 words)");
  const std::size_t frame_len = small ? frame::small_frame_bytes(data.size()) : frame_bytes_of(data, sections);
  if (spill_.empty()) [[likely]] {
    JobBuffer& q = *out_queues_[thread];
    const std::span<std::byte> space = q.reserve(frame_len);
    if (!space.empty()) [[likely]] {
      const std::size_t n = small ? frame::pack_small_frame(space.data(), header, data)
                                  : frame::pack_frame_sized(space.data(), frame_len, header, data, sections, false);
      FJORD_ASSERT(n == frame_len);
      q.commit(frame_len, sender_node, SenderKind::kOwnNode);
      return;
    }
  }
  spill_local(thread, sender_node, header, data, sections, frame_len);
}

void WorkerThread::spill_local(uint32_t thread, NodeId sender_node, const frame::SignalHeader& header,
                               std::span<const uint32_t> data, std::span<const std::span<const std::byte>> sections,
                               std::size_t frame_len) {
  const std::span<std::byte> space = spill_.append(thread, JobBuffer::entry_bytes(frame_len));
  bump(counters_.spill_events);
  write_envelope(space.data(), frame_len, sender_node);
  frame::pack_frame_sized(space.data() + sizeof(Envelope), frame_len, header, data, sections, false);
}

WorkerThread::WorkerThread(RuntimeShared& shared, uint32_t index, ThreadSpec spec)
    : shared_(shared),
      index_(index),
      plan_(std::move(spec)),
      // Send threads send for others: holding that back only delays it.
      execution_timer_ns_(plan_.type == ThreadType::kSend ? 0 : uint64_t{shared.options.execution_timer_us} * 1000),
      context_(*this) {}

bool WorkerThread::polls_links() const { return shared_.options.single_threaded || plan_.type == ThreadType::kRecv; }

WorkerThread::~WorkerThread() { join(); }

std::string WorkerThread::name() const {
  if (shared_.options.single_threaded) return "single " + std::to_string(plan_.instance);
  return std::string(thread_type_name(plan_.type)) + " " + std::to_string(plan_.instance);
}

Status WorkerThread::init() {
  const RuntimeOptions& o = shared_.options;
  const std::size_t producers = shared_.threads.size() + 1;  // every thread plus the injector
  in_queues_.resize(producers);
  // The queues this thread reads live on its NUMA node (when there is more than one).
  const int node = numa_node_of(plan_.cpus);
  for (std::size_t p = 0; p < producers; ++p) {
    auto q = JobBuffer::create(p == index_ ? o.local_queue_bytes : o.job_buffer_bytes, node);
    if (!q) return q.status();
    in_queues_[p] = std::move(q).value();
  }
  if (Status s = spill_.init(o.spill_bytes); !s) return s;
  timers_.init(o.timer_capacity);
  if (Status s = waker_.init(polls_links()); !s) return s;
  if (polls_links()) {
    epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd_.valid()) return io_error("epoll_create1", errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = UINT32_MAX;  // the waker's eventfd
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, waker_.event_fd(), &ev) != 0) return io_error("epoll_ctl", errno);
  }
  wake_list_.init(shared_.threads.size());
  flush_list_.init(kMaxNodeId + 1);
  pending_flush_.init(kMaxNodeId + 1);
  links_.reserve(kMaxNodeId + 1);
  adopt_pending_.reserve(kMaxNodeId + 1);
  return Status::ok();
}

void WorkerThread::add_block(std::unique_ptr<Block> block) { blocks_.push_back(std::move(block)); }

void WorkerThread::start() {
  prepare_start();
  thread_ = std::thread([this] { run(); });
}

void WorkerThread::prepare_start() {
  // Every thread's queues exist by now (Runtime::create ran every init()),
  // and every block was added: the route's layout is final.
  out_queues_.clear();
  for (auto& t : shared_.threads) out_queues_.push_back(&t->in_queue(index_));
  block_table_.assign(shared_.route.size(), nullptr);
  for (auto& block : blocks_) {
    FJORD_ASSERT_MSG(shared_.thread_of(block->ref()) == static_cast<int>(index_), "block not routed to its thread");
    block_table_[shared_.route_slot(block->ref())] = block.get();
  }
}

void WorkerThread::join() {
  if (thread_.joinable()) thread_.join();
}

void WorkerThread::adopt_link(NodeId node) {
  {
    std::lock_guard lock(adopt_mutex_);
    adopt_pending_.push_back(node);
  }
  // Release pairs with the acquire in adopt_pending_links(): the flag is only
  // an early-out; the mutex carries the data.
  adopt_flag_.store(true, std::memory_order_release);
  waker_.wake();
}

// ---- the loop ---------------------------------------------------------------

void apply_placement(const ThreadSpec& plan, const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  if (!plan.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : plan.cpus) CPU_SET(cpu, &set);  // a cpubind thread holds exactly one CPU
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
      FJORD_LOG_WARN("thread %s: cannot bind to its CPUs; running unbound", name.c_str());
  }
  if (plan.realtime) {
    sched_param p{};
    p.sched_priority = 50;
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0)
      FJORD_LOG_WARN("thread %s: realtime scheduling refused (needs CAP_SYS_NICE); running normal", name.c_str());
  }
  if (plan.thread_prio >= 0) {
    // NDB's thread_prio 0..10, 5 neutral: map to nice 5..-5.
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5 - plan.thread_prio) != 0)
      FJORD_LOG_WARN("thread %s: cannot set thread_prio %d", name.c_str(), plan.thread_prio);
  }
}

void WorkerThread::start_blocks() {
  loop_now_ns_ = monotonic_ns();
  for (auto& block : blocks_) {
    context_.block_ = block.get();
    block->on_start(context_);
  }
  wake_destinations();
  flush_links();
}

template <bool kTimedSend>
inline bool WorkerThread::loop_steps(uint64_t now_ns) {
  loop_now_ns_ = now_ns;
  step_started_ns_.store(loop_now_ns_, std::memory_order_relaxed);
  // Signals the wait found in a job buffer run first: the thread that
  // sent them may be waiting for the answer, and the steps before
  // executing are a large share of a round trip between two threads when
  // the hand-off itself is fast.
  const bool early = signals_waiting_ && may_execute();
  signals_waiting_ = false;
  bool work = early && execute_batch();
  work |= adopt_pending_links();
  if (!spill_.empty()) work |= drain_spill();
  if (polls_links()) work |= poll_links();                     // 1. receive
  work |= run_timers();                                        // 2. timers
  if (!early && may_execute()) work |= execute_batch();        // 3. execute
  if (!kTimedSend || send_due(now_ns)) work |= flush_links();  // 4. send
  wake_destinations();
  step_started_ns_.store(0, std::memory_order_relaxed);
  bump(counters_.loops);
  return work;
}

void WorkerThread::run() {
  apply_placement(plan_, name());
  start_blocks();
  // Two instances of one loop, so the one without the execution timer
  // carries no test for it.
  if (execution_timer_ns_ > 0)
    run_loop<true>();
  else
    run_loop<false>();
}

template <bool kTimedSend>
void WorkerThread::run_loop() {
  // The clock is read once per loop, after sending (a clock read costs as
  // much as polling every input once, and none sits between finding input
  // and acting on it): that reading ends this loop's busy time and starts
  // the next loop, or the idle phase, which returns when it stopped.
  uint64_t now = monotonic_ns();
  while (!shared_.stopping.load(std::memory_order_acquire)) {
    const bool work = loop_steps<kTimedSend>(now);
    uint64_t end = monotonic_ns();
    // 5. spin, then sleep. After a loop with work, go round again only if
    // input is already waiting: a loop that finds nothing costs a clock
    // read and every step's checks, and delays noticing the next signal.
    const bool again = work && has_pending_input(end);
    if constexpr (kTimedSend) {
      // What the timer held back leaves before the thread waits.
      if (!again && !flush_list_.empty()) {
        flush_links();
        last_send_ns_ = end;
        end = monotonic_ns();
      }
    }
    bump(counters_.busy_ns, end - now);
    now = again ? end : idle(end);
  }
}

void WorkerThread::start_on_caller() {
  FJORD_ASSERT_MSG(shared_.options.caller_runs_loop, "start_on_caller() without caller_runs_loop");
  prepare_start();
  start_blocks();  // the caller's thread keeps its own name and placement
}

bool WorkerThread::run_once_on_caller() {
  FJORD_ASSERT_MSG(shared_.options.caller_runs_loop, "run_once_on_caller() without caller_runs_loop");
  const uint64_t now = monotonic_ns();
  const bool work = loop_steps<false>(now);
  const uint64_t end = monotonic_ns();
  bump(counters_.busy_ns, end - now);
  return work || has_pending_input(end);
}

bool WorkerThread::adopt_pending_links() {
  if (!adopt_flag_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(adopt_mutex_);
  adopt_flag_.store(false, std::memory_order_relaxed);
  for (NodeId node : adopt_pending_) {
    LinkSlot& slot = shared_.links[node];
    FJORD_ASSERT(links_.size() < links_.capacity());  // one slot per node id, reserved by init()
    links_.push_back(node);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = node;
    transport::Transporter* t = slot.transporter.get();
    if (t && ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, t->wait_fd(), &ev) != 0)
      FJORD_LOG_WARN("thread %s: epoll_ctl for node %u failed: %s", name().c_str(), node, std::strerror(errno));
    for (Block* b : shared_.node_event_blocks) {
      const uint32_t data[] = {node};
      const auto dest = static_cast<uint32_t>(shared_.thread_of(b->ref()));
      place_local(dest, shared_.options.self, {runtime_signals::kNodeConnected, b->ref(), b->ref(), 0}, data, {});
      wake_later(dest);
    }
  }
  adopt_pending_.clear();
  return true;
}

uint64_t WorkerThread::idle(uint64_t start) {
  const uint64_t spin_ns = uint64_t{plan_.spintime_us} * 1000;
  if (spin_ns > 0) {
    // A poll of every input is several times cheaper than a clock read or
    // a pause; either would dominate the time to notice a signal, so both
    // come only every few polls (tuning.h). On finding input, return the
    // last clock reading rather than read the clock again.
    uint64_t now = start;
    uint64_t polls = 0;
    bool found = false;
    while (now - start < spin_ns) {
      if (has_pending_input(now)) {
        found = true;
        break;
      }
      if ((++polls & (tuning::kSpinPollsPerPause - 1)) == 0) cpu_relax();
      if ((polls & (tuning::kSpinPollsPerClockRead - 1)) == 0) now = monotonic_ns();
      if ((polls & (tuning::kSpinPollsPerPublish - 1)) == 0)  // publish now and then: a spin phase may last long
        bump(counters_.idle_polls, tuning::kSpinPollsPerPublish);
    }
    bump(counters_.idle_polls, (polls & (tuning::kSpinPollsPerPublish - 1)) + 1);
    bump(counters_.spin_ns, now - start);
    if (found) return now;
    start = now;
  }
  const uint64_t next_timer = timers_.next_deadline();
  sleep_until(next_timer == UINT64_MAX ? start + kMaxSleepNs : std::min(next_timer, start + kMaxSleepNs));
  const uint64_t end = monotonic_ns();
  bump(counters_.sleep_ns, end - start);
  return end;
}

bool WorkerThread::has_pending_input(uint64_t now_ns) {
  // In the order the next batch takes the queues, from its turn: the first
  // queue with data becomes the turn, so that batch starts there instead of
  // stepping over the empty queues before it (they were empty just now).
  const auto queues = static_cast<uint32_t>(in_queues_.size());
  for (uint32_t k = 0, q = rr_next_queue_; k < queues; ++k, q = q + 1 == queues ? 0 : q + 1)
    if (in_queues_[q].has_data()) {
      rr_next_queue_ = q;
      signals_waiting_ = true;
      return true;
    }
  if (adopt_flag_.load(std::memory_order_relaxed) || shared_.stopping.load(std::memory_order_relaxed)) return true;
  if (timers_.next_deadline() <= now_ns) return true;
  if (!pending_flush_.empty() || !spill_.empty()) return true;
  for (NodeId node : links_) {
    transport::Transporter* t = shared_.links[node].transporter.get();
    if (t && (!t->receive().bytes.empty() || !t->is_up())) return true;
  }
  if (plan_.type == ThreadType::kSend)
    for (NodeId n = 1; n <= kMaxNodeId; ++n)
      if (shared_.links[n].needs_flush.load(std::memory_order_relaxed)) return true;
  return false;
}

void WorkerThread::sleep_until(uint64_t deadline_ns) {
  waker_.begin_sleep();
  bool can_sleep = !has_pending_input(monotonic_ns());
  std::size_t armed = 0;
  if (can_sleep && polls_links()) {
    for (; armed < links_.size(); ++armed) {
      transport::Transporter* t = shared_.links[links_[armed]].transporter.get();
      if (t && !t->arm_wakeup()) {
        can_sleep = false;
        break;
      }
    }
  }
  const uint64_t now = monotonic_ns();
  if (can_sleep && deadline_ns > now) {
    if (polls_links()) {
      epoll_event events[16];
      const int ms = static_cast<int>(std::min<uint64_t>((deadline_ns - now + 999'999) / 1'000'000, 100));
      (void)::epoll_wait(epoll_fd_.get(), events, 16, ms);
    } else {
      waker_.futex_sleep(deadline_ns - now);
    }
  }
  for (std::size_t i = 0; i < armed; ++i) {
    transport::Transporter* t = shared_.links[links_[i]].transporter.get();
    if (t) t->disarm_wakeup();
  }
  waker_.end_sleep();
}

// ---- step 1: receive ---------------------------------------------------------

bool WorkerThread::poll_links() {
  bool work = false;
  for (std::size_t i = 0; i < links_.size();) {
    const NodeId node = links_[i];
    transport::Transporter* t = shared_.links[node].transporter.get();
    work |= poll_one_link(node);
    if (!t->is_up() && t->receive().bytes.empty()) {
      link_went_down(node);
      links_[i] = links_.back();
      links_.pop_back();
      work = true;
      continue;
    }
    ++i;
  }
  return work;
}

bool WorkerThread::poll_one_link(NodeId node) {
  transport::Transporter& t = *shared_.links[node].transporter;
  const SenderKind kind = shared_.links[node].peer_kind;
  const LinkAdmission& admission = shared_.options.admission;
  const uint32_t congestion = shared_.options.congestion_percent;
  uint32_t frames = 0;
  bool received = false;
  // An SHM ring hands out one peer flush per receive(): take further ones
  // while the frame budget lasts (ask_again), not one per loop.
  for (;;) {
    const transport::ReceiveBatch batch = t.receive();
    if (batch.bytes.empty()) return received;
    std::size_t consumed = 0;
    // Frames are copied whole; routing and admission need only each one's
    // header. The frame's sender field is never read: the envelope names
    // the link's node and kind.
    for (std::size_t at = 0; frames < kMaxFramesPerLinkPoll && at < batch.bytes.size();) {
      const frame::FrameRoute route = frame::route_of_validated(batch.bytes.subspan(at));
      const std::size_t frame_len = route.frame_bytes;
      const int dest = shared_.thread_of(route.receiver);
      if (dest < 0 || !admission.admits(kind, route.receiver.block, route.signal_number)) [[unlikely]] {
        refuse_frame(node, route, dest);
        t.release(batch.bytes.size());  // nothing from this peer is trusted any more
        return true;
      }
      JobBuffer& q = shared_.threads[static_cast<std::size_t>(dest)]->in_queue(index_);
      // Leave room for the node's own traffic: stop reading above the
      // congestion level. The producer's cached view of the free space errs
      // low: look at the consumer's index only when that view says stop.
      const auto congested = [&](std::size_t free) { return (q.capacity() - free) * 100 >= q.capacity() * congestion; };
      std::span<std::byte> space;
      if (!congested(q.free_bytes_hint()) || !congested(q.free_bytes())) space = q.reserve(frame_len);
      if (space.empty()) {
        bump(counters_.congestion_stops);
        break;
      }
      std::memcpy(space.data(), batch.bytes.data() + at, frame_len);
      q.commit(frame_len, node, kind);
      wake_later(static_cast<uint32_t>(dest));
      at += frame_len;
      consumed = at;
      ++frames;
    }
    if (consumed > 0) {
      t.release(consumed);
      received = true;
    }
    if (consumed < batch.bytes.size() || !batch.ask_again || frames >= kMaxFramesPerLinkPoll) return received;
  }
}

std::string WorkerThread::receiver_name(const frame::FrameRoute& route, int dest) const {
  std::string ref =
      "block " + std::to_string(route.receiver.block) + " instance " + std::to_string(route.receiver.instance);
  if (dest < 0) return ref + ", which does not exist on node " + std::to_string(shared_.options.self);
  for (const auto& b : shared_.threads[static_cast<std::size_t>(dest)]->blocks())
    if (b->ref() == route.receiver) return b->name() + " (" + ref + ")";
  return ref;
}

void WorkerThread::refuse_frame(NodeId node, const frame::FrameRoute& route, int dest) {
  LinkSlot& slot = shared_.links[node];
  const char* kind = sender_kind_name(slot.peer_kind);
  std::string what = "signal " + std::to_string(route.signal_number);
  if (route.signal_number < runtime_signals::kFirstUser) what += " (one only the runtime of a node sends)";
  std::string reason =
      "node " + std::to_string(node) + " (" + kind + ") sent " + what + " to " + receiver_name(route, dest);
  if (dest >= 0) reason += ": " + std::string(kind) + "s may not send it there; link closed";
  slot.refused_signals.fetch_add(1, std::memory_order_relaxed);
  slot.send_lock.lock();
  slot.last_refusal = reason;
  const std::string type = slot.type;
  slot.send_lock.unlock();
  // The link goes down at once: one line per link.
  FJORD_LOG_WARN("node %u: refused a frame on the %s link to node %u: %s", shared_.options.self, type.c_str(), node,
                 reason.c_str());
  slot.transporter->close(reason);
}

void WorkerThread::link_went_down(NodeId node) {
  LinkSlot& slot = shared_.links[node];
  std::unique_ptr<transport::Transporter> dead;
  slot.up.store(false, std::memory_order_release);
  slot.send_lock.lock();
  dead = std::move(slot.transporter);
  slot.send_lock.unlock();
  (void)::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, dead->wait_fd(), nullptr);
  FJORD_LOG_INFO("node %u: link to node %u down: %s", shared_.options.self, node,
                 dead->down_reason().message().c_str());
  for (Block* b : shared_.node_event_blocks) {
    const uint32_t data[] = {node};
    const int dest = shared_.thread_of(b->ref());
    place_local(static_cast<uint32_t>(dest), shared_.options.self,
                {runtime_signals::kNodeDisconnected, b->ref(), b->ref(), 0}, data, {});
    wake_later(static_cast<uint32_t>(dest));
  }
  if (shared_.options.on_link_down) shared_.options.on_link_down(std::move(dead));
}

// ---- step 2: timers ------------------------------------------------------------

bool WorkerThread::run_timers() {
  bool work = false;
  DelayedSignal d;
  while (spill_.used_bytes() < spill_.capacity() / 2 && timers_.pop_due(loop_now_ns_, d)) {
    const int dest = shared_.thread_of(d.to);
    FJORD_ASSERT_MSG(dest >= 0, "delayed signal to a block that does not exist");
    place_local(static_cast<uint32_t>(dest), shared_.options.self, {d.signal_number, d.to, d.from, 0},
                {d.data, d.words}, {});
    wake_later(static_cast<uint32_t>(dest));
    work = true;
  }
  return work;
}

// ---- step 3: execute -------------------------------------------------------------

bool WorkerThread::execute_batch() {
  // Round-robin over the incoming queues so no producer starves another.
  const uint32_t budget = shared_.options.batch_signals;
  const auto queues = static_cast<uint32_t>(in_queues_.size());
  uint32_t executed = 0;
  // (No division: a 32-bit divide is about 25 cycles, and this runs per loop.)
  // The next batch starts after the last queue this one took signals from,
  // so busy queues alternate however many empty ones lie between them.
  uint32_t q = rr_next_queue_;
  for (uint32_t k = 0; k < queues && executed < budget && may_execute(); ++k) {
    if (execute_queue(in_queues_[q], budget, &executed)) rr_next_queue_ = q + 1 == queues ? 0 : q + 1;
    if (++q == queues) q = 0;
  }
  // What this batch sent to this thread itself (TC -> LDM -> TC in one
  // thread) runs in the same batch while the budget lasts, so the replies it
  // leads to leave in one send instead of one per loop.
  while (executed < budget && may_execute() && execute_queue(in_queues_[index_], budget, &executed)) {
  }
  if (executed > 0) {
    bump(counters_.signals, executed);
    bump(counters_.active_loops);
  }
  return executed > 0;
}

bool WorkerThread::execute_queue(JobBuffer& queue, uint32_t budget, uint32_t* executed) {
  std::size_t done = 0;
  // Stop early when output piles up in the spill: it must stay bounded.
  while (*executed < budget && may_execute()) {
    const std::span<const std::byte> entry = queue.entry_at(done);
    if (entry.empty()) break;
    Block* block = decode(entry, window_[0]);
    if (!block->prefetches() || budget - *executed < 2) {
      execute_one(*block, window_[0]);
      done += entry.size();
      ++*executed;
      continue;
    }
    // A block that prefetches, and maybe more entries waiting: decode the
    // next few (entries stay put until consume()), let their blocks start
    // the loads they will need, then run them in order.
    Block* blocks[Block::kPrefetchWindow] = {block};
    std::size_t ends[Block::kPrefetchWindow] = {done + entry.size()};  // where each entry ends (gaps stepped over)
    uint32_t n = 1;
    for (std::size_t at = ends[0]; n < Block::kPrefetchWindow && n < budget - *executed; ++n) {
      const std::span<const std::byte> next = queue.entry_at(at);
      if (next.empty()) break;
      blocks[n] = decode(next, window_[n]);
      at += next.size();
      ends[n] = at;
    }
    if (n > 1) {
      for (int stage = 0; stage < 2; ++stage)
        for (uint32_t i = 0; i < n; ++i)
          if (blocks[i]->prefetches()) blocks[i]->prefetch(window_[i], stage);
    } else {
      // Alone: stage 0 only. Its loads (a key's bucket) then overlap the
      // block's own work before the lookup; stage 1 would wait for them.
      block->prefetch(window_[0], 0);
    }
    for (uint32_t i = 0; i < n && (i == 0 || may_execute()); ++i) {
      execute_one(*blocks[i], window_[i]);
      done = ends[i];
      ++*executed;
    }
  }
  if (done == 0) return false;
  queue.consume(done);
  return true;
}

Block* WorkerThread::decode(std::span<const std::byte> entry, Signal& signal) const {
  // The envelope's sender node, kind and flags (0 for a signal) onto the
  // Signal's first word in one load and store (every decode does this).
  static_assert(offsetof(Signal, sender_node) == 0 && offsetof(Signal, sender_kind) == 2 &&
                offsetof(Signal, reserved) == 3);
  static_assert(offsetof(Envelope, sender_node) == 4 && offsetof(Envelope, sender_kind) == 6 &&
                offsetof(Envelope, flags) == 7);
  std::memcpy(&signal.sender_node, entry.data() + offsetof(Envelope, sender_node), 4);
  signal.prefetch_note = 0;
  frame::decode_validated(entry.subspan(sizeof(Envelope)), signal.view);
  Block* block = block_here(signal.view.header.receiver);
  FJORD_ASSERT_MSG(block != nullptr, "signal routed to a thread that does not host its block");
  return block;
}

void WorkerThread::execute_one(Block& block, const Signal& signal) {
  current_work_.store((uint32_t{block.number()} << 16) | signal.view.header.signal_number, std::memory_order_relaxed);
  context_.block_ = &block;
  block.execute(signal, context_);
}

// ---- sending ------------------------------------------------------------------------

inline bool WorkerThread::send(Block& from, Address to, uint16_t signal_number, std::span<const uint32_t> data,
                               std::span<const std::span<const std::byte>> sections, uint32_t trace) {
  const frame::SignalHeader header{signal_number, to.block, from.ref(), trace};
  if (to.node != shared_.options.self && to.node != kNoNode) return place_remote(to.node, header, data, sections);
  const int dest = shared_.thread_of(to.block);
  FJORD_ASSERT_MSG(dest >= 0, "signal to a block that does not exist on this node");
  const auto thread = static_cast<uint32_t>(dest);
  place_local(thread, shared_.options.self, header, data, sections);
  // After the commit: a thread waiting for this signal sees it sooner.
  wake_later(thread);
  return true;
}

bool WorkerThread::place_remote(NodeId node, const frame::SignalHeader& header, std::span<const uint32_t> data,
                                std::span<const std::span<const std::byte>> sections) {
  LinkSlot& slot = shared_.links[node];
  if (node > kMaxNodeId || !slot.up.load(std::memory_order_acquire)) {
    bump(counters_.discarded);
    return false;
  }
  const std::size_t frame_len = frame_bytes_of(data, sections);
  if (spill_.empty()) {
    slot.send_lock.lock();
    transport::Transporter* t = slot.transporter.get();
    if (!t) {
      slot.send_lock.unlock();
      bump(counters_.discarded);
      return false;
    }
    const bool checksum = t->config().checksum;
    const std::size_t wire_len = checksum ? frame_bytes_of(data, sections, true) : frame_len;
    std::span<std::byte> space = t->reserve(wire_len);
    if (!space.empty()) {
      t->commit(frame::pack_frame_sized(space.data(), wire_len, header, data, sections, checksum), 1);
      slot.send_lock.unlock();
      flush_later(node);
      return true;
    }
    slot.send_lock.unlock();
  }
  // No room on the link now: keep it, in order, until the link drains.
  std::span<std::byte> space = spill_.append(kToLinkBit | node, JobBuffer::entry_bytes(frame_len));
  write_envelope(space.data(), frame_len, shared_.options.self);
  frame::pack_frame_sized(space.data() + sizeof(Envelope), frame_len, header, data, sections, false);
  bump(counters_.spill_events);
  flush_later(node);
  return true;
}

bool WorkerThread::copy_to_destination(Destination destination, std::span<const std::byte> entry) {
  if (!destination.to_link) {
    JobBuffer& q = *out_queues_[destination.index];
    Envelope envelope;
    std::memcpy(&envelope, entry.data(), sizeof envelope);
    const std::span<const std::byte> frame_bytes = entry.subspan(sizeof(Envelope));
    std::span<std::byte> space = q.reserve(frame_bytes.size());
    if (space.empty()) return false;
    std::memcpy(space.data(), frame_bytes.data(), frame_bytes.size());
    q.commit(frame_bytes.size(), envelope.sender_node, envelope.sender_kind);
    wake_later(destination.index);
    return true;
  }
  const auto node = static_cast<NodeId>(destination.index);
  LinkSlot& slot = shared_.links[node];
  if (!slot.up.load(std::memory_order_acquire)) {
    bump(counters_.discarded);
    return true;  // the node is gone: the signal is discarded, counted
  }
  slot.send_lock.lock();
  transport::Transporter* t = slot.transporter.get();
  bool placed = t == nullptr;
  if (t) {
    frame::SignalView v;
    const auto frame_bytes = entry.subspan(sizeof(Envelope));
    frame::decode_validated(frame_bytes, v);
    // Spilled frames were packed without a checksum; repack if the link wants one.
    std::span<const std::byte> sections[frame::kMaxSections];
    for (std::size_t i = 0; i < v.section_count; ++i) sections[i] = v.sections[i];
    uint32_t words[frame::kMaxDataWords];
    for (std::size_t i = 0; i < v.data_words; ++i) words[i] = v.word(i);
    const std::size_t want = t->config().checksum ? frame_bytes.size() + 8 : frame_bytes.size();
    std::span<std::byte> space = t->reserve(want);
    if (!space.empty()) {
      const std::size_t n =
          frame::pack_frame(space, v.header, {words, v.data_words}, {sections, v.section_count}, t->config().checksum);
      t->commit(n, 1);
      placed = true;
    } else {
      (void)t->flush();
    }
  }
  slot.send_lock.unlock();
  if (placed && t) flush_later(node);
  return placed;
}

bool WorkerThread::drain_spill() {
  bool moved = false;
  SpillQueue::Header h;
  std::span<const std::byte> entry;
  while (spill_.front(h, entry)) {
    const Destination d{(h.destination & kToLinkBit) != 0, h.destination & ~kToLinkBit};
    if (!copy_to_destination(d, entry)) break;  // strict order: wait for the head
    spill_.pop();
    moved = true;
  }
  return moved;
}

void WorkerThread::send_delayed(Block& from, uint32_t delay_ms, BlockRef to, uint16_t signal_number,
                                std::span<const uint32_t> data) {
  FJORD_ASSERT(data.size() <= BlockContext::kMaxDelayedDataWords);
  DelayedSignal d;
  d.from = from.ref();
  d.to = to;
  d.signal_number = signal_number;
  d.words = static_cast<uint8_t>(data.size());
  std::copy(data.begin(), data.end(), d.data);
  timers_.add(loop_now_ns_ + uint64_t{delay_ms} * 1'000'000, d);
}

// ---- step 4: send ---------------------------------------------------------------------

bool WorkerThread::flush_links() {
  bool work = false;
  // Links we wrote to this loop, and links whose last flush was partial.
  flush_list_.drain([this](NodeId node) { pending_flush_.add(node); });
  const bool delegate = plan_.nosend && !shared_.send_threads.empty();
  if (plan_.type == ThreadType::kSend && !shared_.options.single_threaded) {
    for (NodeId n = 1; n <= kMaxNodeId; ++n)
      if (shared_.links[n].needs_flush.exchange(false, std::memory_order_acq_rel)) pending_flush_.add(n);
  }
  pending_flush_.retain([&](NodeId node) {
    LinkSlot& slot = shared_.links[node];
    bool done = true;
    if (delegate) {
      slot.needs_flush.store(true, std::memory_order_release);
      shared_.threads[shared_.send_threads[node % shared_.send_threads.size()]]->waker().wake();
    } else if (slot.send_lock.try_lock()) {
      transport::Transporter* t = slot.transporter.get();
      done = !t || t->flush() != transport::FlushStatus::kPending;
      slot.send_lock.unlock();
      work = true;
    } else {
      done = false;  // another thread is sending on it; try again next loop
    }
    return !done;
  });
  return work;
}

void WorkerThread::wake_destinations() {
  wake_list_.drain([this](uint32_t thread) { shared_.threads[thread]->waker().wake(); });
}

ThreadStats WorkerThread::stats_snapshot() const {
  ThreadStats s;
  s.name = name();
  s.loops = counters_.loops.load(std::memory_order_relaxed);
  s.idle_polls = counters_.idle_polls.load(std::memory_order_relaxed);
  s.signals = counters_.signals.load(std::memory_order_relaxed);
  const uint64_t active = counters_.active_loops.load(std::memory_order_relaxed);
  s.mean_signals_per_loop = active == 0 ? 0.0 : static_cast<double>(s.signals) / static_cast<double>(active);
  s.busy_ns = counters_.busy_ns.load(std::memory_order_relaxed);
  s.spin_ns = counters_.spin_ns.load(std::memory_order_relaxed);
  s.sleep_ns = counters_.sleep_ns.load(std::memory_order_relaxed);
  uint32_t fill = 0;
  for (const JobBuffer& q : in_queues_)
    if (q.capacity() > 0) fill = std::max<uint32_t>(fill, static_cast<uint32_t>(q.used_bytes() * 100 / q.capacity()));
  s.job_buffer_fill_percent = fill;
  s.spill_events = counters_.spill_events.load(std::memory_order_relaxed);
  s.congestion_stops = counters_.congestion_stops.load(std::memory_order_relaxed);
  s.discarded_to_down_nodes = counters_.discarded.load(std::memory_order_relaxed);
  const uint64_t started = step_started_ns_.load(std::memory_order_relaxed);
  s.stuck_ms = started == 0 ? 0 : (monotonic_ns() - std::min(started, monotonic_ns())) / 1'000'000;
  return s;
}

// ---- Block, BlockContext -------------------------------------------------------------------

void Block::ignore_foreign_runtime_signal(const Signal& signal) {
  FJORD_ASSERT(!signal.from_own_node());
  if (!foreign_logged_)
    FJORD_LOG_WARN("%s: ignored runtime signal %u from node %u (%s): only this node's runtime sends it", name_.c_str(),
                   signal.number(), signal.sender_node, sender_kind_name(signal.sender_kind));
  foreign_logged_ = true;
}

NodeId BlockContext::self_node() const { return thread_.shared().options.self; }
uint64_t BlockContext::now_ns() const { return thread_.now_ns(); }

bool BlockContext::send(Address to, uint16_t signal_number, std::span<const uint32_t> data,
                        std::span<const std::span<const std::byte>> sections, uint32_t trace) {
  return thread_.send(*block_, to, signal_number, data, sections, trace);
}

void BlockContext::send_delayed(uint32_t delay_ms, BlockRef to, uint16_t signal_number,
                                std::span<const uint32_t> data) {
  thread_.send_delayed(*block_, delay_ms, to, signal_number, data);
}

Block* BlockContext::block_on_this_thread(BlockRef ref) const { return thread_.block_here(ref); }

bool BlockContext::node_hosts(BlockRef ref) const { return thread_.shared().thread_of(ref) >= 0; }

bool BlockContext::node_connected(NodeId node) const {
  return node == self_node() || (node <= kMaxNodeId && thread_.shared().links[node].up.load(std::memory_order_acquire));
}

transport::SendPressure BlockContext::pressure_to(NodeId node) const {
  if (node == self_node() || node > kMaxNodeId) return transport::SendPressure::kNormal;
  LinkSlot& slot = thread_.shared().links[node];
  if (!slot.up.load(std::memory_order_acquire)) return transport::SendPressure::kOverload;
  slot.send_lock.lock();
  const transport::Transporter* t = slot.transporter.get();
  const transport::SendPressure p = t ? t->send_pressure() : transport::SendPressure::kOverload;
  slot.send_lock.unlock();
  return p;
}

}  // namespace fjord::engine
