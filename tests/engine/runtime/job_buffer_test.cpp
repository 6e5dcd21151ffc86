// JobBuffer: the SPSC byte queue against a std::deque model, and across two
// threads with every byte checked.
#include "fjord/engine/runtime/job_buffer.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include "fjord/engine/runtime/numa.h"

namespace fjord::engine {
namespace {

TEST(JobBufferTest, MatchesADequeModelUnderRandomOperations) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto q = JobBuffer::create(64 << 10);
  ASSERT_TRUE(q) << q.status().to_string();
  std::deque<std::byte> model;
  uint8_t next = 0;
  for (int op = 0; op < 200000; ++op) {
    if (rng() % 2) {
      const std::size_t n = 8 * (1 + rng() % 1024);
      auto space = q->reserve(n);
      const bool fits = model.size() + n <= q->capacity();
      ASSERT_EQ(!space.empty(), fits) << "op " << op;
      if (!fits) continue;
      ASSERT_GE(space.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        space[i] = std::byte{next};
        model.push_back(std::byte{next++});
      }
      q->commit(n);
    } else {
      auto bytes = q->peek();
      // A prefix of what was published; empty only when nothing is.
      ASSERT_LE(bytes.size(), model.size());
      ASSERT_EQ(bytes.empty(), model.empty()) << "op " << op;
      const std::size_t n = bytes.empty() ? 0 : rng() % (bytes.size() + 1);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(bytes[i], model.front()) << "op " << op << " byte " << i;
        model.pop_front();
      }
      q->consume(n);
    }
    ASSERT_EQ(q->used_bytes(), model.size());
  }
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
      q->commit(n);
      ++i;
    }
  });
  uint64_t expect = 0;
  while (expect < kEntries) {
    auto bytes = q->peek();
    std::size_t done = 0;
    while (done < bytes.size()) {
      const std::size_t n = 8 * (1 + expect % 37);
      ASSERT_LE(done + n, bytes.size()) << "entry split across a publish";
      for (std::size_t k = 0; k < n; k += 8) {
        uint64_t v;
        std::memcpy(&v, bytes.data() + done + k, 8);
        ASSERT_EQ(v, expect);
      }
      done += n;
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
