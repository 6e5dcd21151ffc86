#include "throughput.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <thread>

#include "fjord/base/cache.h"
#include "fjord/base/clock.h"
#include "machine.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kProgressSliceNs = 50'000'000;
// The longest a definer sleeps on a full ring: pop wakes it once half the
// ring is taken; this only bounds the wait if that wake-up is missed. The
// wake-up must pace the definer, not this sleep: at a few million
// operations/s a ring of 4096 drains in about this long.
constexpr uint64_t kFullRingSleepNs = 1'000'000;
constexpr uint64_t kExecutorSliceNs = 100'000;
constexpr uint64_t kOpenLoopAheadNs = 500'000;  // open loop: how far ahead of its time an operation is queued
constexpr uint32_t kSleepPollMs = 1;
constexpr uint64_t kIdleSleepNs = 50'000;
constexpr uint64_t kDrainNs = 10'000'000'000ULL;  // after the window, answers still owed may take this long

static_assert(alignof(std::atomic<uint64_t>) <= kCacheLineBytes);

uint64_t xorshift(uint64_t& state) noexcept {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// What every thread of one run shares.
struct Shared {
  const ThroughputPlan& plan;
  std::vector<std::unique_ptr<RequestRing>> rings;  // rings[definer * executors + executor]
  std::atomic<uint32_t> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop_definers{false};
  std::atomic<bool> stop_executors{false};
  uint64_t start_ns = 0;  // written before go (release), read after (acquire)
  uint64_t window_start_ns = 0;
  uint64_t window_end_ns = 0;
  alignas(kCacheLineBytes) std::atomic<uint64_t> completed{0};  // operations, for progress only

  explicit Shared(const ThroughputPlan& p) : plan(p) {}
  RequestRing& ring(uint32_t definer, uint32_t executor) { return *rings[definer * plan.executors + executor]; }
  void wait_for_go() {
    ready.fetch_add(1, std::memory_order_acq_rel);
    // Acquire pairs with the coordinator's release of go: start_ns and the
    // window are visible once go reads true.
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  }
};

// cpu < 0: leave the thread where the scheduler puts it.
void pin(int cpu) {
  if (cpu >= 0) (void)pin_this_thread(cpu);
}

struct DefinerResult {
  uint64_t full_waits = 0;
  Histogram late_ns;  // open loop: queued this long after its scheduled time
};

// Asks the kernel (EEVDF, Linux 6.12 on) for short time slices for the
// calling thread, so a definer that wakes on the same CPU gets it within
// about that long instead of after a default slice of a few milliseconds.
bool request_short_slice() {
  struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
  } attr{};
  attr.size = sizeof attr;
  attr.policy = SCHED_OTHER;
  attr.runtime = kExecutorSliceNs;
  return ::syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

// Sleeps until `deadline_ns` (or a little later: the kernel's wake-up).
// Definers never spin: on two CPUs they share one with the executors, and a
// spinning definer would hold it for a whole time slice.
void sleep_until_ns(uint64_t deadline_ns) {
  const uint64_t now = monotonic_ns();
  if (deadline_ns > now) std::this_thread::sleep_for(std::chrono::nanoseconds(deadline_ns - now));
}

// Queues one request; sleeps while the ring is full. False when stopped.
bool queue(Shared& shared, RequestRing& ring, const KeyRequest& request, DefinerResult& r) {
  while (!ring.push(request)) {
    ++r.full_waits;
    if (shared.stop_definers.load(std::memory_order_relaxed)) return false;
    ring.wait_for_room(kFullRingSleepNs);
  }
  return true;
}

// Prepares key operations and queues them, round robin over the executors:
// as fast as the queues take them (closed loop), or ahead of their
// scheduled times (open loop): everything due within kOpenLoopAheadNs is
// queued, then the definer sleeps until the next is due within half of
// that, and the executor sends each when it is due. (Sleeping until each
// operation's own time would wake the definer every few microseconds at
// high rates: a thread that is runnable that often takes half the CPU it
// shares with the executor, which then loses the CPU for whole time
// slices, and the open-loop latencies would be the harness's own.)
DefinerResult run_definer(Shared& shared, uint32_t index) {
  const ThroughputPlan& p = shared.plan;
  pin(p.cpu);
  (void)::prctl(PR_SET_TIMERSLACK, 1UL);  // wake as close to the schedule as the kernel can
  DefinerResult r;
  uint64_t rng = (p.seed + index * 0x9E3779B97F4A7C15ULL) | 1;
  const bool open = p.rate_per_s != 0;
  const double interval_ns = open ? 1e9 * p.definers / static_cast<double>(p.rate_per_s) : 0;
  shared.wait_for_go();
  uint32_t executor = index % p.executors;
  for (uint64_t k = 0; !shared.stop_definers.load(std::memory_order_relaxed); ++k) {
    KeyRequest request;
    request.id = xorshift(rng) % p.rows;
    request.update = xorshift(rng) % 100 >= p.read_percent;
    if (open) {
      request.scheduled_ns = shared.start_ns + static_cast<uint64_t>(static_cast<double>(k) * interval_ns);
      if (request.scheduled_ns >= shared.window_end_ns) break;
      if (request.scheduled_ns > monotonic_ns() + kOpenLoopAheadNs)
        sleep_until_ns(request.scheduled_ns - kOpenLoopAheadNs / 2);
    }
    if (!queue(shared, shared.ring(index, executor), request, r)) break;
    if (open) {
      const uint64_t now = monotonic_ns();
      r.late_ns.record(now > request.scheduled_ns ? now - request.scheduled_ns : 0);
    }
    executor = executor + 1 == p.executors ? 0 : executor + 1;
  }
  return r;
}

// Keeps transactions in flight on one connection.
class Executor {
 public:
  Executor(Shared& shared, uint32_t index, api::Session& connection, const AccessTable& table)
      : shared_(shared),
        p_(shared.plan),
        index_(index),
        conn_(connection),
        table_(table),
        requests_(static_cast<std::size_t>(p_.in_flight) * p_.batch),
        counts_(p_.in_flight, 0),
        active_(p_.in_flight, 0),
        sent_ns_(p_.in_flight, 0),
        filler_(table.spec.row_bytes - 24) {
    result_.api_node = connection.node_id();
    for (uint32_t s = p_.in_flight; s > 0; --s) free_slots_.push_back(s - 1);
  }

  ExecutorResult run() {
    pin(p_.cpu);
    result_.short_slice = request_short_slice();
    shared_.wait_for_go();
    const CpuMeter meter;
    for (uint64_t drain_deadline = 0;;) {
      const bool stopping = shared_.stop_executors.load(std::memory_order_acquire);
      bool worked = !stopping && send_some();
      worked = conn_.poll(0, 0) > 0 || worked;
      if (stopping) {
        if (conn_.in_flight() == 0) break;
        const uint64_t now = monotonic_ns();
        if (drain_deadline == 0) drain_deadline = now + kDrainNs;
        if (now > drain_deadline) {
          note_failure(std::to_string(conn_.in_flight()) + " transactions were never answered");
          break;
        }
      }
      if (!worked) idle();
    }
    result_.usage = meter.read();
    return std::move(result_);
  }

 private:
  // The next request to send: in the open loop only once it is due (`now`):
  // one taken from a ring early waits in held_.
  bool next_request(KeyRequest& out, uint64_t now) {
    if (holding_) {
      if (held_.scheduled_ns > now) return false;
      out = held_;
      holding_ = false;
      return true;
    }
    for (uint32_t tried = 0; tried < p_.definers; ++tried) {
      const uint32_t d = next_definer_;
      next_definer_ = d + 1 == p_.definers ? 0 : d + 1;
      if (!shared_.ring(d, index_).pop(out)) continue;
      if (out.scheduled_ns > now) {  // 0 in the closed loop
        held_ = out;
        holding_ = true;
        return false;
      }
      return true;
    }
    return false;
  }

  // Starts transactions while a slot is free and requests are queued (and due).
  bool send_some() {
    const uint64_t now = p_.rate_per_s != 0 ? monotonic_ns() : UINT64_MAX;
    bool sent = false;
    while (!free_slots_.empty()) {
      const uint32_t slot = free_slots_.back();
      KeyRequest* ops = &requests_[static_cast<std::size_t>(slot) * p_.batch];
      uint32_t count = 0;
      while (count < p_.batch && next_request(ops[count], now)) ++count;
      if (count == 0) break;
      free_slots_.pop_back();
      start(slot, ops, count);
      sent = true;
    }
    return sent;
  }

  void start(uint32_t slot, const KeyRequest* ops, uint32_t count) {
    key_.set(kIdColumn, ops[0].id);
    api::Transaction& tx = conn_.start_transaction(table_.table, count == 1 ? &key_ : nullptr);
    for (uint32_t i = 0; i < count; ++i) {
      key_.set(kIdColumn, ops[i].id);
      if (ops[i].update) {
        fill_filler(ops[i].id, filler_);
        changes_.set(kFillerColumn, std::span<const std::byte>(filler_));
        tx.update(*table_.table, key_, changes_);
      } else {
        tx.read(*table_.table, key_);
      }
    }
    counts_[slot] = count;
    active_[slot] = 1;
    sent_ns_[slot] = monotonic_ns();
    const Status s = tx.execute_async(api::ExecType::kCommit,
                                      [this, slot](api::Transaction& t, const Status& st) { complete(slot, t, st); });
    // Not sent: unless the API already failed it through the callback (a
    // link that went down does), it fails here.
    if (!s && active_[slot]) complete(slot, tx, s);
  }

  void note_failure(const std::string& why) {
    if (result_.first_failure.empty()) result_.first_failure = why;
  }

  void complete(uint32_t slot, api::Transaction& tx, const Status& status) {
    FJORD_ASSERT(active_[slot] == 1);
    active_[slot] = 0;
    const uint64_t now = monotonic_ns();
    const bool counted = now >= shared_.window_start_ns && now <= shared_.window_end_ns;
    const KeyRequest* ops = &requests_[static_cast<std::size_t>(slot) * p_.batch];
    const uint32_t count = counts_[slot];
    if (counted) {
      ++result_.transactions;
      // Closed loop: every operation of the transaction waited from its
      // send, one figure recorded `count` times (the histogram's own cost
      // stays off the executor's path, which shares a CPU on two cores).
      // Open loop: each from its own scheduled time.
      if (p_.rate_per_s == 0) {
        const uint64_t from = sent_ns_[slot];
        result_.latency_ns.record_n(now > from ? now - from : 0, count);
      }
      for (uint32_t i = 0; i < count; ++i) {
        if (p_.rate_per_s != 0) {
          const uint64_t from = ops[i].scheduled_ns;
          result_.latency_ns.record(now > from ? now - from : 0);
        }
        ops[i].update ? ++result_.updates : ++result_.reads;
        const bool read_missing = !ops[i].update && status && !tx.operation(i).has_row();
        if (!status || read_missing) {
          ++result_.failures;
          note_failure(status ? "a read returned no row" : status.message());
        }
      }
      result_.operations += count;
    }
    shared_.completed.fetch_add(count, std::memory_order_relaxed);
    tx.close();
    free_slots_.push_back(slot);
  }

  // Nothing sent or received: busy-poll on (a sleeping definer that wakes
  // preempts us), or with --poll sleep wait for an answer or a moment.
  void idle() {
    if (p_.busy_poll) {
      // Open loop: a definer woken on this CPU runs now, not at the next
      // scheduler tick (which left it milliseconds behind its schedule).
      if (p_.rate_per_s != 0) std::this_thread::yield();
      return;
    }
    if (conn_.in_flight() > 0)
      (void)conn_.poll(kSleepPollMs, 1);
    else
      sleep_until_ns(monotonic_ns() + kIdleSleepNs);
  }

  Shared& shared_;
  const ThroughputPlan& p_;
  const uint32_t index_;
  api::Session& conn_;
  const AccessTable& table_;
  std::vector<KeyRequest> requests_;  // in_flight slots of batch requests
  std::vector<uint32_t> counts_;
  std::vector<uint8_t> active_;  // a transaction of this slot is in flight
  std::vector<uint64_t> sent_ns_;
  std::vector<uint32_t> free_slots_;
  std::vector<std::byte> filler_;
  api::Row key_;
  api::Row changes_;
  uint32_t next_definer_ = 0;
  KeyRequest held_;  // open loop: taken from a ring before it was due
  bool holding_ = false;
  ExecutorResult result_;
};

// Waits for every thread, starts them together, draws progress until the
// window ends, then stops definers and executors in that order.
void coordinate(Shared& shared, std::size_t threads, Progress& progress) {
  const ThroughputPlan& p = shared.plan;
  while (shared.ready.load(std::memory_order_acquire) < threads) std::this_thread::yield();
  shared.start_ns = monotonic_ns();
  shared.window_start_ns = shared.start_ns + p.warmup_ns;
  shared.window_end_ns = shared.window_start_ns + p.duration_ns;
  shared.go.store(true, std::memory_order_release);
  progress.begin("throughput", (p.warmup_ns + p.duration_ns) / 1'000'000);
  for (uint64_t now = monotonic_ns(); now < shared.window_end_ns; now = monotonic_ns()) {
    progress.update((now - shared.start_ns) / 1'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(kProgressSliceNs, shared.window_end_ns - now)));
  }
  progress.clear();
}

}  // namespace

void RequestRing::wait_for_room(uint64_t timeout_ns) noexcept {
  producer_waiting_.store(1, std::memory_order_seq_cst);
  // Half the ring taken already (between the failed push and the store
  // above)? Then no sleep. The futex sleeps only while the word is still 1.
  if (queue_.size_hint(std::memory_order_seq_cst) > queue_.capacity() / 2) {
    const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&producer_waiting_), FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
  }
  producer_waiting_.store(0, std::memory_order_relaxed);
}

void RequestRing::wake() noexcept {
  if (producer_waiting_.exchange(0, std::memory_order_relaxed) != 0)
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&producer_waiting_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

double ThroughputResult::transactions_per_s() const {
  return window_ns == 0 ? 0.0 : static_cast<double>(transactions) * 1e9 / static_cast<double>(window_ns);
}

double ThroughputResult::operations_per_s() const {
  return window_ns == 0 ? 0.0 : static_cast<double>(operations) * 1e9 / static_cast<double>(window_ns);
}

ThroughputResult run_throughput(std::vector<std::unique_ptr<api::Connection>>& connections,
                                const std::vector<AccessTable>& tables, const ThroughputPlan& p, Progress& progress) {
  std::vector<api::Session*> sessions;
  sessions.reserve(connections.size());
  for (const auto& c : connections) sessions.push_back(c.get());
  return run_throughput(sessions, tables, p, progress);
}

ThroughputResult run_throughput(const std::vector<api::Session*>& sessions, const std::vector<AccessTable>& tables,
                                const ThroughputPlan& p, Progress& progress) {
  FJORD_ASSERT(sessions.size() == p.executors);
  FJORD_ASSERT(tables.size() == p.executors);
  FJORD_ASSERT(p.definers > 0);
  Shared shared(p);
  for (uint32_t i = 0; i < p.definers * p.executors; ++i)
    shared.rings.push_back(std::make_unique<RequestRing>(p.queue_capacity));
  std::vector<std::unique_ptr<Executor>> executors;
  for (uint32_t e = 0; e < p.executors; ++e)
    executors.push_back(std::make_unique<Executor>(shared, e, *sessions[e], tables[e]));
  ThroughputResult result;
  result.executors.resize(p.executors);
  std::vector<DefinerResult> definer_results(p.definers);
  std::vector<std::thread> executor_threads, definer_threads;
  for (uint32_t e = 0; e < p.executors; ++e)
    executor_threads.emplace_back([&, e] { result.executors[e] = executors[e]->run(); });
  for (uint32_t d = 0; d < p.definers; ++d)
    definer_threads.emplace_back([&, d] { definer_results[d] = run_definer(shared, d); });
  coordinate(shared, p.executors + p.definers, progress);
  shared.stop_definers.store(true, std::memory_order_relaxed);
  for (const auto& ring : shared.rings) ring->wake();  // a definer asleep on a full ring
  for (std::thread& t : definer_threads) t.join();
  shared.stop_executors.store(true, std::memory_order_release);
  for (std::thread& t : executor_threads) t.join();
  result.window_ns = p.duration_ns;
  for (const ExecutorResult& e : result.executors) {
    result.latency_ns.merge(e.latency_ns);
    result.transactions += e.transactions;
    result.operations += e.operations;
    result.reads += e.reads;
    result.updates += e.updates;
    result.failures += e.failures;
  }
  for (const DefinerResult& d : definer_results) {
    result.definer_full_waits += d.full_waits;
    result.definer_late_ns.merge(d.late_ns);
  }
  return result;
}

}  // namespace fjord::bench
