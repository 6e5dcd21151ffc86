// The SPSC byte ring (fjord/shm/spsc_ring.h): against a std::deque model
// under random operations, with corrupt indices, and shared by two processes.
// Every randomised test prints its seed on failure; FJORD_TEST_SEED=<n>
// reruns one seed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/shm/spsc_ring.h"

namespace fjord::shm {
namespace {

std::vector<uint64_t> test_seeds() {
  if (const char* forced = std::getenv("FJORD_TEST_SEED")) return {std::strtoull(forced, nullptr, 10)};
  std::vector<uint64_t> seeds;
  for (uint64_t s = 1; s <= 12; ++s) seeds.push_back(s);
  seeds.push_back(std::random_device{}());  // a fresh one each run; printed on failure
  return seeds;
}

// A ring over a private mirrored buffer, both ends in this process.
struct LocalRing {
  explicit LocalRing(std::size_t capacity) : map(MirroredMap::anonymous(capacity, "ring-test").value()) {
    producer = SpscRingProducer(&indices, map.data(), map.size());
    consumer = SpscRingConsumer(&indices, map.data(), map.size());
  }
  SpscRingIndices indices;
  MirroredMap map;
  SpscRingProducer producer;
  SpscRingConsumer consumer;
};

// The model: bytes committed (published or not) and how many are published.
struct Model {
  std::deque<std::byte> bytes;  // committed, not released, oldest first
  std::size_t published = 0;    // prefix of `bytes` the consumer may see
};

// One random step. Returns "" or what went wrong.
std::string random_step(LocalRing& ring, Model& model, std::mt19937_64& rng, uint64_t& wraps) {
  const std::size_t capacity = ring.producer.capacity();
  const std::size_t true_free = capacity - model.bytes.size();
  switch (rng() % 5) {
    case 0:
    case 1: {  // reserve, write, commit part of it
      const std::size_t min = 1 + rng() % (rng() % 4 == 0 ? capacity : capacity / 8);
      std::span<std::byte> space = ring.producer.reserve(min);
      if (space.empty() != (true_free < min))
        return "reserve(" + std::to_string(min) + ") returned " + std::to_string(space.size()) + " with " +
               std::to_string(true_free) + " free";
      if (space.empty()) return "";
      if (space.size() < min || space.size() > true_free) return "reservation of the wrong size";
      const std::size_t n = rng() % (space.size() + 1);
      for (std::size_t i = 0; i < n; ++i) {
        space[i] = static_cast<std::byte>(rng());
        model.bytes.push_back(space[i]);
      }
      const uint64_t before = ring.producer.committed_index() / capacity;
      ring.producer.commit(n);
      wraps += ring.producer.committed_index() / capacity - before;
      return "";
    }
    case 2: {  // publish
      const std::size_t fresh = ring.producer.publish();
      if (fresh != model.bytes.size() - model.published) return "publish() reported the wrong count";
      model.published = model.bytes.size();
      return "";
    }
    case 3: {  // consumer refresh: sees exactly what was published
      if (!ring.consumer.refresh()) return "consumer saw a corrupt index";
      if (ring.consumer.readable().size() != model.published) return "readable() disagrees with the model";
      return "";
    }
    default: {  // consume a prefix of what is readable, checking every byte
      std::span<const std::byte> readable = ring.consumer.readable();
      if (readable.size() > model.published) return "consumer sees unpublished bytes";
      for (std::size_t i = 0; i < readable.size(); ++i)
        if (readable[i] != model.bytes[i]) return "byte " + std::to_string(i) + " of the readable span differs";
      const std::size_t n = rng() % (readable.size() + 1);
      ring.consumer.release(n);
      model.bytes.erase(model.bytes.begin(), model.bytes.begin() + static_cast<std::ptrdiff_t>(n));
      model.published -= n;
      return "";
    }
  }
}

TEST(SpscRingTest, MatchesDequeModelUnderRandomOperations) {
  for (uint64_t seed : test_seeds()) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with FJORD_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    // One page: small enough to wrap often, at odd offsets.
    LocalRing ring(page_size());
    Model model;
    uint64_t wraps = 0;
    for (int step = 0; step < 40000; ++step) {
      const std::string error = random_step(ring, model, rng, wraps);
      ASSERT_EQ(error, "") << "at step " << step;
      ASSERT_EQ(ring.producer.used_bytes() >= model.bytes.size() - model.published, true);
    }
    EXPECT_GT(wraps, 20u) << "the run should wrap around the ring many times";
    EXPECT_FALSE(ring.producer.corrupt() || ring.consumer.corrupt());
  }
}

TEST(SpscRingTest, ReservationCrossingTheEndIsContiguous) {
  LocalRing ring(page_size());
  const std::size_t capacity = ring.producer.capacity();
  // Move both indices to 100 bytes before the end.
  ASSERT_FALSE(ring.producer.reserve(capacity - 100).empty());
  ring.producer.commit(capacity - 100);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  ring.consumer.release(capacity - 100);
  // A reservation now spans the end: it must still be one writable span.
  std::span<std::byte> space = ring.producer.reserve(300);
  ASSERT_EQ(space.size(), capacity);
  for (std::size_t i = 0; i < 300; ++i) space[i] = static_cast<std::byte>(i);
  ring.producer.commit(300);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  std::span<const std::byte> readable = ring.consumer.readable();
  ASSERT_EQ(readable.size(), 300u);
  for (std::size_t i = 0; i < 300; ++i) ASSERT_EQ(readable[i], static_cast<std::byte>(i)) << i;
  // The bytes past the end landed at the start of the ring's memory.
  EXPECT_EQ(ring.map.data()[0], static_cast<std::byte>(100));
}

TEST(SpscRingTest, OtherSidesIndexIsReadOnlyWhenTheCachedViewRunsOut) {
  LocalRing ring(page_size());
  const std::size_t capacity = ring.producer.capacity();
  ASSERT_FALSE(ring.producer.reserve(capacity / 2).empty());
  ring.producer.commit(capacity / 2);
  ring.producer.publish();
  // Scribble a corrupt read index: while the cached view shows enough room
  // the producer does not look at it...
  ring.indices.read_index.store(capacity * 10);
  EXPECT_FALSE(ring.producer.reserve(capacity / 4).empty());
  EXPECT_FALSE(ring.producer.corrupt());
  // ...and when it must look, it notices rather than trusting it.
  EXPECT_TRUE(ring.producer.reserve(capacity).empty());
  EXPECT_TRUE(ring.producer.corrupt());
  EXPECT_TRUE(ring.producer.reserve(1).empty()) << "a corrupt ring stays refused";
}

TEST(SpscRingTest, ConsumerRejectsAWriteIndexBeyondTheCapacity) {
  LocalRing ring(page_size());
  ring.indices.write_index.store(ring.consumer.capacity() + 1);
  EXPECT_FALSE(ring.consumer.refresh());
  EXPECT_TRUE(ring.consumer.corrupt());
  EXPECT_TRUE(ring.consumer.readable().empty()) << "nothing beyond the ring is ever readable";
}

TEST(SpscRingTest, ConsumerRejectsAWriteIndexThatMovesBackwards) {
  LocalRing ring(page_size());
  ASSERT_FALSE(ring.producer.reserve(64).empty());
  ring.producer.commit(64);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  ring.indices.write_index.store(32);
  EXPECT_FALSE(ring.consumer.refresh());
  EXPECT_EQ(ring.consumer.readable().size(), 64u);
}

// ---- two processes ---------------------------------------------------------

// The byte at stream position i, for the cross-process stream.
std::byte stream_byte(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
  x ^= x >> 29;
  return static_cast<std::byte>(x * 0xBF58476D1CE4E5B9ULL >> 56);
}

// The child: produces `total` bytes in random-sized commits, publishing at
// random points. Exit code 0 on success. No gtest in here.
[[noreturn]] void produce_in_child(int memfd, std::size_t capacity, uint64_t total, uint64_t seed) {
  void* header = ::mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  auto ring_map = MirroredMap::map(memfd, page_size(), capacity);
  if (header == MAP_FAILED || !ring_map) ::_exit(3);
  SpscRingProducer producer(static_cast<SpscRingIndices*>(header), ring_map->data(), capacity);
  std::mt19937_64 rng(seed);
  uint64_t written = 0;
  while (written < total) {
    const std::size_t want = 1 + rng() % 3000;
    std::span<std::byte> space = producer.reserve(want);
    if (space.empty()) {
      producer.publish();
      std::this_thread::yield();
      continue;
    }
    const std::size_t n = std::min<uint64_t>(want, total - written);
    for (std::size_t i = 0; i < n; ++i) space[i] = stream_byte(seed, written + i);
    producer.commit(n);
    written += n;
    if (rng() % 4 == 0) producer.publish();
  }
  producer.publish();
  ::_exit(producer.corrupt() ? 4 : 0);
}

TEST(SpscRingTest, TwoProcessesStreamVerifiedData) {
  const uint64_t seed = test_seeds().back();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with FJORD_TEST_SEED=" + std::to_string(seed) + ")");
  const std::size_t capacity = 16 * page_size();
  UniqueFd memfd(::memfd_create("ring-test", MFD_CLOEXEC));
  ASSERT_TRUE(memfd.valid());
  ASSERT_EQ(::ftruncate(memfd.get(), static_cast<off_t>(page_size() + capacity)), 0);
  void* header = ::mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
  ASSERT_NE(header, MAP_FAILED);
  auto* indices = new (header) SpscRingIndices();
  auto ring_map = MirroredMap::map(memfd.get(), page_size(), capacity);
  ASSERT_TRUE(ring_map) << ring_map.status().to_string();

  constexpr uint64_t kTotal = 32ULL << 20;  // 32 MB through a 64 KB ring: 512 laps
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) produce_in_child(memfd.get(), capacity, kTotal, seed);

  SpscRingConsumer consumer(indices, ring_map->data(), capacity);
  std::mt19937_64 rng(seed + 1);
  uint64_t read = 0;
  int status = 0;
  bool child_done = false;
  while (read < kTotal) {
    ASSERT_TRUE(consumer.refresh()) << "corrupt write index at " << read;
    std::span<const std::byte> readable = consumer.readable();
    if (readable.empty()) {
      ASSERT_FALSE(child_done) << "producer exited (status " << status << ") after " << read << " bytes";
      // Once it has exited, one more refresh sees all it published.
      if (::waitpid(child, &status, WNOHANG) == child) child_done = true;
      std::this_thread::yield();
      continue;
    }
    const std::size_t n = 1 + rng() % readable.size();
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(readable[i], stream_byte(seed, read + i)) << "stream byte " << read + i;
    consumer.release(n);
    read += n;
  }
  if (!child_done) {
    ASSERT_EQ(::waitpid(child, &status, 0), child);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ::munmap(header, page_size());
}

}  // namespace
}  // namespace fjord::shm
