// JobBuffer: the SPSC entry queue against a std::deque model (including
// stale bytes of earlier laps never read as entries), when full, and across
// two threads with every byte checked.
#include "fjord/engine/runtime/job_buffer.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {
namespace {

struct ModelEntry {
  std::vector<std::byte> frame;
  NodeId sender;
};

TEST(JobBufferTest, MatchesADequeModelUnderRandomOperations) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto q = JobBuffer::create(64 << 10);
  ASSERT_TRUE(q) << q.status().to_string();
  std::deque<ModelEntry> model;
  std::size_t model_bytes = 0;
  uint8_t next = 1;
  for (int op = 0; op < 200000; ++op) {
    if (rng() % 2) {
      const std::size_t n = 8 * (1 + rng() % 1024);
      auto space = q->reserve(n);
      // The entry and the zeroed envelope behind it must fit.
      const bool fits = model_bytes + JobBuffer::entry_bytes(n) + sizeof(Envelope) <= q->capacity();
      ASSERT_EQ(!space.empty(), fits) << "op " << op;
      if (!fits) continue;
      ASSERT_GE(space.size(), n);
      ModelEntry e{std::vector<std::byte>(n), static_cast<NodeId>(1 + rng() % kMaxNodeId)};
      for (std::size_t i = 0; i < n; ++i) e.frame[i] = space[i] = std::byte{next++};
      // Written but not committed: the consumer must not see it.
      ASSERT_TRUE(q->entry_at(model_bytes).empty()) << "op " << op;
      q->commit(n, e.sender);
      model_bytes += JobBuffer::entry_bytes(n);
      model.push_back(std::move(e));
    } else {
      // Walk a random number of entries, check each, give them back at once.
      const std::size_t take = model.empty() ? 0 : rng() % (model.size() + 1);
      std::size_t offset = 0;
      for (std::size_t k = 0; k < take; ++k) {
        const auto entry = q->entry_at(offset);
        ASSERT_EQ(entry.size(), JobBuffer::entry_bytes(model.front().frame.size())) << "op " << op;
        Envelope envelope;
        std::memcpy(&envelope, entry.data(), sizeof envelope);
        ASSERT_EQ(envelope.sender_node, model.front().sender);
        ASSERT_EQ(std::memcmp(entry.data() + sizeof(Envelope), model.front().frame.data(), model.front().frame.size()),
                  0)
            << "op " << op;
        offset += entry.size();
        model_bytes -= entry.size();
        model.pop_front();
      }
      q->consume(offset);
      ASSERT_EQ(q->has_data(), !model.empty()) << "op " << op;
    }
    // Past the last published entry there is never one: not even the
    // non-zero bytes of an earlier lap.
    std::size_t end = 0;
    for (const ModelEntry& e : model) end += JobBuffer::entry_bytes(e.frame.size());
    ASSERT_TRUE(q->entry_at(end).empty()) << "op " << op;
    ASSERT_EQ(q->used_bytes(), model_bytes);
  }
}

TEST(JobBufferTest, FullQueueRefusesAndLosesNothing) {
  auto q = JobBuffer::create(64 << 10);
  ASSERT_TRUE(q);
  uint64_t pushed = 0;
  for (;;) {
    auto space = q->reserve(56);
    if (space.empty()) break;
    std::memcpy(space.data(), &pushed, sizeof pushed);
    q->commit(56, 1);
    ++pushed;
  }
  // 64-byte entries, one 8-byte envelope kept free: capacity / 64 - 1 fit.
  EXPECT_EQ(pushed, q->capacity() / 64 - 1);
  std::size_t offset = 0;
  for (uint64_t i = 0; i < pushed; ++i) {
    const auto entry = q->entry_at(offset);
    ASSERT_EQ(entry.size(), 64u);
    uint64_t v;
    std::memcpy(&v, entry.data() + sizeof(Envelope), sizeof v);
    ASSERT_EQ(v, i);
    offset += entry.size();
  }
  EXPECT_TRUE(q->entry_at(offset).empty());
  q->consume(offset);
  EXPECT_FALSE(q->reserve(56).empty()) << "room again once consumed";
}

TEST(JobBufferTest, TwoThreadsStreamEveryByteInOrder) {
  auto q = JobBuffer::create(64 << 10);
  ASSERT_TRUE(q);
  constexpr uint64_t kEntries = 300000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kEntries;) {
      const std::size_t n = 8 * (1 + i % 37);
      auto space = q->reserve(n);
      if (space.empty()) continue;
      for (std::size_t k = 0; k < n; k += 8) std::memcpy(space.data() + k, &i, 8);
      q->commit(n, static_cast<NodeId>(1 + i % kMaxNodeId));
      ++i;
    }
  });
  uint64_t expect = 0;
  while (expect < kEntries) {
    std::size_t done = 0;
    for (auto entry = q->entry_at(0); !entry.empty(); entry = q->entry_at(done)) {
      const std::size_t n = 8 * (1 + expect % 37);
      ASSERT_EQ(entry.size(), JobBuffer::entry_bytes(n));
      Envelope envelope;
      std::memcpy(&envelope, entry.data(), sizeof envelope);
      ASSERT_EQ(envelope.sender_node, 1 + expect % kMaxNodeId);
      for (std::size_t k = 0; k < n; k += 8) {
        uint64_t v;
        std::memcpy(&v, entry.data() + sizeof(Envelope) + k, 8);
        ASSERT_EQ(v, expect);
      }
      done += entry.size();
      ++expect;
    }
    q->consume(done);
  }
  producer.join();
  EXPECT_EQ(q->used_bytes(), 0u);
}

TEST(JobBufferTest, PlacedOnTheConsumersNumaNode) {
  const int nodes = numa_node_count();
  if (nodes < 2) GTEST_SKIP() << "this machine has " << nodes << " NUMA node(s): nothing to place";
  // A buffer bound to the last node holds its pages there once touched.
  const int node = nodes - 1;
  auto q = JobBuffer::create(1 << 20, node);
  ASSERT_TRUE(q) << q.status().to_string();
  auto space = q->reserve(4096);
  ASSERT_FALSE(space.empty());
  std::memset(space.data(), 1, 4096);
  int where = -1;
  void* page = space.data();
  ASSERT_EQ(::syscall(SYS_move_pages, 0, 1, &page, nullptr, &where, 0), 0);
  EXPECT_EQ(where, node);
  EXPECT_EQ(numa_node_of({0}), 0);
}

TEST(JobBufferTest, NoNumaPlacementOnOneNode) {
  if (numa_node_count() > 1) GTEST_SKIP() << "this machine has several NUMA nodes";
  EXPECT_EQ(numa_node_of({0}), -1) << "one node: nothing to bind";
  auto q = JobBuffer::create(64 << 10, numa_node_of({0}));
  ASSERT_TRUE(q);
}

}  // namespace
}  // namespace fjord::engine
