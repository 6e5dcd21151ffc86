// runtime_bench: the data node runtime's own costs, each beside its floor
// measured in the same run (Google Benchmark).
//
//   BM_BareCacheLineHandoff   floor: two threads ping-pong one cache line
//   BM_JobBufferSignalPingPong  a signal between blocks on two runtime threads
//                             (job buffers, scheduler loop, dispatch), round trip
//   BM_JobBufferVsBarePaired  the two above back to back, 15 pairs: the median
//                             ratio (the target's figure on a noisy host), the
//                             job buffers alone without the scheduler
//                             ("queue_only"), and the least loop any scheduler
//                             could run over them ("minimal_loop_ratio_median",
//                             to the same pair's bare hand-off)
//   BM_JobBufferHopBreakdown  where the ping-pong's round trip goes: each
//                             direction's hop (commit -> the other block
//                             starts: transfer, noticing, loop, decode,
//                             dispatch) and each block's turn (its code and
//                             the send up to the commit), medians from cycle
//                             stamps, beside the bare one-way hand-off
//   BM_IdleSchedulerLoop      loops/s of a spinning thread with nothing to do
//   BM_TrivialSignalsOneThread  signals/s executed by one loaded thread
//
// Threads are pinned to CPUs 0 and 1 when the machine has them. Round-trip
// figures are RTT (label "rtt_ns"). Run:  build/latency_bench/runtime_bench
// Never used as a test: benchmarks do not fail on time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/cycle_clock.h"
#include "fjord/engine/runtime/job_buffer.h"
#include "fjord/engine/runtime/runtime.h"
#include "machine.h"

namespace fjord::engine {
namespace {

constexpr uint16_t kPing = runtime_signals::kFirstUser;
constexpr uint16_t kSelf = kPing + 1;
constexpr BlockNumber kA = block_numbers::kFirstTest;
constexpr BlockNumber kB = block_numbers::kFirstTest + 1;

// Pins the calling thread; on a machine without that CPU it stays unpinned.
void pin_to(int cpu) { (void)bench::pin_this_thread(cpu); }

// The middle element (the upper one of an even count); v is reordered.
double median_of(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::vector<int> cpu(int c) {
  return static_cast<int>(std::thread::hardware_concurrency()) > c ? std::vector<int>{c} : std::vector<int>{};
}

// Time stamps taken by one block: when each execute() began and when its
// send returned, read from the cycle counter (base/cycle_clock.h: a few ns a
// read). Only the block's thread writes them, into memory of its own
// allocated before the run, so stamping adds no traffic between the threads.
struct Stamps {
  void reset(std::size_t capacity) {
    in.assign(capacity, 0);
    out.assign(capacity, 0);
    n = 0;
  }
  void add(uint64_t t_in, uint64_t t_out) {
    if (n < in.size()) {
      in[n] = t_in;
      out[n] = t_out;
      ++n;
    }
  }
  bool on() const { return !in.empty(); }
  std::vector<uint64_t> in, out;
  std::size_t n = 0;
};

class FnBlock final : public Block {
 public:
  using Fn = void (*)(FnBlock&, const Signal&, BlockContext&);
  FnBlock(BlockNumber n, Fn fn) : Block(n, 0, n == kA ? "A" : "B"), fn_(fn) {}
  void execute(const Signal& s, BlockContext& c) override { fn_(*this, s, c); }
  // Counts one more signal and returns the count. Only the block's thread
  // writes it, so a relaxed load and store are exact: a locked fetch_add
  // would charge the runtime's figures with an atomic RMW per signal.
  uint64_t count_one() {
    const uint64_t n = count.load(std::memory_order_relaxed) + 1;
    count.store(n, std::memory_order_relaxed);
    return n;
  }
  std::atomic<uint64_t> count{0};
  uint64_t target = 0;
  uint64_t started_ns = 0;
  std::atomic<uint64_t> elapsed_ns{0};
  alignas(64) Stamps stamps;  // empty unless a breakdown is measured

 private:
  Fn fn_;
};

// Round trips of one cache line between CPU 0 (this thread) and CPU 1 (an
// echo thread that spins without pausing); returns the mean RTT in ns.
double bare_handoff_rtt_ns(uint64_t rounds) {
  alignas(64) static std::atomic<uint64_t> ping{0};
  alignas(64) static std::atomic<uint64_t> pong{0};
  ping = pong = 0;
  std::atomic<bool> stop{false};
  std::atomic<bool> ready{false};
  std::thread echo([&] {
    pin_to(1);
    ready.store(true, std::memory_order_release);
    uint64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t v = ping.load(std::memory_order_acquire);
      if (v != seen) {
        seen = v;
        pong.store(v, std::memory_order_release);
      }
    }
  });
  pin_to(0);
  while (!ready.load(std::memory_order_acquire)) cpu_relax();
  const uint64_t t0 = monotonic_ns();
  for (uint64_t i = 1; i <= rounds; ++i) {
    ping.store(i, std::memory_order_release);
    while (pong.load(std::memory_order_acquire) != i) cpu_relax();
  }
  const uint64_t dt = monotonic_ns() - t0;
  stop = true;
  echo.join();
  return static_cast<double>(dt) / static_cast<double>(rounds);
}

void BM_BareCacheLineHandoff(benchmark::State& state) {
  constexpr uint64_t kRounds = 200000;
  double total_ns = 0;
  int n = 0;
  for (auto _ : state) {
    const double rtt = bare_handoff_rtt_ns(kRounds);
    total_ns += rtt;
    ++n;
    state.SetIterationTime(rtt * kRounds / 1e9);
  }
  state.counters["rtt_ns"] = total_ns / n;
}

// The queue alone, without the scheduler: two threads ping-pong 32-byte
// entries (a 24-byte frame, as a signal without data) through a pair of job
// buffers, each side polling its input with entry_at(). Returns mean RTT ns.
Result<double> raw_job_buffer_rtt_ns(uint64_t rounds) {
  auto to_b = JobBuffer::create(64 << 10);
  if (!to_b) return to_b.status();
  auto to_a = JobBuffer::create(64 << 10);
  if (!to_a) return to_a.status();
  constexpr std::size_t kFrame = 24;
  const auto send = [](JobBuffer& q, uint64_t v) {
    std::span<std::byte> space;
    while ((space = q.reserve(kFrame)).empty()) cpu_relax();
    std::memcpy(space.data(), &v, sizeof v);
    std::memset(space.data() + sizeof v, 0, kFrame - sizeof v);
    q.commit(kFrame, 1, SenderKind::kOwnNode);
  };
  const auto receive = [](JobBuffer& q) {
    std::span<const std::byte> e;
    std::size_t at = 0;
    while ((e = q.entry_at(at)).empty()) {
    }
    uint64_t v;
    std::memcpy(&v, e.data() + sizeof(Envelope), sizeof v);
    q.consume(at + e.size());
    return v;
  };
  std::thread echo([&] {
    pin_to(1);
    for (uint64_t i = 0; i <= rounds; ++i) send(*to_a, receive(*to_b));
  });
  pin_to(0);
  send(*to_b, 0);  // the first round trip warms both threads up
  uint64_t wrong = receive(*to_a) != 0 ? 1 : 0;
  const uint64_t t0 = monotonic_ns();
  for (uint64_t i = 1; i <= rounds; ++i) {
    send(*to_b, i);
    if (receive(*to_a) != i) ++wrong;
  }
  const uint64_t dt = monotonic_ns() - t0;
  echo.join();
  if (wrong > 0)
    return Status(StatusCode::kInternal, "job buffer echo returned " + std::to_string(wrong) + " wrong values");
  return static_cast<double>(dt) / static_cast<double>(rounds);
}

// The least a scheduler-shaped loop can do over these job buffers: each of
// two threads spins over three input queues (as a runtime thread reads its
// peer's, its own local queue and the injector row), with a pause every 8th
// poll as WorkerThread::idle(); on an entry it decodes the frame, calls a
// handler through a pointer (as a block is called), which packs the reply
// with pack_small_frame and commits it, then consumes the entry. No timers,
// statistics, routing or sending steps: the floor any runtime loop on this
// machine starts from, between queue_only and the runtime. Returns mean RTT ns.
Result<double> minimal_loop_rtt_ns(uint64_t rounds) {
  struct Side;
  using Handler = void (*)(Side&, const frame::SignalView&);
  struct Side {
    std::vector<JobBuffer> in;
    JobBuffer* out = nullptr;
    Handler handler = nullptr;
    uint64_t count = 0, target = 0, wrong = 0;
    std::atomic<bool>* stop = nullptr;
    void run() {
      uint64_t polls = 0;
      frame::SignalView view;
      while (!stop->load(std::memory_order_relaxed)) {
        JobBuffer* q = nullptr;
        for (JobBuffer& b : in)
          if (b.has_data()) {
            q = &b;
            break;
          }
        if (q == nullptr) {
          if ((++polls & 7) == 0) cpu_relax();
          continue;
        }
        std::size_t at = 0;
        const std::span<const std::byte> entry = q->entry_at(at);
        if (entry.empty()) {
          if (at != 0) q->consume(at);  // a gap stepped over
          continue;
        }
        frame::decode_validated(entry.subspan(sizeof(Envelope)), view);
        handler(*this, view);
        q->consume(at + entry.size());
      }
    }
    void reply(uint32_t trace) {
      std::span<std::byte> space;
      while ((space = out->reserve(frame::small_frame_bytes(0))).empty()) cpu_relax();
      const std::size_t n = frame::pack_small_frame(space.data(), {kPing, {kA, 0}, {kB, 0}, trace}, {});
      out->commit(n, 1, SenderKind::kOwnNode);
    }
  };
  std::atomic<bool> stop{false};
  Side a, b;
  for (Side* s : {&a, &b}) {
    s->stop = &stop;
    for (int i = 0; i < 3; ++i) {
      auto q = JobBuffer::create(1 << 20);
      if (!q) return q.status();
      s->in.push_back(std::move(q).value());
    }
  }
  a.out = &b.in[0];
  b.out = &a.in[0];
  b.handler = [](Side& self, const frame::SignalView& v) { self.reply(v.header.trace); };
  a.handler = [](Side& self, const frame::SignalView& v) {
    if (v.header.trace != static_cast<uint32_t>(self.count)) ++self.wrong;
    if (++self.count > self.target) {
      self.stop->store(true, std::memory_order_relaxed);
      return;
    }
    self.reply(static_cast<uint32_t>(self.count));
  };
  a.target = rounds;
  std::thread echo([&] {
    pin_to(1);
    b.run();
  });
  pin_to(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // both spinning
  const uint64_t t0 = monotonic_ns();
  a.reply(0);
  a.run();
  const uint64_t dt = monotonic_ns() - t0;
  echo.join();
  if (a.wrong > 0) return Status(StatusCode::kInternal, std::to_string(a.wrong) + " replies out of order");
  return static_cast<double>(dt) / static_cast<double>(rounds + 1);
}

// Two runtime threads: block A (CPU 0) sends kPing to B (CPU 1), B answers,
// A counts a round trip and sends the next until `target` are done.
class PingPongRuntime {
 public:
  Status start() {
    RuntimeOptions o;
    o.self = 1;
    ThreadSpec a{ThreadType::kTc, 0, cpu(0), ThreadSpec::Binding::kBind, false, false, 1'000'000};
    ThreadSpec b{ThreadType::kLdm, 0, cpu(1), ThreadSpec::Binding::kBind, false, false, 1'000'000};
    o.threads = {a, b};
    o.watchdog_ms = 0;
    auto rt = Runtime::create(o);
    if (!rt) return rt.status();
    rt_ = std::move(rt).value();
    auto block_a = std::make_unique<FnBlock>(kA, [](FnBlock& self, const Signal& s, BlockContext& c) {
      const uint64_t t_in = self.stamps.on() ? CycleClock::now() : 0;
      if (s.number() == kSelf)
        self.started_ns = monotonic_ns();
      else if (self.count_one() >= self.target) {
        self.elapsed_ns.store(monotonic_ns() - self.started_ns, std::memory_order_release);
        return;
      }
      c.send({1, {kB, 0}}, kPing, {});
      if (t_in != 0) self.stamps.add(t_in, CycleClock::now());
    });
    a_ = block_a.get();
    if (Status st = rt_->add_block(std::move(block_a), ThreadType::kTc, 0); !st) return st;
    auto block_b = std::make_unique<FnBlock>(kB, [](FnBlock& self, const Signal& s, BlockContext& c) {
      const uint64_t t_in = self.stamps.on() ? CycleClock::now() : 0;
      c.send({1, s.sender()}, kPing, {});
      if (t_in != 0) self.stamps.add(t_in, CycleClock::now());
    });
    b_ = block_b.get();
    if (Status st = rt_->add_block(std::move(block_b), ThreadType::kLdm, 0); !st) return st;
    return rt_->start();
  }
  // Makes the next run() stamp up to `rounds` round trips on both blocks
  // (between runs: the blocks' threads are idle then).
  void stamp(std::size_t rounds) {
    a_->stamps.reset(rounds + 1);
    b_->stamps.reset(rounds + 1);
  }
  const Stamps& stamps_a() const { return a_->stamps; }
  const Stamps& stamps_b() const { return b_->stamps; }
  // Runs `rounds` round trips; returns the mean RTT in ns.
  Result<double> run(uint64_t rounds) {
    a_->count = 0;
    a_->elapsed_ns = 0;
    a_->target = rounds;
    if (Status st = rt_->inject({1, {kA, 0}}, kSelf, {}); !st) return st;
    // The caller may share CPU 0 with thread A: wake rarely.
    while (a_->elapsed_ns.load(std::memory_order_acquire) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return static_cast<double>(a_->elapsed_ns) / static_cast<double>(rounds);
  }
  void stop() { rt_->stop(); }

 private:
  std::unique_ptr<Runtime> rt_;
  FnBlock* a_ = nullptr;
  FnBlock* b_ = nullptr;
};

void BM_JobBufferSignalPingPong(benchmark::State& state) {
  PingPongRuntime rt;
  if (Status st = rt.start(); !st) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  constexpr uint64_t kRounds = 200000;
  double total_ns = 0;
  int n = 0;
  for (auto _ : state) {
    const Result<double> measured = rt.run(kRounds);
    if (!measured) {
      state.SkipWithError(measured.status().to_string().c_str());
      break;
    }
    const double rtt = measured.value();
    total_ns += rtt;
    ++n;
    state.SetIterationTime(rtt * kRounds / 1e9);
  }
  rt.stop();
  state.counters["rtt_ns"] = total_ns / n;
}

// The target's ratio, robust to a host whose speed changes from second to
// second: each iteration measures the bare hand-off and then the job buffer
// (a fresh runtime, so nothing else spins meanwhile), back to back, and the
// ratio of each pair is kept. Reports the median pair and its ratio.
void BM_JobBufferVsBarePaired(benchmark::State& state) {
  constexpr uint64_t kRounds = 50000;
  std::vector<double> ratios, bare, jb, raw, loop;
  for (auto _ : state) {
    const double b = bare_handoff_rtt_ns(kRounds);
    PingPongRuntime rt;
    if (Status st = rt.start(); !st) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
    Result<double> j = rt.run(kRounds / 10);  // warm up: first touches, thread start
    if (j) j = rt.run(kRounds);
    rt.stop();
    const Result<double> queue_only = raw_job_buffer_rtt_ns(kRounds);
    const Result<double> minimal = minimal_loop_rtt_ns(kRounds);
    if (!j || !queue_only || !minimal) {
      state.SkipWithError((!j ? j.status() : !queue_only ? queue_only.status() : minimal.status()).to_string().c_str());
      return;
    }
    raw.push_back(queue_only.value());
    loop.push_back(minimal.value() / b);
    bare.push_back(b);
    jb.push_back(*j);
    ratios.push_back(*j / b);
    state.SetIterationTime((b + *j) * kRounds / 1e9);
  }
  state.counters["bare_rtt_ns"] = median_of(bare);
  state.counters["jb_rtt_ns"] = median_of(jb);
  state.counters["queue_only_rtt_ns"] = median_of(raw);
  state.counters["minimal_loop_ratio_median"] = median_of(loop);
  state.counters["ratio_min"] = *std::min_element(ratios.begin(), ratios.end());
  state.counters["ratio_max"] = *std::max_element(ratios.begin(), ratios.end());
  state.counters["ratio_median"] = median_of(ratios);
}

// One round trip k, as the stamps see it: A's send of ping k returns (A out
// k), B starts (B in k), B's send of the reply returns (B out k), A starts
// (A in k+1; A's execute k = 0 was the start signal), A's next send returns.
// A hop includes the cache-line transfer the bare hand-off measures; what a
// hop costs beyond bare_one_way_ns is the scheduler's (noticing the entry,
// the loop's steps before execute, decode, dispatch). A turn is the block's
// own code and the send path up to the commit (A's also counts the round).
void BM_JobBufferHopBreakdown(benchmark::State& state) {
  constexpr uint64_t kRounds = 100000;
  const double ns_per_tick = CycleClock(50'000'000).ns_per_tick();
  std::vector<double> to_b, b_turn, to_a, a_turn, bare, rtt;
  for (auto _ : state) {
    // As in the paired benchmark: the bare hand-off first, then a fresh
    // runtime (its threads spin for a second after each run, and would take
    // the bare hand-off's CPUs).
    const double b = bare_handoff_rtt_ns(kRounds / 2);
    PingPongRuntime rt;
    if (Status st = rt.start(); !st) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
    Result<double> j = rt.run(kRounds / 10);  // warm up
    rt.stamp(kRounds);
    if (j) j = rt.run(kRounds);
    rt.stop();
    if (!j) {
      state.SkipWithError(j.status().to_string().c_str());
      break;
    }
    const Stamps& a = rt.stamps_a();
    const Stamps& bs = rt.stamps_b();
    std::vector<double> hop_b, turn_b, hop_a, turn_a;
    // B's stamps for round k were written before the reply that A stamped as
    // in[k + 1] (the job buffer orders them): read only those, never bs.n.
    for (std::size_t k = 0; k + 1 < a.n; ++k) {
      if (a.in[k + 1] < bs.out[k] || bs.in[k] < a.out[k]) continue;  // counters that disagree: not recorded
      hop_b.push_back(static_cast<double>(bs.in[k] - a.out[k]) * ns_per_tick);
      turn_b.push_back(static_cast<double>(bs.out[k] - bs.in[k]) * ns_per_tick);
      hop_a.push_back(static_cast<double>(a.in[k + 1] - bs.out[k]) * ns_per_tick);
      turn_a.push_back(static_cast<double>(a.out[k + 1] - a.in[k + 1]) * ns_per_tick);
    }
    if (hop_b.size() < kRounds / 2) {
      state.SkipWithError("fewer than half the round trips had ordered stamps (CPU counters not in step?)");
      break;
    }
    to_b.push_back(median_of(hop_b));
    b_turn.push_back(median_of(turn_b));
    to_a.push_back(median_of(hop_a));
    a_turn.push_back(median_of(turn_a));
    bare.push_back(b);
    rtt.push_back(*j);
    state.SetIterationTime((b + *j) * kRounds / 1e9);
  }
  if (rtt.empty()) return;
  state.counters["bare_one_way_ns"] = median_of(bare) / 2;
  state.counters["hop_to_b_ns"] = median_of(to_b);
  state.counters["b_turn_ns"] = median_of(b_turn);
  state.counters["hop_to_a_ns"] = median_of(to_a);
  state.counters["a_turn_ns"] = median_of(a_turn);
  state.counters["rtt_ns"] = median_of(rtt);
}

void BM_IdleSchedulerLoop(benchmark::State& state) {
  RuntimeOptions o;
  o.self = 1;
  o.threads = {ThreadSpec{ThreadType::kLdm, 0, cpu(1), ThreadSpec::Binding::kBind, false, false,
                          100'000'000}};  // spins 100 s: never sleeps here
  o.watchdog_ms = 0;
  auto rt = Runtime::create(o);
  if (!rt) {
    state.SkipWithError(rt.status().to_string().c_str());
    return;
  }
  // A thread with no block never runs: give it one that is never signalled.
  Status st = (*rt)->add_block(std::make_unique<FnBlock>(kA, [](FnBlock&, const Signal&, BlockContext&) {}),
                               ThreadType::kLdm, 0);
  if (st) st = (*rt)->start();
  if (!st) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double rate = 0;
  for (auto _ : state) {
    // An idle loop spends its time in the spin phase: count checks of all
    // inputs per second from the thread's spin time and loop structure.
    const ThreadStats before = (*rt)->thread_stats()[0];
    const uint64_t t0 = monotonic_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const ThreadStats after = (*rt)->thread_stats()[0];
    const double seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
    rate = static_cast<double>(after.idle_polls - before.idle_polls) / seconds;
    state.SetIterationTime(seconds);
  }
  (*rt)->stop();
  state.counters["idle_loops_per_s"] = rate;
}

void BM_TrivialSignalsOneThread(benchmark::State& state) {
  RuntimeOptions o;
  o.self = 1;
  o.threads = {ThreadSpec{ThreadType::kLdm, 0, cpu(1), ThreadSpec::Binding::kBind, false, false, 0}};
  o.watchdog_ms = 0;
  auto rt = Runtime::create(o);
  if (!rt) {
    state.SkipWithError(rt.status().to_string().c_str());
    return;
  }
  auto block = std::make_unique<FnBlock>(kA, [](FnBlock& self, const Signal& s, BlockContext& c) {
    if (s.number() == kSelf) self.started_ns = monotonic_ns();
    if (self.count_one() >= self.target) {
      self.elapsed_ns.store(monotonic_ns() - self.started_ns, std::memory_order_release);
      return;
    }
    // Keep 64 signals in flight in the local queue.
    c.send({1, {kA, 0}}, kPing, {});
    if (s.number() == kSelf)
      for (int i = 0; i < 63; ++i) c.send({1, {kA, 0}}, kPing, {});
  });
  FnBlock* p = block.get();
  Status st = (*rt)->add_block(std::move(block), ThreadType::kLdm, 0);
  if (st) st = (*rt)->start();
  if (!st) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  double rate = 0;
  for (auto _ : state) {
    p->count = 0;
    p->elapsed_ns = 0;
    p->target = 20'000'000;
    if (st = (*rt)->inject({1, {kA, 0}}, kSelf, {}); !st) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    while (p->elapsed_ns.load(std::memory_order_acquire) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    rate = static_cast<double>(p->target) / (static_cast<double>(p->elapsed_ns) / 1e9);
    state.SetIterationTime(static_cast<double>(p->elapsed_ns) / 1e9);
  }
  (*rt)->stop();
  state.counters["signals_per_s"] = rate;
}

BENCHMARK(BM_BareCacheLineHandoff)->UseManualTime()->Iterations(5);
BENCHMARK(BM_JobBufferSignalPingPong)->UseManualTime()->Iterations(5);
BENCHMARK(BM_JobBufferVsBarePaired)->UseManualTime()->Iterations(15);
BENCHMARK(BM_JobBufferHopBreakdown)->UseManualTime()->Iterations(5);
BENCHMARK(BM_IdleSchedulerLoop)->UseManualTime()->Iterations(5);
BENCHMARK(BM_TrivialSignalsOneThread)->UseManualTime()->Iterations(5);

}  // namespace
}  // namespace fjord::engine

BENCHMARK_MAIN();
