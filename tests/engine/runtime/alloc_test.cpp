// The hot path allocates nothing: counts heap allocations made by any thread
// while signals flow between threads and over a TCP link, after a warm-up.
// Own binary: it replaces the global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "counting_new.h"
#include "link_harness.h"
#include "test_blocks.h"

using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::engine {
namespace {

using test::eventually;
using test::LambdaBlock;
using test::plan;

constexpr uint16_t kPing = runtime_signals::kFirstUser;
constexpr BlockNumber kFront = block_numbers::kFirstTest;
constexpr BlockNumber kBack = block_numbers::kFirstTest + 1;

// The peer pings node 1's FRONT block over TCP; FRONT forwards to BACK on
// another thread (a job buffer); BACK answers the peer over the link, and
// arms a delayed signal (timers) every 64 pings.
uint64_t allocations_during_pings(std::vector<ThreadSpec> plans, ThreadType front, ThreadType back,
                                  bool single = false) {
  auto rt = Runtime::create(test::options_with(std::move(plans), 1, single));
  EXPECT_TRUE(rt);
  EXPECT_TRUE((*rt)->add_block(std::make_unique<LambdaBlock>(kFront, 0, "FRONT",
                                                             [](const Signal& s, BlockContext& c) {
                                                               if (s.number() != kPing) return;
                                                               const uint32_t w[] = {s.word(0), s.sender_node};
                                                               c.send({c.self_node(), {kBack, 0}}, kPing, w);
                                                             }),
                               front, 0));
  EXPECT_TRUE(
      (*rt)->add_block(std::make_unique<LambdaBlock>(kBack, 0, "BACK",
                                                     [](const Signal& s, BlockContext& c) {
                                                       if (s.number() != kPing) return;
                                                       const uint32_t w[] = {s.word(0)};
                                                       c.send({static_cast<NodeId>(s.word(1)), {kFront, 0}}, kPing, w);
                                                       if (s.word(0) % 64 == 0)
                                                         c.send_delayed(1, {kBack, 0}, kPing + 1, w);
                                                     }),
                       back, 0));
  EXPECT_TRUE((*rt)->start());
  auto table = fjord::test::load_links(fjord::test::find_medium("tcp")->section(1, 2, ""));
  auto pair = fjord::test::connect_pair(*table, 1, *table->find(1, 2), 2);
  EXPECT_TRUE(pair) << pair.status().to_string();
  std::unique_ptr<transport::Transporter> peer = std::move(pair->client);
  EXPECT_TRUE((*rt)->attach_link(std::move(pair->server), SenderKind::kDataNode));
  EXPECT_TRUE(eventually([&] { return (*rt)->link_up(2); }));

  bool ok = true;
  auto ping = [&](uint32_t i) {
    const uint32_t w[] = {i};
    ok &= peer->send_signal({kPing, {kFront, 0}, {kFront, 0}, 0}, w);
    ok &= peer->wait_for_receive(5'000'000'000ULL, 0) == transport::WaitResult::kReady;
    transport::ReceiveBatch b = peer->receive();
    frame::FrameCursor cursor(b.bytes);
    frame::SignalView v;
    ok &= cursor.next(v) && v.word(0) == i;
    peer->release(b.bytes.size());
  };
  for (uint32_t i = 0; i < 5000; ++i) ping(i);  // warm-up: every path has run once
  g_allocations = 0;
  g_count_allocations = true;
  for (uint32_t i = 5000; i < 25000; ++i) ping(i);
  g_count_allocations = false;
  EXPECT_TRUE(ok);
  (*rt)->stop();
  return g_allocations.load();
}

TEST(AllocationTest, MultiThreadedSteadyStateAllocatesNothing) {
  EXPECT_EQ(allocations_during_pings({plan(ThreadType::kRecv, 0), plan(ThreadType::kTc, 0), plan(ThreadType::kLdm, 0)},
                                     ThreadType::kTc, ThreadType::kLdm),
            0u);
}

TEST(AllocationTest, SingleThreadedSteadyStateAllocatesNothing) {
  EXPECT_EQ(allocations_during_pings({plan(ThreadType::kMain, 0)}, ThreadType::kMain, ThreadType::kMain, true), 0u);
}

TEST(AllocationTest, TheCounterSeesAllocations) {
  g_allocations = 0;
  g_count_allocations = true;
  auto* p = new std::vector<int>(100);
  g_count_allocations = false;
  delete p;
  EXPECT_GE(g_allocations.load(), 1u);
}

}  // namespace
}  // namespace fjord::engine
