// Runtime: builds the threads and their job buffers from the options, places
// blocks, hands links to receive threads, and runs the watchdog.
#include "fjord/engine/runtime/runtime.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "worker_thread.h"

namespace fjord::engine {

namespace {

bool runs_a_loop(ThreadType type) {
  // io and wd entries describe threads that the runtime does not run as
  // scheduler loops (there is no disk I/O; the watchdog is its own thread).
  return type != ThreadType::kIo && type != ThreadType::kWatchdog;
}

}  // namespace

// The watchdog and its thread, kept apart from RuntimeShared (threads never see it).
struct Watchdog {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable stop_cv;
  bool stop = false;
  // Per thread, the loop step last reported stuck. Sized before the thread
  // starts: a watchdog thread scheduled late must not allocate while the
  // runtime is in its steady state (the allocation tests count every new).
  std::vector<uint64_t> reported;
};

Runtime::Runtime(RuntimeOptions options) : shared_(std::make_unique<RuntimeShared>()) {
  shared_->options = std::move(options);
}

Runtime::~Runtime() { stop(); }

const RuntimeOptions& Runtime::options() const { return shared_->options; }

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  if (options.self == kNoNode || options.self > kMaxNodeId)
    return Status(StatusCode::kInvalidArgument, "node id " + std::to_string(options.self) + " outside 1..255");
  if (options.single_threaded && options.threads.size() != 1)
    return Status(StatusCode::kInvalidArgument,
                  "single-threaded mode runs exactly one thread, " + std::to_string(options.threads.size()) + " given");
  if (options.caller_runs_loop && !options.single_threaded)
    return Status(StatusCode::kInvalidArgument, "the caller runs the loop of a single-threaded runtime only");
  if (options.batch_signals == 0 || options.congestion_percent == 0 || options.congestion_percent > 90)
    return Status(StatusCode::kInvalidArgument, "batch_signals must be > 0 and congestion_percent in 1..90");
  if (options.execution_timer_us > kExecutionTimerMaxUs)
    return Status(StatusCode::kInvalidArgument, "execution_timer_us " + std::to_string(options.execution_timer_us) +
                                                    " is above " + std::to_string(kExecutionTimerMaxUs) +
                                                    " (SchedulerExecutionTimer's range)");
  std::unique_ptr<Runtime> rt(new Runtime(std::move(options)));
  RuntimeShared& s = *rt->shared_;
  for (const ThreadSpec& spec : s.options.threads) {
    if (!s.options.single_threaded && !runs_a_loop(spec.type)) continue;
    const auto index = static_cast<uint32_t>(s.threads.size());
    s.threads.push_back(std::make_unique<WorkerThread>(s, index, spec));
    if (s.options.single_threaded || spec.type == ThreadType::kRecv)
      s.receiver_threads.push_back(index);
    else if (spec.type == ThreadType::kSend)
      s.send_threads.push_back(index);
  }
  if (s.threads.empty()) return Status(StatusCode::kInvalidArgument, "no threads to run");
  s.injector_row = static_cast<uint32_t>(s.threads.size());
  s.links = std::make_unique<LinkSlot[]>(kMaxNodeId + 1);
  for (auto& t : s.threads)
    if (Status st = t->init(); !st) return st;
  return rt;
}

void RuntimeShared::set_route(BlockRef ref, int thread) {
  if (ref.instance >= route_stride) {
    const uint32_t stride = ref.instance + 1u;
    LineVector<int> wider(route_stride == 0 ? 0 : route.size() / route_stride * stride, -1);
    for (std::size_t at = 0; at < route.size(); ++at) wider[at / route_stride * stride + at % route_stride] = route[at];
    route = std::move(wider);
    route_stride = stride;
  }
  const std::size_t at = std::size_t{ref.block} * route_stride + ref.instance;
  if (at >= route.size()) route.resize((std::size_t{ref.block} + 1) * route_stride, -1);
  route[at] = thread;
}

Status Runtime::add_block(std::unique_ptr<Block> block, ThreadType type, uint32_t instance) {
  RuntimeShared& s = *shared_;
  if (s.started) return Status(StatusCode::kInvalidArgument, "add_block after start");
  WorkerThread* target = nullptr;
  for (auto& t : s.threads) {
    if (s.options.single_threaded || (t->plan().type == type && t->plan().instance == instance)) {
      target = t.get();
      break;
    }
  }
  if (!target)
    return Status(StatusCode::kNotFound, std::string("no ") + thread_type_name(type) + " thread " +
                                             std::to_string(instance) + " for block " + block->name());
  const BlockRef ref = block->ref();
  if (s.thread_of(ref) >= 0) return Status(StatusCode::kAlreadyExists, "block " + block->name() + " added twice");
  s.set_route(ref, static_cast<int>(target->index()));
  if (block->wants_node_events()) s.node_event_blocks.push_back(block.get());
  target->add_block(std::move(block));
  return Status::ok();
}

Status Runtime::start() {
  RuntimeShared& s = *shared_;
  if (s.started.exchange(true)) return Status(StatusCode::kInvalidArgument, "runtime already started");
  if (s.options.caller_runs_loop)
    s.threads.front()->start_on_caller();
  else
    for (auto& t : s.threads)
      if (t->has_work()) t->start();  // a thread with no blocks, links or sending to do never runs
  if (s.options.watchdog_ms > 0) {
    watchdog_ = std::make_unique<Watchdog>();
    watchdog_->reported.assign(s.threads.size(), 0);
    // The layout's wd entry places it (a single-threaded runtime's layout is
    // its one thread: the watchdog then runs anywhere).
    ThreadSpec placement;
    for (const ThreadSpec& spec : s.options.threads)
      if (spec.type == ThreadType::kWatchdog) placement = spec;
    watchdog_->thread = std::thread([this, placement] {
      apply_placement(placement, "wd 0");
      run_watchdog();
    });
  }
  FJORD_LOG_INFO("node %u: runtime started with %zu threads", s.options.self, s.threads.size());
  return Status::ok();
}

void Runtime::stop() {
  RuntimeShared& s = *shared_;
  if (!s.started.load() || s.stopping.exchange(true, std::memory_order_acq_rel)) return;
  for (auto& t : s.threads) t->waker().wake();
  for (auto& t : s.threads) t->join();
  if (watchdog_) {
    {
      std::lock_guard lock(watchdog_->mutex);
      watchdog_->stop = true;
    }
    watchdog_->stop_cv.notify_all();
    watchdog_->thread.join();
  }
  for (NodeId n = 1; n <= kMaxNodeId; ++n) {
    LinkSlot& slot = s.links[n];
    if (slot.transporter) {
      slot.up.store(false);
      slot.transporter->close("node " + std::to_string(s.options.self) + " is stopping");
      slot.transporter.reset();
    }
  }
}

void Runtime::run_watchdog() {
  RuntimeShared& s = *shared_;
  const uint64_t limit_ns = uint64_t{s.options.watchdog_ms} * 1'000'000;
  std::vector<uint64_t>& reported = watchdog_->reported;
  std::unique_lock lock(watchdog_->mutex);
  const auto period = std::chrono::milliseconds(std::clamp<uint32_t>(s.options.watchdog_ms / 10, 1, 100));
  while (!watchdog_->stop_cv.wait_for(lock, period, [&] { return watchdog_->stop; })) {
    const uint64_t now = monotonic_ns();
    for (std::size_t i = 0; i < s.threads.size(); ++i) {
      const WorkerThread& t = *s.threads[i];
      const uint64_t started = t.step_started_ns();
      if (started == 0 || started > now || now - started < limit_ns || reported[i] == started) continue;
      reported[i] = started;
      const uint32_t work = t.current_work();
      const auto block_number = static_cast<BlockNumber>(work >> 16);
      std::string block_name = "block " + std::to_string(block_number);
      for (const auto& b : t.blocks())
        if (b->number() == block_number) block_name = b->name();
      const std::string message = "watchdog: thread " + t.name() + " stuck for " +
                                  std::to_string((now - started) / 1'000'000) + " ms in one loop step, executing " +
                                  block_name + " signal " + std::to_string(work & 0xFFFF);
      if (s.options.on_watchdog)
        s.options.on_watchdog(message);
      else
        FJORD_LOG_ERROR("%s", message.c_str());
    }
  }
}

bool Runtime::run_once() {
  RuntimeShared& s = *shared_;
  FJORD_ASSERT_MSG(s.options.caller_runs_loop, "run_once() on a runtime that runs its own thread");
  FJORD_ASSERT_MSG(s.started.load(std::memory_order_relaxed), "run_once() before start()");
  return s.threads.front()->run_once_on_caller();
}

Status Runtime::attach_link(std::unique_ptr<transport::Transporter> transporter, SenderKind peer_kind) {
  RuntimeShared& s = *shared_;
  FJORD_ASSERT(transporter != nullptr);
  const NodeId node = transporter->remote_node();
  if (peer_kind == SenderKind::kOwnNode)
    return Status(StatusCode::kInvalidArgument,
                  "link to node " + std::to_string(node) + ": a link's peer is a data, API or management node");
  if (s.receiver_threads.empty())
    return Status(StatusCode::kInvalidArgument, "this runtime has no recv (or single) thread to receive links");
  if (transporter->local_node() != s.options.self)
    return Status(StatusCode::kInvalidArgument, "link belongs to node " + std::to_string(transporter->local_node()));
  LinkSlot& slot = s.links[node];
  slot.send_lock.lock();
  if (slot.transporter) {
    slot.send_lock.unlock();
    return Status(StatusCode::kAlreadyExists, "node " + std::to_string(node) + " is already connected");
  }
  slot.transporter = std::move(transporter);
  slot.type = slot.transporter->type();
  slot.peer_kind = peer_kind;
  slot.send_lock.unlock();
  const uint32_t pick = s.next_receiver.fetch_add(1) % s.receiver_threads.size();
  slot.recv_thread = s.receiver_threads[pick];
  slot.up.store(true, std::memory_order_release);
  s.threads[slot.recv_thread]->adopt_link(node);
  return Status::ok();
}

bool Runtime::link_up(NodeId node) const {
  return node <= kMaxNodeId && shared_->links[node].up.load(std::memory_order_acquire);
}

Status Runtime::inject(Address to, uint16_t signal_number, std::span<const uint32_t> data,
                       std::span<const std::span<const std::byte>> sections) {
  RuntimeShared& s = *shared_;
  if (to.node != s.options.self && to.node != kNoNode)
    return Status(StatusCode::kInvalidArgument, "inject only reaches blocks of this node");
  const int dest = s.thread_of(to.block);
  if (dest < 0)
    return Status(StatusCode::kNotFound,
                  "no block " + std::to_string(to.block.block) + " instance " + std::to_string(to.block.instance));
  if (sections.size() > frame::kMaxSections) return Status(StatusCode::kInvalidArgument, "too many sections");
  const std::size_t frame_len = frame::frame_bytes_for(data.size(), sections, false);
  if (frame_len == 0) return Status(StatusCode::kInvalidArgument, "signal does not fit one frame");
  std::lock_guard lock(s.inject_mutex);
  WorkerThread& t = *s.threads[static_cast<std::size_t>(dest)];
  JobBuffer& q = t.in_queue(s.injector_row);
  std::span<std::byte> space = q.reserve(frame_len);
  if (space.empty()) return Status(StatusCode::kResourceExhausted, "job buffer to " + t.name() + " is full");
  frame::pack_frame_sized(space.data(), frame_len, {signal_number, to.block, {0, 0}, 0}, data, sections, false);
  q.commit(frame_len, s.options.self, SenderKind::kOwnNode);
  t.waker().wake();
  return Status::ok();
}

std::vector<ThreadStats> Runtime::thread_stats() const {
  std::vector<ThreadStats> out;
  for (const auto& t : shared_->threads) out.push_back(t->stats_snapshot());
  return out;
}

std::vector<LinkStatsView> Runtime::link_stats() const {
  std::vector<LinkStatsView> out;
  for (NodeId n = 1; n <= kMaxNodeId; ++n) {
    LinkSlot& slot = shared_->links[n];
    const uint64_t refused = slot.refused_signals.load(std::memory_order_relaxed);
    const bool up = slot.up.load(std::memory_order_acquire);
    if (!up && refused == 0) continue;
    LinkStatsView v;
    v.node = n;
    v.refused_signals = refused;
    slot.send_lock.lock();
    v.type = slot.type;
    v.peer_kind = slot.peer_kind;
    v.last_refusal = slot.last_refusal;
    if (slot.transporter) {
      v.up = slot.transporter->is_up();
      v.stats = slot.transporter->stats();
      v.pressure = transport::send_pressure_name(slot.transporter->send_pressure());
    }
    const bool linked = up && slot.transporter != nullptr;
    slot.send_lock.unlock();
    if (linked || refused != 0) out.push_back(std::move(v));
  }
  return out;
}

std::string Runtime::describe_threads() const {
  const auto cpus_text = [](const ThreadSpec& p) {
    std::string cpus;
    for (int c : p.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    return "; cpus " + (cpus.empty() ? std::string("any")
                                     : std::string(p.binding == ThreadSpec::Binding::kBind ? "bind " : "set ") + cpus);
  };
  std::string out;
  for (const auto& t : shared_->threads) {
    const ThreadSpec& p = t->plan();
    out += t->name() + ": blocks ";
    std::string blocks;
    for (const auto& b : t->blocks()) blocks += (blocks.empty() ? "" : ",") + b->name();
    out += blocks.empty() ? "-" : blocks;
    if (!t->has_work()) out += " (idle: not started)";
    out += cpus_text(p);
    out += "; spintime " + std::to_string(p.spintime_us) + " us";
    if (p.realtime) out += "; realtime";
    if (p.thread_prio >= 0) out += "; thread_prio " + std::to_string(p.thread_prio);
    if (p.nosend) out += "; nosend";
    out += "\n";
  }
  const RuntimeOptions& o = shared_->options;
  out += "sending: " +
         (o.execution_timer_us == 0
              ? std::string("after every batch")
              : "after " + std::to_string(o.execution_timer_us) + " us of executing, and before waiting") +
         " (SchedulerExecutionTimer=" + std::to_string(o.execution_timer_us) + "); batches of up to " +
         std::to_string(o.batch_signals) + " signals\n";
  // The entries that are not scheduler loops, so the layout shows every
  // entry a ThreadConfig gave and what became of it.
  for (const ThreadSpec& p : o.threads) {
    if (o.single_threaded || runs_a_loop(p.type)) continue;
    out += std::string(thread_type_name(p.type)) + " " + std::to_string(p.instance) + ": ";
    if (p.type == ThreadType::kIo)
      out += "not run (an in-memory node does no disk I/O)";
    else if (o.watchdog_ms == 0)
      out += "not run (the watchdog is off)";
    else
      out += "the watchdog (reports a loop step longer than " + std::to_string(o.watchdog_ms) + " ms)";
    out += cpus_text(p);
    if (p.realtime) out += "; realtime";
    if (p.thread_prio >= 0) out += "; thread_prio " + std::to_string(p.thread_prio);
    out += "\n";
  }
  return out;
}

}  // namespace fjord::engine
