// runtime_bench: the data node runtime's own costs, each beside its floor
// measured in the same run (Google Benchmark).
//
//   BM_BareCacheLineHandoff   floor: two threads ping-pong one cache line
//   BM_JobBufferSignalPingPong  a signal between blocks on two runtime threads
//                             (job buffers, scheduler loop, dispatch), round trip
//   BM_IdleSchedulerLoop      loops/s of a spinning thread with nothing to do
//   BM_TrivialSignalsOneThread  signals/s executed by one loaded thread
//
// Threads are pinned to CPUs 0 and 1 when the machine has them. Round-trip
// figures are RTT (label "rtt_ns"). Run:  build/latency_bench/runtime_bench
// Never used as a test: benchmarks do not fail on time.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <memory>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/engine/runtime/runtime.h"

namespace fjord::engine {
namespace {

constexpr uint16_t kPing = runtime_signals::kFirstUser;
constexpr uint16_t kSelf = kPing + 1;
constexpr BlockNumber kA = block_numbers::kFirstTest;
constexpr BlockNumber kB = block_numbers::kFirstTest + 1;

void pin_to(int cpu) {
  if (static_cast<int>(std::thread::hardware_concurrency()) <= cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

std::vector<int> cpu(int c) {
  return static_cast<int>(std::thread::hardware_concurrency()) > c ? std::vector<int>{c} : std::vector<int>{};
}

class FnBlock final : public Block {
 public:
  using Fn = void (*)(FnBlock&, const Signal&, BlockContext&);
  FnBlock(BlockNumber n, Fn fn) : Block(n, 0, n == kA ? "A" : "B"), fn_(fn) {}
  void execute(const Signal& s, BlockContext& c) override { fn_(*this, s, c); }
  std::atomic<uint64_t> count{0};
  uint64_t target = 0;
  uint64_t started_ns = 0;
  std::atomic<uint64_t> elapsed_ns{0};

 private:
  Fn fn_;
};

void BM_BareCacheLineHandoff(benchmark::State& state) {
  alignas(64) static std::atomic<uint64_t> ping{0};
  alignas(64) static std::atomic<uint64_t> pong{0};
  ping = pong = 0;
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    pin_to(1);
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
  constexpr uint64_t kRounds = 200000;
  uint64_t i = 0, total_ns = 0, total = 0;
  for (auto _ : state) {
    const uint64_t t0 = monotonic_ns();
    for (uint64_t k = 0; k < kRounds; ++k) {
      ping.store(++i, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != i) cpu_relax();
    }
    const uint64_t dt = monotonic_ns() - t0;
    total_ns += dt;
    total += kRounds;
    state.SetIterationTime(static_cast<double>(dt) / 1e9);
  }
  stop = true;
  echo.join();
  state.counters["rtt_ns"] = static_cast<double>(total_ns) / static_cast<double>(total);
}

// Block A (thread on CPU 0) sends kPing to B (CPU 1), B answers, A counts a
// round trip and sends the next, until `target` round trips are done.
void BM_JobBufferSignalPingPong(benchmark::State& state) {
  RuntimeOptions o;
  o.self = 1;
  ThreadSpec a{ThreadType::kTc, 0, cpu(0), ThreadSpec::Binding::kBind, false, false, 1'000'000};
  ThreadSpec b{ThreadType::kLdm, 0, cpu(1), ThreadSpec::Binding::kBind, false, false, 1'000'000};
  o.threads = {a, b};
  o.watchdog_ms = 0;
  auto rt = Runtime::create(o);
  if (!rt) {
    state.SkipWithError(rt.status().to_string().c_str());
    return;
  }
  auto block_a = std::make_unique<FnBlock>(kA, [](FnBlock& self, const Signal& s, BlockContext& c) {
    if (s.number() == kSelf)
      self.started_ns = monotonic_ns();
    else if (self.count.fetch_add(1, std::memory_order_relaxed) + 1 >= self.target) {
      self.elapsed_ns.store(monotonic_ns() - self.started_ns, std::memory_order_release);
      return;
    }
    c.send({1, {kB, 0}}, kPing, {});
  });
  FnBlock* pa = block_a.get();
  (void)(*rt)->add_block(std::move(block_a), ThreadType::kTc, 0);
  (void)(*rt)->add_block(std::make_unique<FnBlock>(kB,
                                                   [](FnBlock&, const Signal& s, BlockContext& c) {
                                                     c.send({1, s.sender()}, kPing, {});
                                                   }),
                         ThreadType::kLdm, 0);
  (void)(*rt)->start();
  uint64_t total_ns = 0, total = 0;
  for (auto _ : state) {
    pa->count = 0;
    pa->elapsed_ns = 0;
    pa->target = 200000;
    (void)(*rt)->inject({1, {kA, 0}}, kSelf, {});
    while (pa->elapsed_ns.load(std::memory_order_acquire) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    total_ns += pa->elapsed_ns;
    total += pa->target;
    state.SetIterationTime(static_cast<double>(pa->elapsed_ns) / 1e9);
  }
  (*rt)->stop();
  state.counters["rtt_ns"] = static_cast<double>(total_ns) / static_cast<double>(total);
}

void BM_IdleSchedulerLoop(benchmark::State& state) {
  RuntimeOptions o;
  o.self = 1;
  o.threads = {ThreadSpec{ThreadType::kLdm, 0, cpu(1), ThreadSpec::Binding::kBind, false, false,
                          100'000'000}};  // spins 100 s: never sleeps here
  o.watchdog_ms = 0;
  auto rt = Runtime::create(o);
  // A thread with no block never runs: give it one that is never signalled.
  (void)(*rt)->add_block(std::make_unique<FnBlock>(kA, [](FnBlock&, const Signal&, BlockContext&) {}), ThreadType::kLdm,
                         0);
  if (Status st = (*rt)->start(); !st) {
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
  auto block = std::make_unique<FnBlock>(kA, [](FnBlock& self, const Signal& s, BlockContext& c) {
    if (s.number() == kSelf) self.started_ns = monotonic_ns();
    if (self.count.fetch_add(1, std::memory_order_relaxed) + 1 >= self.target) {
      self.elapsed_ns.store(monotonic_ns() - self.started_ns, std::memory_order_release);
      return;
    }
    // Keep 64 signals in flight in the local queue.
    c.send({1, {kA, 0}}, kPing, {});
    if (s.number() == kSelf)
      for (int i = 0; i < 63; ++i) c.send({1, {kA, 0}}, kPing, {});
  });
  FnBlock* p = block.get();
  (void)(*rt)->add_block(std::move(block), ThreadType::kLdm, 0);
  (void)(*rt)->start();
  double rate = 0;
  for (auto _ : state) {
    p->count = 0;
    p->elapsed_ns = 0;
    p->target = 20'000'000;
    (void)(*rt)->inject({1, {kA, 0}}, kSelf, {});
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
BENCHMARK(BM_IdleSchedulerLoop)->UseManualTime()->Iterations(5);
BENCHMARK(BM_TrivialSignalsOneThread)->UseManualTime()->Iterations(5);

}  // namespace
}  // namespace fjord::engine

BENCHMARK_MAIN();
