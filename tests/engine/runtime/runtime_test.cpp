// The data node runtime: ordering and no loss under stress, congestion,
// single- vs multi-threaded equivalence, timers, the watchdog, links.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/tcp/tcp.h"
#include "link_harness.h"
#include "test_blocks.h"

namespace fjord::engine {
namespace {

using test::eventually;
using test::LambdaBlock;
using test::options_with;
using test::plan;

constexpr uint16_t kGo = runtime_signals::kFirstUser;
constexpr uint16_t kData = kGo + 1;
constexpr uint16_t kDone = kGo + 2;
constexpr BlockNumber kProducer = block_numbers::kFirstTest;
constexpr BlockNumber kConsumer = block_numbers::kFirstTest + 1;

// Producers on several threads each send `count` sequenced signals (words:
// producer id, sequence) to every consumer; consumers check per-producer order.
struct OrderCheck {
  std::mutex mutex;
  std::vector<std::vector<uint32_t>> next;  // [consumer][producer]
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> errors{0};
};

std::unique_ptr<Block> producer_block(uint16_t instance, uint32_t consumers, uint32_t count, uint32_t per_step) {
  auto sent = std::make_shared<uint32_t>(0);
  return std::make_unique<LambdaBlock>(kProducer, instance, "PRODUCER(" + std::to_string(instance) + ")",
                                       [=](const Signal& s, BlockContext& c) {
                                         if (s.number() != kGo && s.number() != runtime_signals::kStart) return;
                                         // Send a slice, then re-arm ourselves: the loop
                                         // stays responsive and congestion can act.
                                         for (uint32_t k = 0; k < per_step && *sent < count; ++k, ++*sent)
                                           for (uint16_t dest = 0; dest < consumers; ++dest) {
                                             const uint32_t words[] = {instance, *sent};
                                             c.send({c.self_node(), {kConsumer, dest}}, kData, words);
                                           }
                                         if (*sent < count) c.send({c.self_node(), {kProducer, instance}}, kGo, {});
                                       });
}

std::unique_ptr<Block> consumer_block(uint16_t instance, OrderCheck& check, uint32_t work_ns = 0) {
  return std::make_unique<LambdaBlock>(kConsumer, instance, "CONSUMER(" + std::to_string(instance) + ")",
                                       [&check, instance, work_ns](const Signal& s, BlockContext&) {
                                         if (s.number() != kData) return;
                                         const uint32_t producer = s.word(0);
                                         const uint32_t seq = s.word(1);
                                         uint32_t& expect = check.next[instance][producer];
                                         if (seq != expect) check.errors.fetch_add(1);
                                         expect = seq + 1;
                                         check.received.fetch_add(1, std::memory_order_relaxed);
                                         if (work_ns) {
                                           const uint64_t until = monotonic_ns() + work_ns;
                                           while (monotonic_ns() < until) cpu_relax();
                                         }
                                       });
}

TEST(RuntimeTest, OrderingAndNoLossWithEightBusyThreadsOnTwoCores) {
  // 3 producer threads, 3 consumer threads, 1 main, 1 recv: all spinning.
  std::vector<ThreadSpec> plans;
  for (uint32_t i = 0; i < 3; ++i) plans.push_back(plan(ThreadType::kTc, i, 200));
  for (uint32_t i = 0; i < 3; ++i) plans.push_back(plan(ThreadType::kLdm, i, 200));
  plans.push_back(plan(ThreadType::kMain, 0, 200));
  plans.push_back(plan(ThreadType::kRecv, 0, 200));
  auto rt = Runtime::create(options_with(plans));
  ASSERT_TRUE(rt) << rt.status().to_string();
  OrderCheck check;
  check.next.assign(3, std::vector<uint32_t>(3, 0));
  constexpr uint32_t kCount = 40000;
  for (uint16_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*rt)->add_block(producer_block(i, 3, kCount, 64), ThreadType::kTc, i));
    ASSERT_TRUE((*rt)->add_block(consumer_block(i, check), ThreadType::kLdm, i));
  }
  ASSERT_TRUE((*rt)->start());
  for (uint16_t i = 0; i < 3; ++i) ASSERT_TRUE((*rt)->inject({1, {kProducer, i}}, kGo, {}));
  EXPECT_TRUE(eventually([&] { return check.received.load() == 9ull * kCount; }, 120000))
      << check.received.load() << " of " << 9 * kCount;
  (*rt)->stop();
  EXPECT_EQ(check.errors.load(), 0u);
  uint64_t executed = 0;
  for (const ThreadStats& s : (*rt)->thread_stats()) executed += s.signals;
  EXPECT_GE(executed, 9ull * kCount);
}

TEST(RuntimeTest, SlowConsumerStopsTheProducerWithoutLossAndWithBoundedMemory) {
  auto opts = options_with({plan(ThreadType::kTc, 0), plan(ThreadType::kLdm, 0)});
  opts.job_buffer_bytes = 64 << 10;  // small, so the producer meets it quickly
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  OrderCheck check;
  check.next.assign(1, std::vector<uint32_t>(1, 0));
  constexpr uint32_t kCount = 60000;
  // The producer re-arms itself after every 64 signals, far faster than the
  // consumer (2 us per signal) drains a 64 KB job buffer: it must spill and
  // then stop executing until the consumer catches up.
  ASSERT_TRUE((*rt)->add_block(producer_block(0, 1, kCount, 64), ThreadType::kTc, 0));
  ASSERT_TRUE((*rt)->add_block(consumer_block(0, check, 2000), ThreadType::kLdm, 0));
  ASSERT_TRUE((*rt)->start());
  ASSERT_TRUE((*rt)->inject({1, {kProducer, 0}}, kGo, {}));
  uint32_t max_fill = 0;
  EXPECT_TRUE(eventually(
      [&] {
        for (const ThreadStats& s : (*rt)->thread_stats()) max_fill = std::max(max_fill, s.job_buffer_fill_percent);
        return check.received.load() == kCount;
      },
      120000))
      << check.received.load();
  (*rt)->stop();
  EXPECT_EQ(check.errors.load(), 0u);
  const auto stats = (*rt)->thread_stats();
  EXPECT_GT(stats[0].spill_events, 0u) << "the producer never met a full job buffer";
  EXPECT_LE(max_fill, 100u);
  EXPECT_GT(max_fill, 50u) << "the consumer's queue never filled";
}

// Two producers on their own threads flood one slow consumer: the consumer
// takes their queues in turn (a batch from each, the empty queues between
// them giving neither an extra turn), however busy the first one it finds
// with data is, so each gets half until one is done.
TEST(RuntimeTest, NoProducerStarvesAnotherAtABusyConsumer) {
  auto rt = Runtime::create(
      options_with({plan(ThreadType::kTc, 0, 200), plan(ThreadType::kTc, 1, 200), plan(ThreadType::kLdm, 0, 200)}));
  ASSERT_TRUE(rt) << rt.status().to_string();
  constexpr uint32_t kCount = 20000;
  std::vector<uint8_t> order;  // producer of each signal, in the order executed (consumer thread only)
  order.reserve(2 * kCount);
  std::atomic<uint32_t> received{0};
  auto consumer = std::make_unique<LambdaBlock>(kConsumer, 0, "CONSUMER", [&](const Signal& s, BlockContext&) {
    if (s.number() != kData) return;
    order.push_back(static_cast<uint8_t>(s.word(0)));
    const uint64_t until = monotonic_ns() + 5000;  // slower than either producer
    while (monotonic_ns() < until) cpu_relax();
    received.fetch_add(1, std::memory_order_release);
  });
  for (uint16_t i = 0; i < 2; ++i) ASSERT_TRUE((*rt)->add_block(producer_block(i, 1, kCount, 64), ThreadType::kTc, i));
  ASSERT_TRUE((*rt)->add_block(std::move(consumer), ThreadType::kLdm, 0));
  ASSERT_TRUE((*rt)->start());
  for (uint16_t i = 0; i < 2; ++i) ASSERT_TRUE((*rt)->inject({1, {kProducer, i}}, kGo, {}));
  EXPECT_TRUE(eventually([&] { return received.load(std::memory_order_acquire) == 2 * kCount; }, 120000))
      << received.load();
  (*rt)->stop();
  ASSERT_EQ(order.size(), 2u * kCount);
  // Until the first producer had all its signals run, each had about half
  // of the consumer's (a producer may start a little late).
  std::size_t last_of[2] = {0, 0};
  for (std::size_t i = 0; i < order.size(); ++i) last_of[order[i]] = i;
  const std::size_t window = std::min(last_of[0], last_of[1]) + 1;
  std::size_t from_1 = 0;
  for (std::size_t i = 0; i < window; ++i) from_1 += order[i];
  const double share_1 = static_cast<double>(from_1) / static_cast<double>(window);
  EXPECT_GT(share_1, 0.4) << "producer 1 had " << from_1 << " of the first " << window << " signals";
  EXPECT_LT(share_1, 0.6) << "producer 1 had " << from_1 << " of the first " << window << " signals";
}

// A deterministic computation: a token visits blocks on every thread, each
// visit folding the block's identity into a hash. Same result whatever the
// thread layout.
uint64_t run_token_ring(std::vector<ThreadSpec> plans, bool single) {
  auto rt = Runtime::create(options_with(std::move(plans), 1, single));
  EXPECT_TRUE(rt);
  std::atomic<uint64_t> result{0};
  constexpr uint16_t kStations = 4;
  constexpr uint32_t kHops = 20000;
  for (uint16_t i = 0; i < kStations; ++i) {
    auto block = std::make_unique<LambdaBlock>(kConsumer, i, "STATION", [i, &result](const Signal& s, BlockContext& c) {
      if (s.number() != kData) return;
      const uint64_t h = (uint64_t{s.word(0)} << 32 | s.word(1)) * 0x9E3779B97F4A7C15ULL + i + 1;
      const uint32_t hops = s.word(2);
      if (hops == 0) {
        result.store(h);
        return;
      }
      const uint32_t w[] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(h), hops - 1};
      c.send({c.self_node(), {kConsumer, static_cast<uint16_t>((i + h % 3 + 1) % kStations)}}, kData, w);
    });
    const ThreadType role = single ? ThreadType::kMain : (i % 2 ? ThreadType::kLdm : ThreadType::kTc);
    EXPECT_TRUE((*rt)->add_block(std::move(block), role, single ? 0 : i / 2));
  }
  EXPECT_TRUE((*rt)->start());
  const uint32_t w[] = {0, 1, kHops};
  EXPECT_TRUE((*rt)->inject({1, {kConsumer, 0}}, kData, w));
  EXPECT_TRUE(eventually([&] { return result.load() != 0; }));
  (*rt)->stop();
  return result.load();
}

TEST(RuntimeTest, SingleAndMultiThreadedModesComputeTheSameResult) {
  const uint64_t single = run_token_ring({plan(ThreadType::kMain, 0)}, true);
  const uint64_t multi = run_token_ring(
      {plan(ThreadType::kTc, 0), plan(ThreadType::kTc, 1), plan(ThreadType::kLdm, 0), plan(ThreadType::kLdm, 1)},
      false);
  EXPECT_NE(single, 0u);
  EXPECT_EQ(single, multi);
}

// caller_runs_loop: no thread of the runtime's own; the test's thread runs
// the loop with run_once(), which executes on this thread what was injected
// and what the blocks send each other, and says false once nothing is left.
TEST(RuntimeTest, TheCallerRunsASingleThreadedLoop) {
  RuntimeOptions o = options_with({plan(ThreadType::kMain, 0)}, 1, true);
  o.caller_runs_loop = true;
  auto rt = Runtime::create(o);
  ASSERT_TRUE(rt) << rt.status().to_string();
  const std::thread::id caller = std::this_thread::get_id();
  uint32_t pongs = 0;
  bool on_caller = true;
  constexpr uint16_t kPing = 20, kPong = 21;
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(100, 0, "PING",
                                                             [&](const Signal& s, BlockContext& c) {
                                                               on_caller &= std::this_thread::get_id() == caller;
                                                               const uint32_t n = s.word(0);
                                                               if (s.number() == kPong) ++pongs;
                                                               if (n > 0) c.send({1, {101, 0}}, kPing, {{n - 1}});
                                                             }),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(101, 0, "PONG",
                                                             [&](const Signal& s, BlockContext& c) {
                                                               on_caller &= std::this_thread::get_id() == caller;
                                                               c.send({1, {100, 0}}, kPong, {{s.word(0)}});
                                                             }),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  ASSERT_TRUE((*rt)->inject({1, {100, 0}}, kPing, {{uint32_t{1000}}}));
  int loops = 0;
  while ((*rt)->run_once()) ASSERT_LT(++loops, 100'000) << "the loop never goes quiet";
  EXPECT_EQ(pongs, 1000u);
  EXPECT_TRUE(on_caller);
  EXPECT_FALSE((*rt)->run_once());
  o.single_threaded = false;
  EXPECT_FALSE(Runtime::create(o)) << "only a single-threaded runtime runs on its caller";
}

// Records prefetch() and execute() calls, as ("p0"|"p1"|"x", sequence word).
// Stage 0 leaves the note 1000 + sequence on the signal; `notes` gets the
// note each call found (stage 0 and executions without a window: 0).
class PrefetchRecorder final : public Block {
 public:
  PrefetchRecorder(uint16_t instance, bool prefetches, std::vector<std::pair<std::string, uint32_t>>& log,
                   std::vector<uint64_t>& notes)
      : Block(kConsumer, instance, "RECORDER", prefetches), log_(log), notes_(notes) {}
  void prefetch(const Signal& s, int stage) const override {
    if (s.number() != kData) return;
    log_.emplace_back(stage == 0 ? "p0" : "p1", s.word(0));
    notes_.push_back(s.prefetch_note);
    if (stage == 0) s.prefetch_note = 1000 + s.word(0);
  }
  void execute(const Signal& s, BlockContext&) override {
    if (s.number() != kData) return;
    log_.emplace_back("x", s.word(0));
    notes_.push_back(s.prefetch_note);
  }

 private:
  std::vector<std::pair<std::string, uint32_t>>& log_;
  std::vector<uint64_t>& notes_;
};

TEST(RuntimeTest, QueuedSignalsArePrefetchedInWindowsBeforeTheyRunInOrder) {
  // One thread; a sender queues 40 signals at once for a block that
  // prefetches and 40 for one that does not (the runtime never calls its
  // prefetch). Both logs are only touched by that thread.
  std::vector<std::pair<std::string, uint32_t>> log, quiet_log;
  std::vector<uint64_t> notes, quiet_notes;
  std::atomic<bool> done{false};
  auto rt = Runtime::create(options_with({plan(ThreadType::kMain, 0)}));
  ASSERT_TRUE(rt);
  constexpr uint32_t kCount = 40;
  ASSERT_TRUE((*rt)->add_block(std::make_unique<PrefetchRecorder>(0, true, log, notes), ThreadType::kMain, 0));
  ASSERT_TRUE(
      (*rt)->add_block(std::make_unique<PrefetchRecorder>(1, false, quiet_log, quiet_notes), ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kProducer, 0, "SENDER",
                                                             [&](const Signal& s, BlockContext& c) {
                                                               if (s.number() == kDone) {
                                                                 done.store(true);
                                                                 return;
                                                               }
                                                               if (s.number() != kGo) return;
                                                               for (uint32_t i = 0; i < kCount; ++i) {
                                                                 const uint32_t w[] = {i};
                                                                 c.send({c.self_node(), {kConsumer, 0}}, kData, w);
                                                                 c.send({c.self_node(), {kConsumer, 1}}, kData, w);
                                                               }
                                                               c.send({c.self_node(), {kProducer, 0}}, kDone, {});
                                                             }),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  ASSERT_TRUE((*rt)->inject({1, {kProducer, 0}}, kGo, {}));
  ASSERT_TRUE(eventually([&] { return done.load(); }));
  (*rt)->stop();

  // The quiet block ran everything in order and was never asked to prefetch;
  // it never saw a note, though its signals sat in the other's windows.
  ASSERT_EQ(quiet_log.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) EXPECT_EQ(quiet_log[i], std::make_pair(std::string("x"), i));
  for (uint64_t note : quiet_notes) EXPECT_EQ(note, 0u);
  // Stage 0 found no note; stage 1 and the execution found stage 0's, and a
  // signal run without a window found none.
  ASSERT_EQ(notes.size(), log.size());
  for (std::size_t at = 0; at < log.size(); ++at) {
    const auto& [what, seq] = log[at];
    const bool had_window = std::find(log.begin(), log.end(), std::make_pair(std::string("p0"), seq)) != log.end();
    EXPECT_EQ(notes[at], what == "p0" || !had_window ? 0 : 1000 + seq) << what << " " << seq;
  }
  // The other ran everything in order, each signal after its two prefetch
  // stages when it had them, and windows of at most kPrefetchWindow.
  std::vector<uint32_t> executed;
  std::vector<int> stage0(kCount, -1), stage1(kCount, -1);
  uint32_t prefetched = 0, pending = 0;
  for (std::size_t at = 0; at < log.size(); ++at) {
    const auto& [what, seq] = log[at];
    ASSERT_LT(seq, kCount);
    if (what == "p0") {
      EXPECT_EQ(stage0[seq], -1) << "prefetched twice: " << seq;
      stage0[seq] = static_cast<int>(at);
      ++pending;
      EXPECT_LE(pending, Block::kPrefetchWindow);
    } else if (what == "p1") {
      EXPECT_NE(stage0[seq], -1) << "stage 1 before stage 0: " << seq;
      stage1[seq] = static_cast<int>(at);
      ++prefetched;
    } else {
      executed.push_back(seq);
      EXPECT_EQ(stage0[seq] == -1, stage1[seq] == -1) << seq;
      if (stage0[seq] != -1) --pending;
    }
  }
  ASSERT_EQ(executed.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) EXPECT_EQ(executed[i], i);
  EXPECT_GE(prefetched, kCount / 2) << "40 signals queued at once should mostly run in windows";
}

// The routing table widens when a later block has a higher instance number
// than any before it: routes added earlier must survive the move, and every
// signal must reach the thread its block was added to.
TEST(RuntimeTest, RoutesSurviveInstanceNumbersAddedOutOfOrder) {
  auto rt =
      Runtime::create(options_with({plan(ThreadType::kTc, 0), plan(ThreadType::kLdm, 0), plan(ThreadType::kLdm, 1)}));
  ASSERT_TRUE(rt);
  std::mutex m;
  std::map<uint16_t, std::vector<std::thread::id>> seen;  // consumer instance -> threads it ran on
  const auto consumer = [&](uint16_t instance) {
    return std::make_unique<LambdaBlock>(kConsumer, instance, "C" + std::to_string(instance),
                                         [&, instance](const Signal& s, BlockContext&) {
                                           if (s.number() != kData) return;
                                           std::lock_guard l(m);
                                           seen[instance].push_back(std::this_thread::get_id());
                                           EXPECT_EQ(s.word(0), instance) << "signal for another instance";
                                         });
  };
  // Instance 0, then 5 (widens), then 3, on alternating LDM threads.
  ASSERT_TRUE((*rt)->add_block(consumer(0), ThreadType::kLdm, 0));
  ASSERT_TRUE((*rt)->add_block(consumer(5), ThreadType::kLdm, 1));
  ASSERT_TRUE((*rt)->add_block(consumer(3), ThreadType::kLdm, 0));
  ASSERT_TRUE(
      (*rt)->add_block(std::make_unique<LambdaBlock>(kProducer, 7, "P7",  // widens again
                                                     [](const Signal& s, BlockContext& c) {
                                                       if (s.number() != kGo) return;
                                                       for (uint32_t i : {0u, 3u, 5u, 0u, 3u, 5u}) {
                                                         const uint32_t w[] = {i};
                                                         c.send({c.self_node(), {kConsumer, uint16_t(i)}}, kData, w);
                                                       }
                                                     }),
                       ThreadType::kTc, 0));
  EXPECT_FALSE((*rt)->add_block(consumer(5), ThreadType::kLdm, 0)) << "a route added twice must be refused";
  ASSERT_TRUE((*rt)->start());
  ASSERT_TRUE((*rt)->inject({1, {kProducer, 7}}, kGo, {}));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard l(m);
    return seen[0].size() + seen[3].size() + seen[5].size() == 6;
  }));
  (*rt)->stop();
  ASSERT_EQ(seen[0].size(), 2u);
  ASSERT_EQ(seen[3].size(), 2u);
  ASSERT_EQ(seen[5].size(), 2u);
  EXPECT_EQ(seen[0][0], seen[3][0]) << "instances 0 and 3 were both added to ldm 0";
  EXPECT_NE(seen[0][0], seen[5][0]) << "instance 5 was added to ldm 1";
  for (auto& [instance, threads] : seen) EXPECT_EQ(threads[0], threads[1]) << instance;
}

TEST(RuntimeTest, DelayedSignalsFireAfterTheirDelayInOrder) {
  auto rt = Runtime::create(options_with({plan(ThreadType::kMain, 0)}));
  ASSERT_TRUE(rt);
  std::mutex m;
  std::vector<std::pair<uint32_t, uint64_t>> fired;
  uint64_t t0 = 0;
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kConsumer, 0, "TIMERS",
                                                             [&](const Signal& s, BlockContext& c) {
                                                               if (s.number() == kGo) {
                                                                 t0 = c.now_ns();
                                                                 for (uint32_t d : {30u, 10u, 20u, 10u}) {
                                                                   const uint32_t w[] = {d};
                                                                   c.send_delayed(d, {kConsumer, 0}, kData, w);
                                                                 }
                                                               } else if (s.number() == kData) {
                                                                 std::lock_guard l(m);
                                                                 fired.emplace_back(s.word(0), monotonic_ns() - t0);
                                                               }
                                                             }),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  ASSERT_TRUE((*rt)->inject({1, {kConsumer, 0}}, kGo, {}));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard l(m);
    return fired.size() == 4;
  }));
  (*rt)->stop();
  ASSERT_EQ(fired.size(), 4u);
  EXPECT_EQ(fired[0].first, 10u);
  EXPECT_EQ(fired[1].first, 10u);
  EXPECT_EQ(fired[2].first, 20u);
  EXPECT_EQ(fired[3].first, 30u);
  for (auto [delay, at] : fired) EXPECT_GE(at, uint64_t{delay} * 1'000'000) << delay;
}

TEST(RuntimeTest, WatchdogNamesAThreadStuckInABlock) {
  auto opts = options_with({plan(ThreadType::kLdm, 0), plan(ThreadType::kMain, 0)});
  opts.watchdog_ms = 100;
  std::mutex m;
  std::vector<std::string> reports;
  opts.on_watchdog = [&](const std::string& r) {
    std::lock_guard l(m);
    reports.push_back(r);
  };
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kConsumer, 0, "SLOWPOKE",
                                                             [](const Signal& s, BlockContext&) {
                                                               if (s.number() != kGo) return;
                                                               const uint64_t until = monotonic_ns() + 400'000'000;
                                                               while (monotonic_ns() < until) cpu_relax();
                                                             }),
                               ThreadType::kLdm, 0));
  ASSERT_TRUE((*rt)->start());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  {
    std::lock_guard l(m);
    EXPECT_TRUE(reports.empty()) << "idle threads were reported: " << reports.front();
  }
  ASSERT_TRUE((*rt)->inject({1, {kConsumer, 0}}, kGo, {}));
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard l(m);
        return !reports.empty();
      },
      5000));
  (*rt)->stop();
  std::lock_guard l(m);
  EXPECT_NE(reports[0].find("thread ldm 0"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("SLOWPOKE"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("signal " + std::to_string(kGo)), std::string::npos) << reports[0];
  EXPECT_EQ(reports.size(), 1u) << "one stuck step is reported once";
}

// The id of this process's thread named `name` (its comm), or 0.
pid_t thread_named(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) return static_cast<pid_t>(std::stoi(task.path().filename()));
  }
  return 0;
}

TEST(RuntimeTest, TheWatchdogRunsWhereItsWdEntrySaysAndTheLayoutShowsIoAndWd) {
  const int cpu = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1;
  ThreadSpec io = plan(ThreadType::kIo, 0);
  io.binding = ThreadSpec::Binding::kSet;
  io.cpus = {0};
  ThreadSpec wd = plan(ThreadType::kWatchdog, 0);
  wd.binding = ThreadSpec::Binding::kBind;
  wd.cpus = {cpu};
  wd.thread_prio = 5;
  auto opts = options_with({plan(ThreadType::kLdm, 0), plan(ThreadType::kMain, 0), io, wd});
  opts.watchdog_ms = 250;
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  ASSERT_TRUE((*rt)->start());
  pid_t tid = 0;
  ASSERT_TRUE(eventually([&] { return (tid = thread_named("wd 0")) != 0; })) << "no thread named 'wd 0'";
  cpu_set_t set;
  CPU_ZERO(&set);
  bool placed = false;
  // The thread binds itself first thing after it starts.
  ASSERT_TRUE(eventually([&] {
    placed = sched_getaffinity(tid, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set);
    return placed;
  })) << "the watchdog thread is not bound to CPU "
      << cpu << " (it may run on " << CPU_COUNT(&set) << " CPUs)";
  const std::string layout = (*rt)->describe_threads();
  (*rt)->stop();
  EXPECT_NE(layout.find("ldm 0: blocks"), std::string::npos) << layout;
  EXPECT_NE(layout.find("io 0: not run (an in-memory node does no disk I/O); cpus set 0\n"), std::string::npos)
      << layout;
  EXPECT_NE(layout.find("wd 0: the watchdog (reports a loop step longer than 250 ms); cpus bind " +
                        std::to_string(cpu) + "; thread_prio 5\n"),
            std::string::npos)
      << layout;
}

TEST(RuntimeTest, AWatchdogThatIsOffIsShownAsNotRun) {
  auto opts = options_with({plan(ThreadType::kLdm, 0), plan(ThreadType::kWatchdog, 0)});
  opts.watchdog_ms = 0;
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  ASSERT_TRUE((*rt)->start());
  const std::string layout = (*rt)->describe_threads();
  (*rt)->stop();
  EXPECT_NE(layout.find("wd 0: not run (the watchdog is off); cpus any\n"), std::string::npos) << layout;
  EXPECT_EQ(thread_named("wd 0"), 0) << "a watchdog thread runs although the watchdog is off";
}

// ---- links -----------------------------------------------------------------------

class RuntimeLinkTest : public ::testing::Test {
 protected:
  // Node 1 is the runtime; node 2 is this test, over TCP, as a node of
  // `kind`.
  void connect(Runtime& rt, SenderKind kind = SenderKind::kDataNode) {
    auto table = fjord::test::load_links(fjord::test::find_medium("tcp")->section(1, 2, ""));
    ASSERT_TRUE(table) << table.status().to_string();
    auto pair = fjord::test::connect_pair(*table, 1, *table->find(1, 2), 2);
    ASSERT_TRUE(pair) << pair.status().to_string();
    peer_ = std::move(pair->client);
    ASSERT_TRUE(rt.attach_link(std::move(pair->server), kind));
  }
  std::unique_ptr<transport::Transporter> peer_;
};

TEST_F(RuntimeLinkTest, SignalsCrossTheLinkBothWaysAndNodeEventsArrive) {
  auto opts = options_with({plan(ThreadType::kRecv, 0), plan(ThreadType::kTc, 0)});
  std::vector<std::unique_ptr<transport::Transporter>> dead;
  std::mutex dead_mutex;
  opts.on_link_down = [&](std::unique_ptr<transport::Transporter> t) {
    std::lock_guard l(dead_mutex);
    dead.push_back(std::move(t));
  };
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  std::atomic<int> connected{0}, disconnected{0};
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(
                                   kConsumer, 0, "ECHO",
                                   [&](const Signal& s, BlockContext& c) {
                                     if (s.number() == runtime_signals::kNodeConnected) connected = s.word(0);
                                     if (s.number() == runtime_signals::kNodeDisconnected) disconnected = s.word(0);
                                     if (s.number() == kData) {
                                       const uint32_t w[] = {s.word(0) + 1};
                                       c.send(s.sender_address(), kData, w, {}, s.trace());
                                     }
                                   },
                                   true),
                               ThreadType::kTc, 0));
  ASSERT_TRUE((*rt)->start());
  connect(**rt);
  ASSERT_TRUE(eventually([&] { return connected.load() == 2; }));
  for (uint32_t i = 0; i < 1000; ++i) {
    const uint32_t w[] = {i};
    ASSERT_TRUE(peer_->send_signal({kData, {kConsumer, 0}, {kProducer, 7}, i}, w));
    ASSERT_EQ(peer_->wait_for_receive(5'000'000'000ULL, 0), transport::WaitResult::kReady);
    transport::ReceiveBatch b = peer_->receive();
    frame::FrameCursor cursor(b.bytes);
    frame::SignalView v;
    ASSERT_TRUE(cursor.next(v));
    EXPECT_EQ(v.word(0), i + 1);
    EXPECT_EQ(v.header.receiver, (BlockRef{kProducer, 7}));
    EXPECT_EQ(v.header.trace, i);
    peer_->release(b.bytes.size());
  }
  const auto links = (*rt)->link_stats();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].node, 2);
  EXPECT_EQ(links[0].stats.frames_received, 1000u);
  EXPECT_EQ(links[0].stats.frames_sent, 1000u);
  peer_->close("test done");
  ASSERT_TRUE(eventually([&] { return disconnected.load() == 2; }));
  EXPECT_FALSE((*rt)->link_up(2));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard l(dead_mutex);
    return dead.size() == 1;
  }));
  (*rt)->stop();
}

// SchedulerExecutionTimer at its largest: replies held back while the
// thread keeps executing still leave before it waits, so a lone request
// and a burst are both answered in full; the layout says how it sends.
TEST_F(RuntimeLinkTest, WithTheExecutionTimerEveryReplyStillLeavesBeforeTheThreadWaits) {
  auto opts = options_with({plan(ThreadType::kRecv, 0), plan(ThreadType::kTc, 0)});
  opts.execution_timer_us = kExecutionTimerMaxUs;
  opts.on_link_down = [](std::unique_ptr<transport::Transporter>) {};
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt) << rt.status().to_string();
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kConsumer, 0, "ECHO",
                                                             [](const Signal& s, BlockContext& c) {
                                                               if (s.number() != kData) return;
                                                               const uint32_t w[] = {s.word(0) + 1};
                                                               c.send(s.sender_address(), kData, w, {}, s.trace());
                                                             }),
                               ThreadType::kTc, 0));
  ASSERT_TRUE((*rt)->start());
  EXPECT_NE((*rt)->describe_threads().find("sending: after 11000 us of executing, and before waiting "
                                           "(SchedulerExecutionTimer=11000)"),
            std::string::npos)
      << (*rt)->describe_threads();
  connect(**rt);
  constexpr uint32_t kBurst = 200;
  for (uint32_t round = 0; round < 3; ++round) {
    const uint32_t count = round == 0 ? 1 : kBurst;  // a lone request, then bursts
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t w[] = {i};
      ASSERT_TRUE(peer_->send_signal({kData, {kConsumer, 0}, {kProducer, 7}, i}, w));
    }
    std::vector<bool> seen(count, false);
    for (uint32_t got = 0; got < count;) {
      ASSERT_EQ(peer_->wait_for_receive(5'000'000'000ULL, 0), transport::WaitResult::kReady) << got << " of " << count;
      transport::ReceiveBatch b = peer_->receive();
      frame::FrameCursor cursor(b.bytes);
      frame::SignalView v;
      while (cursor.next(v)) {
        ASSERT_LT(v.header.trace, count);
        EXPECT_EQ(v.word(0), v.header.trace + 1);
        EXPECT_FALSE(seen[v.header.trace]) << "reply " << v.header.trace << " twice";
        seen[v.header.trace] = true;
        ++got;
      }
      peer_->release(b.bytes.size());
    }
  }
  peer_->close("test done");
  (*rt)->stop();
}

TEST(RuntimeTest, AnExecutionTimerAboveNdbsRangeIsRefused) {
  auto opts = options_with({plan(ThreadType::kTc, 0)});
  opts.execution_timer_us = kExecutionTimerMaxUs + 1;
  auto rt = Runtime::create(opts);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.status().message(), "execution_timer_us 11001 is above 11000 (SchedulerExecutionTimer's range)");
}

// The runtime stamps who sent a signal: the link's node and kind for a
// frame (whatever the frame's sender field claims), its own node for one
// injected or sent by a block of this node.
TEST_F(RuntimeLinkTest, EverySignalCarriesItsSendersNodeAndKindAsTheRuntimeKnowsThem) {
  std::mutex mutex;
  std::vector<std::pair<NodeId, SenderKind>> seen;
  // API peers may send nothing unless a rule says so: here kData to kConsumer.
  auto opts = options_with({plan(ThreadType::kMain, 0)}, 1, true);
  ASSERT_TRUE(opts.admission.allow(SenderKind::kApiNode, kConsumer, kData));
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kConsumer, 0, "X",
                                                             [&](const Signal& s, BlockContext&) {
                                                               if (s.number() != kData) return;
                                                               std::lock_guard l(mutex);
                                                               seen.emplace_back(s.sender_node, s.sender_kind);
                                                             }),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  connect(**rt, SenderKind::kApiNode);
  const uint32_t w[] = {1};
  ASSERT_TRUE(peer_->send_signal({kData, {kConsumer, 0}, {block_numbers::kDict, 0}, 0}, w));
  ASSERT_TRUE((*rt)->inject({1, {kConsumer, 0}}, kData, w));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard l(mutex);
    return seen.size() == 2;
  }));
  (*rt)->stop();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen[0], (std::pair<NodeId, SenderKind>{1, SenderKind::kOwnNode}));
  EXPECT_EQ(seen[1], (std::pair<NodeId, SenderKind>{2, SenderKind::kApiNode}));
}

// Not even a data node may send what only a node's runtime sends: a forged
// "node 3 disconnected" never reaches the block, and the link goes down
// with the refusal counted and named.
TEST_F(RuntimeLinkTest, ARuntimeSignalFromADataNodeIsRefusedAndTakesItsLinkDown) {
  auto rt = Runtime::create(options_with({plan(ThreadType::kMain, 0)}, 1, true));
  ASSERT_TRUE(rt);
  std::atomic<uint32_t> forged{0}, data{0};
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(
                                   kConsumer, 0, "EVENTS",
                                   [&](const Signal& s, BlockContext&) {
                                     if (s.number() == runtime_signals::kNodeDisconnected && s.word(0) == 3) ++forged;
                                     if (s.number() == kData) ++data;
                                   },
                                   true),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  connect(**rt);
  const uint32_t w[] = {3};
  ASSERT_TRUE(peer_->send_signal({kData, {kConsumer, 0}, {kProducer, 0}, 0}, w));
  ASSERT_TRUE(peer_->send_signal({runtime_signals::kNodeDisconnected, {kConsumer, 0}, {kConsumer, 0}, 0}, w));
  EXPECT_EQ(peer_->wait_for_receive(5'000'000'000ULL, 0), transport::WaitResult::kDown);
  ASSERT_TRUE(eventually([&] { return !(*rt)->link_up(2); }));
  EXPECT_TRUE(eventually([&] { return data.load() == 1; })) << "a data node's engine signal passes";
  const auto links = (*rt)->link_stats();
  (*rt)->stop();
  EXPECT_EQ(forged.load(), 0u) << "a forged runtime signal reached the block";
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].node, 2);
  EXPECT_FALSE(links[0].up);
  EXPECT_EQ(links[0].peer_kind, SenderKind::kDataNode);
  EXPECT_EQ(links[0].refused_signals, 1u);
  EXPECT_NE(links[0].last_refusal.find("node 2 (data node) sent signal 3"), std::string::npos) << links[0].last_refusal;
  EXPECT_NE(links[0].last_refusal.find("EVENTS"), std::string::npos) << links[0].last_refusal;
}

TEST(LinkAdmissionTest, RulesAdmitWhatTheyNameAndNothingOfTheRuntimes) {
  LinkAdmission a;
  EXPECT_TRUE(a.admits(SenderKind::kDataNode, 2, runtime_signals::kFirstUser));
  EXPECT_TRUE(a.admits(SenderKind::kDataNode, 4000, 60000));
  EXPECT_FALSE(a.admits(SenderKind::kDataNode, 2, runtime_signals::kNodeDisconnected));
  EXPECT_FALSE(a.admits(SenderKind::kApiNode, 2, 200));
  EXPECT_FALSE(a.admits(SenderKind::kMgmNode, 2, 200));
  EXPECT_FALSE(a.admits(SenderKind::kOwnNode, 2, 200));
  ASSERT_TRUE(a.allow(SenderKind::kApiNode, 2, 200));
  EXPECT_TRUE(a.admits(SenderKind::kApiNode, 2, 200));
  EXPECT_FALSE(a.admits(SenderKind::kApiNode, 2, 201));
  EXPECT_FALSE(a.admits(SenderKind::kApiNode, 3, 200));
  EXPECT_FALSE(a.admits(SenderKind::kMgmNode, 2, 200));
  EXPECT_EQ(a.allow(SenderKind::kApiNode, 2, runtime_signals::kNodeDisconnected).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.allow(SenderKind::kOwnNode, 2, 200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.allow(SenderKind::kApiNode, 2, LinkAdmission::kRuleSignals).code(), StatusCode::kInvalidArgument);
  // One receiver block has rules (2); the others fill the table.
  for (std::size_t i = 0; i + 1 < LinkAdmission::kMaxRuleBlocks; ++i)
    ASSERT_TRUE(a.allow(SenderKind::kMgmNode, static_cast<BlockNumber>(10 + i), 20));
  EXPECT_EQ(a.allow(SenderKind::kMgmNode, 200, 20).code(), StatusCode::kResourceExhausted);
  a.admit_every_engine_signal(SenderKind::kDataNode, false);
  EXPECT_FALSE(a.admits(SenderKind::kDataNode, 2, 200));
}

TEST_F(RuntimeLinkTest, ASignalToAMissingBlockClosesOnlyThatLinkWithAReason) {
  auto rt = Runtime::create(options_with({plan(ThreadType::kMain, 0)}, 1, true));
  ASSERT_TRUE(rt);
  ASSERT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kConsumer, 0, "X", [](const Signal&, BlockContext&) {}),
                               ThreadType::kMain, 0));
  ASSERT_TRUE((*rt)->start());
  connect(**rt);
  const uint32_t w[] = {1};
  ASSERT_TRUE(peer_->send_signal({kData, {kConsumer, 9}, {kProducer, 0}, 0}, w));
  ASSERT_EQ(peer_->wait_for_receive(5'000'000'000ULL, 0), transport::WaitResult::kDown);
  EXPECT_TRUE(eventually([&] { return !(*rt)->link_up(2); }));
  (*rt)->stop();
}

TEST_F(RuntimeLinkTest, CongestionStopsTheReceiverWithoutLoss) {
  auto opts = options_with({plan(ThreadType::kRecv, 0), plan(ThreadType::kLdm, 0)});
  opts.job_buffer_bytes = 64 << 10;
  auto rt = Runtime::create(opts);
  ASSERT_TRUE(rt);
  OrderCheck check;
  check.next.assign(1, std::vector<uint32_t>(8, 0));
  ASSERT_TRUE((*rt)->add_block(consumer_block(0, check, 3000), ThreadType::kLdm, 0));
  ASSERT_TRUE((*rt)->start());
  connect(**rt);
  constexpr uint32_t kCount = 20000;
  for (uint32_t i = 0; i < kCount;) {
    const uint32_t w[] = {0, i};
    const std::byte pad[200] = {};
    const std::span<const std::byte> sections[] = {pad};
    if (peer_->send_signal({kData, {kConsumer, 0}, {kProducer, 0}, 0}, w, sections))
      ++i;
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  while (peer_->flush() == transport::FlushStatus::kPending)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_TRUE(eventually([&] { return check.received.load() == kCount; }, 120000)) << check.received.load();
  EXPECT_EQ(check.errors.load(), 0u);
  EXPECT_GT((*rt)->thread_stats()[0].congestion_stops, 0u);
  (*rt)->stop();
}

}  // namespace
}  // namespace fjord::engine
