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
      q->commit(n, e.sender, SenderKind::kDataNode);
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

// Commits 64-byte entries numbered 0, 1, ... until the queue refuses one;
// returns how many went in.
uint64_t fill_with_numbered_entries(JobBuffer& q) {
  uint64_t pushed = 0;
  for (;;) {
    auto space = q.reserve(56);
    if (space.empty()) return pushed;
    std::memcpy(space.data(), &pushed, sizeof pushed);
    q.commit(56, 1, SenderKind::kDataNode);
    ++pushed;
  }
}

// Walks `count` numbered 64-byte entries from the read position, checking
// each; returns the bytes walked (0 after a failure).
std::size_t check_numbered_entries(JobBuffer& q, uint64_t count) {
  std::size_t offset = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const auto entry = q.entry_at(offset);
    EXPECT_EQ(entry.size(), 64u) << "entry " << i;
    if (entry.size() != 64) return 0;
    uint64_t v;
    std::memcpy(&v, entry.data() + sizeof(Envelope), sizeof v);
    EXPECT_EQ(v, i);
    if (v != i) return 0;
    offset += entry.size();
  }
  return offset;
}

TEST(JobBufferTest, FullQueueRefusesAndLosesNothing) {
  auto q = JobBuffer::create(64 << 10);
  ASSERT_TRUE(q);
  const uint64_t pushed = fill_with_numbered_entries(*q);
  // 64-byte entries, one 8-byte envelope kept free: capacity / 64 - 1 fit.
  EXPECT_EQ(pushed, q->capacity() / 64 - 1);
  std::size_t offset = check_numbered_entries(*q, pushed);
  ASSERT_EQ(offset, pushed * 64);
  EXPECT_TRUE(q->entry_at(offset).empty());
  q->consume(offset);
  EXPECT_FALSE(q->reserve(56).empty()) << "room again once consumed";
}

// Where an entry lies in the ring: bytes from the ring's start (the first
// entry ever published sits there), modulo the capacity.
std::size_t ring_offset(const JobBuffer& q, const std::byte* start, std::span<const std::byte> entry) {
  return static_cast<std::size_t>(entry.data() - start) % q.capacity();
}

TEST(JobBufferTest, GoesBackToTheRingsStartWhileTheConsumerKeepsUp) {
  auto q = JobBuffer::create(1 << 20);
  ASSERT_TRUE(q);
  ASSERT_EQ(q->hot_window_bytes(), JobBuffer::kHotWindowBytes);
  const std::byte* start = nullptr;
  std::size_t highest = 0;
  // Ten laps' worth of 32-byte entries, each consumed before the next.
  const uint64_t entries = 10 * q->capacity() / 32;
  for (uint64_t i = 0; i < entries; ++i) {
    auto space = q->reserve(24);
    ASSERT_FALSE(space.empty()) << "entry " << i;
    std::memcpy(space.data(), &i, sizeof i);
    q->commit(24, 1, SenderKind::kDataNode);
    std::size_t at = 0;
    const auto entry = q->entry_at(at);
    ASSERT_EQ(entry.size(), 32u) << "entry " << i;
    if (start == nullptr) start = entry.data();
    uint64_t v;
    std::memcpy(&v, entry.data() + sizeof(Envelope), sizeof v);
    ASSERT_EQ(v, i);
    highest = std::max(highest, ring_offset(*q, start, entry));
    q->consume(at + entry.size());
    ASSERT_EQ(q->used_bytes(), 0u) << "a gap stepped over is no data";
    ASSERT_FALSE(q->has_data());
  }
  // The producer never went further than one window (plus the entry that
  // crossed it) into a lap: the ring's other 960 KB stayed out of play.
  EXPECT_LT(highest, JobBuffer::kHotWindowBytes + 32);
  EXPECT_EQ(q->free_bytes(), q->capacity());
}

TEST(JobBufferTest, ALaggingConsumerKeepsTheWholeRingInUse) {
  auto q = JobBuffer::create(1 << 20);
  ASSERT_TRUE(q);
  // Step the producer past the window with the consumer keeping up, so that
  // it would go back to the start, then stop consuming: no gap may shrink
  // the ring now; the whole capacity fills, less the envelope kept zero.
  std::size_t consumed_bytes = 0;
  while (consumed_bytes < JobBuffer::kHotWindowBytes * 3 / 2) {
    auto space = q->reserve(56);
    ASSERT_FALSE(space.empty());
    q->commit(56, 1, SenderKind::kDataNode);
    std::size_t at = 0;
    const auto entry = q->entry_at(at);
    ASSERT_FALSE(entry.empty());
    q->consume(at + entry.size());
    consumed_bytes += at + entry.size();
  }
  const uint64_t pushed = fill_with_numbered_entries(*q);
  EXPECT_EQ(pushed, q->capacity() / 64 - 1) << "consumed " << consumed_bytes << " bytes first";
  EXPECT_EQ(q->used_bytes(), pushed * 64);
  const std::size_t offset = check_numbered_entries(*q, pushed);
  ASSERT_EQ(offset, pushed * 64);
  q->consume(offset);
  EXPECT_EQ(q->used_bytes(), 0u);
}

// The deque model again, on a ring large enough to go back to its start:
// entries (and a sender) in order across gaps; a gap never counts as used;
// a refusal only when the entry would not fit beside what the model holds
// plus a gap not yet stepped over; gaps really happened.
TEST(JobBufferTest, MatchesADequeModelAcrossGaps) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto q = JobBuffer::create(256 << 10);
  ASSERT_TRUE(q);
  ASSERT_EQ(q->hot_window_bytes(), JobBuffer::kHotWindowBytes);
  std::deque<ModelEntry> model;
  std::size_t model_bytes = 0;
  uint8_t next = 1;
  int gaps = 0;
  const std::byte* start = nullptr;
  std::size_t last_end = 0;  // ring offset where the last entry read ended
  for (int op = 0; op < 300000; ++op) {
    // Mostly a consumer that keeps up; now and then one that lags.
    const bool lagging = (op / 20000) % 3 == 2;
    if (rng() % (lagging ? 4 : 2) != 0) {
      const std::size_t n = 8 * (1 + rng() % 256);
      auto space = q->reserve(n);
      const std::size_t need = JobBuffer::entry_bytes(n) + sizeof(Envelope);
      if (model_bytes + need > q->capacity()) {
        ASSERT_TRUE(space.empty()) << "op " << op;
      }
      if (space.empty()) {
        // What a gap may hold back is the rest of a lap past the window.
        ASSERT_GT(model_bytes + need, q->hot_window_bytes()) << "refused with room: op " << op;
        continue;
      }
      ModelEntry e{std::vector<std::byte>(n), static_cast<NodeId>(1 + rng() % kMaxNodeId)};
      for (std::size_t i = 0; i < n; ++i) e.frame[i] = space[i] = std::byte{next++};
      q->commit(n, e.sender, SenderKind::kDataNode);
      model_bytes += JobBuffer::entry_bytes(n);
      model.push_back(std::move(e));
    } else {
      const std::size_t take = model.empty() ? 0 : lagging ? rng() % 2 : model.size();
      std::size_t offset = 0;
      for (std::size_t k = 0; k < take; ++k) {
        const auto entry = q->entry_at(offset);
        ASSERT_EQ(entry.size(), JobBuffer::entry_bytes(model.front().frame.size())) << "op " << op;
        if (start == nullptr) start = entry.data();
        const std::size_t at = ring_offset(*q, start, entry);
        if (at != last_end % q->capacity()) {
          ASSERT_EQ(at, 0u) << "entries resume at the ring's start after a gap: op " << op;
          ++gaps;
        }
        last_end = at + entry.size();
        Envelope envelope;
        std::memcpy(&envelope, entry.data(), sizeof envelope);
        ASSERT_EQ(envelope.sender_node, model.front().sender);
        ASSERT_EQ(envelope.flags, 0u);
        ASSERT_EQ(std::memcmp(entry.data() + sizeof(Envelope), model.front().frame.data(), model.front().frame.size()),
                  0)
            << "op " << op;
        offset += entry.size();
        model_bytes -= JobBuffer::entry_bytes(model.front().frame.size());
        model.pop_front();
      }
      if (model.empty()) {
        ASSERT_TRUE(q->entry_at(offset).empty()) << "op " << op;  // steps over a trailing gap
      }
      q->consume(offset);
    }
    ASSERT_EQ(q->used_bytes(), model_bytes) << "op " << op;
    ASSERT_EQ(q->has_data(), !model.empty()) << "op " << op;
  }
  EXPECT_GT(gaps, 10) << "the producer went back to the ring's start";
}

void two_threads_stream_every_byte_in_order(std::size_t bytes);

TEST(JobBufferTest, TwoThreadsStreamEveryByteInOrder) {
  for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{1} << 20}) {
    SCOPED_TRACE("buffer of " + std::to_string(bytes) + " bytes");
    two_threads_stream_every_byte_in_order(bytes);
  }
}

void two_threads_stream_every_byte_in_order(std::size_t bytes) {
  auto q = JobBuffer::create(bytes);
  ASSERT_TRUE(q);
  constexpr uint64_t kEntries = 300000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kEntries;) {
      const std::size_t n = 8 * (1 + i % 37);
      auto space = q->reserve(n);
      if (space.empty()) continue;
      for (std::size_t k = 0; k < n; k += 8) std::memcpy(space.data() + k, &i, 8);
      q->commit(n, static_cast<NodeId>(1 + i % kMaxNodeId), SenderKind::kDataNode);
      ++i;
    }
  });
  uint64_t expect = 0;
  while (expect < kEntries) {
    std::size_t done = 0;
    for (auto entry = q->entry_at(done); !entry.empty(); entry = q->entry_at(done)) {
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

TEST(JobBufferTest, ABufferTooLargeForItsLengthFieldIsRefusedByName) {
  // An entry's (and a gap's) length is 32 bits: past 2 GB create() says so
  // before it maps anything.
  auto q = JobBuffer::create(std::size_t{3} << 30);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(q.status().message().find("at most 2 GB"), std::string::npos) << q.status().to_string();
  EXPECT_TRUE(JobBuffer::create(std::size_t{1} << 20)) << "a usual size still works";
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
