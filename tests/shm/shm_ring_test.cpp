// The SPSC batch ring (fjord/shm/spsc_ring.h): against a std::deque model
// under random operations (with adversarial bytes written everywhere the
// producer may write), stale bytes of earlier laps, corrupt envelopes and
// indices, and shared by two processes. Every randomised test prints its seed
// on failure; FJORD_TEST_SEED=<n> reruns one seed.
#include <gtest/gtest.h>
#include <signal.h>
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

void store_word(std::byte* p, uint64_t word) { std::memcpy(p, &word, sizeof word); }

// Fills [from, to) of `space` with words that would pass for the envelopes
// of the next few batches if the ring ever mistook them for one.
void scribble_envelopes(std::span<std::byte> space, std::size_t from, std::size_t to, uint32_t next_sequence,
                        std::mt19937_64& rng) {
  for (std::size_t i = from; i < to; ++i) {
    if (reinterpret_cast<uintptr_t>(space.data() + i) % 8 != 0 || i + 8 > to) continue;
    const auto bytes = static_cast<uint32_t>(1 + rng() % 200);
    store_word(space.data() + i, make_envelope(bytes, next_sequence + static_cast<uint32_t>(rng() % 3)));
  }
}

struct Batch {
  uint64_t offset = 0;  // stream offset of its envelope
  std::vector<std::byte> bytes;
};

// The model: published batches, oldest first, and the open batch.
struct Model {
  std::deque<Batch> published;
  std::size_t front_released = 0;  // of published.front()
  bool held = false;               // the consumer took published.front()
  std::vector<std::byte> open;     // committed, not published
  uint64_t open_offset = 0;        // stream offset of the open batch's envelope
  uint64_t read = 0;               // the consumer's read index

  uint64_t open_end() const { return open.empty() ? open_offset : open_offset + kEnvelopeBytes + open.size(); }
  // How much the open batch may grow, by the ring's rule, with the true read index.
  std::size_t growable(std::size_t capacity) const {
    const uint64_t last_envelope = (read + capacity - kEnvelopeBytes) & ~uint64_t{kBatchAlignBytes - 1};
    const uint64_t end = open_offset + kEnvelopeBytes + open.size();
    return last_envelope > end ? last_envelope - end : 0;
  }
};

std::string publish(LocalRing& ring, Model& model, uint64_t& wraps) {
  const std::size_t capacity = ring.producer.capacity();
  const uint64_t before = ring.producer.published_index() / capacity;
  if (ring.producer.publish() != model.open.size()) return "publish() reported the wrong length";
  if (model.open.empty()) return "";
  model.published.push_back({model.open_offset, std::move(model.open)});
  model.open.clear();
  const Batch& last = model.published.back();
  model.open_offset = align_to_batch(last.offset + kEnvelopeBytes + last.bytes.size());
  if (ring.producer.published_index() != model.open_offset) return "the next batch starts at the wrong offset";
  wraps += ring.producer.published_index() / capacity - before;
  return "";
}

std::string produce(LocalRing& ring, Model& model, std::mt19937_64& rng) {
  const std::size_t capacity = ring.producer.capacity();
  const std::size_t min = 1 + rng() % (rng() % 4 == 0 ? capacity : capacity / 16);
  const std::size_t room = model.growable(capacity);
  std::span<std::byte> space = ring.producer.reserve(min);
  if (space.empty() != (room < min))
    return "reserve(" + std::to_string(min) + ") returned " + std::to_string(space.size()) + " with room for " +
           std::to_string(room);
  if (space.empty()) return "";
  if (space.size() < min || space.size() > room) return "reservation of the wrong size";
  const std::size_t n = rng() % 3 == 0 ? rng() % (space.size() + 1) : rng() % std::min<std::size_t>(space.size(), 300);
  const uint32_t next_sequence = ring.producer.published_batches() + 1;
  if (rng() % 2 == 0) {
    scribble_envelopes(space, 0, n, next_sequence, rng);  // committed bytes that look like envelopes
  } else {
    for (std::size_t i = 0; i < n; ++i) space[i] = static_cast<std::byte>(rng());
  }
  // Written but never committed: must never reach the consumer.
  scribble_envelopes(space, n, std::min(space.size(), n + 512), next_sequence, rng);
  model.open.insert(model.open.end(), space.begin(), space.begin() + static_cast<std::ptrdiff_t>(n));
  ring.producer.commit(n);
  return "";
}

std::string consume(LocalRing& ring, Model& model, std::mt19937_64& rng) {
  if (!ring.consumer.refresh()) return "consumer found a valid ring corrupt";
  if (!model.held && !model.published.empty()) model.held = true;
  std::span<const std::byte> readable = ring.consumer.readable();
  if (!model.held) return readable.empty() ? "" : "consumer sees a batch nobody published";
  const Batch& front = model.published.front();
  if (readable.size() != front.bytes.size() - model.front_released)
    return "readable() is " + std::to_string(readable.size()) + " bytes, the model's batch has " +
           std::to_string(front.bytes.size() - model.front_released) + " left";
  for (std::size_t i = 0; i < readable.size(); ++i)
    if (readable[i] != front.bytes[model.front_released + i]) return "byte " + std::to_string(i) + " differs";
  const std::size_t n = rng() % 4 == 0 ? rng() % (readable.size() + 1) : readable.size();
  ring.consumer.release(n);
  if (n == 0) return "";
  model.front_released += n;
  model.read = front.offset + kEnvelopeBytes + model.front_released;
  if (model.front_released == front.bytes.size()) {
    model.read = align_to_batch(model.read);
    model.published.pop_front();
    model.front_released = 0;
    model.held = false;
  }
  if (ring.indices.read_index.load() != model.read) return "the shared read index disagrees with the model";
  return "";
}

TEST(SpscRingTest, MatchesDequeModelUnderRandomOperations) {
  for (uint64_t seed : test_seeds()) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with FJORD_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    // One page: small enough to wrap often, with envelopes landing on every
    // line of earlier laps' bytes.
    LocalRing ring(page_size());
    Model model;
    uint64_t wraps = 0;
    uint64_t batches = 0;
    for (int step = 0; step < 40000; ++step) {
      const uint64_t op = rng() % 5;
      const std::string error = op < 2    ? produce(ring, model, rng)
                                : op == 2 ? publish(ring, model, wraps)
                                          : consume(ring, model, rng);
      ASSERT_EQ(error, "") << "at step " << step;
      ASSERT_GE(ring.producer.used_bytes(), model.open_end() - model.read) << "at step " << step;
      batches = ring.producer.published_batches();
    }
    EXPECT_GT(wraps, 20u) << "the run should wrap around the ring many times";
    EXPECT_GT(batches, 2000u);
    EXPECT_FALSE(ring.producer.corrupt() || ring.consumer.corrupt());
  }
}

TEST(SpscRingTest, SmallBatchAndItsEnvelopeShareOneLine) {
  LocalRing ring(page_size());
  std::span<std::byte> space = ring.producer.reserve(56);
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(space.data()) % kCacheLineBytes, kEnvelopeBytes);
  ring.producer.commit(56);
  EXPECT_EQ(ring.producer.publish(), 56u);
  EXPECT_EQ(ring.producer.published_index(), kCacheLineBytes) << "the next batch starts on the next line";
  ASSERT_FALSE(ring.producer.reserve(57).empty());
  ring.producer.commit(57);
  ring.producer.publish();
  EXPECT_EQ(ring.producer.published_index(), 3 * kCacheLineBytes) << "57 bytes and an envelope take two lines";
}

TEST(SpscRingTest, BytesWrittenPastTheCommitNeverLookReady) {
  LocalRing ring(page_size());
  std::span<std::byte> space = ring.producer.reserve(512);
  ASSERT_GE(space.size(), 512u);
  // The slot where batch 2's envelope will go holds a perfect imitation of it.
  for (std::size_t i = 0; i + 8 <= 512; i += 8) store_word(space.data() + i, make_envelope(16, 2));
  ring.producer.commit(16);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  ASSERT_EQ(ring.consumer.readable().size(), 16u);
  ring.consumer.release(16);
  ASSERT_TRUE(ring.consumer.refresh());
  EXPECT_TRUE(ring.consumer.readable().empty()) << "batch 2 was never published";
  EXPECT_FALSE(ring.consumer.corrupt());
}

TEST(SpscRingTest, StaleBytesOfEarlierLapsAreNeverAccepted) {
  LocalRing ring(page_size());
  const std::size_t capacity = ring.producer.capacity();
  uint32_t published = 0;
  // Lap after lap, every byte committed imitates envelopes of the batches to
  // come; batches of changing sizes put later envelopes on those bytes.
  for (int round = 0; round < 2000; ++round) {
    const std::size_t n = 8 + (round * 40) % 700;
    std::span<std::byte> space = ring.producer.reserve(n);
    ASSERT_FALSE(space.empty()) << "round " << round;
    for (std::size_t i = 0; i + 8 <= space.size() && i < 2048; i += 8)
      store_word(space.data() + i, make_envelope(static_cast<uint32_t>(8 + i % 64), published + 1 + i % 4));
    ring.producer.commit(n);
    ASSERT_TRUE(ring.consumer.refresh());
    ASSERT_TRUE(ring.consumer.readable().empty()) << "unpublished bytes accepted in round " << round;
    ASSERT_EQ(ring.producer.publish(), n);
    ++published;
    ASSERT_TRUE(ring.consumer.refresh());
    ASSERT_EQ(ring.consumer.readable().size(), n) << "round " << round;
    ring.consumer.release(n);
    ASSERT_TRUE(ring.consumer.refresh());
    ASSERT_TRUE(ring.consumer.readable().empty()) << "stale bytes accepted after round " << round;
  }
  EXPECT_GT(ring.producer.published_index() / capacity, 50u) << "the test must lap the ring";
  EXPECT_FALSE(ring.consumer.corrupt());
}

TEST(SpscRingTest, ReservationCrossingTheEndIsContiguous) {
  LocalRing ring(page_size());
  const std::size_t capacity = ring.producer.capacity();
  // Move both sides to two lines before the end.
  ASSERT_FALSE(ring.producer.reserve(capacity - 2 * kCacheLineBytes - kEnvelopeBytes).empty());
  ring.producer.commit(capacity - 2 * kCacheLineBytes - kEnvelopeBytes);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  ring.consumer.release(ring.consumer.readable().size());
  ASSERT_EQ(ring.producer.published_index(), capacity - 2 * kCacheLineBytes);
  // A batch now spans the end: it must still be one span on both sides.
  std::span<std::byte> space = ring.producer.reserve(300);
  ASSERT_GE(space.size(), 300u);
  for (std::size_t i = 0; i < 300; ++i) space[i] = static_cast<std::byte>(i);
  ring.producer.commit(300);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  std::span<const std::byte> readable = ring.consumer.readable();
  ASSERT_EQ(readable.size(), 300u);
  for (std::size_t i = 0; i < 300; ++i) ASSERT_EQ(readable[i], static_cast<std::byte>(i)) << i;
  // The bytes past the end landed at the start of the ring's memory.
  const std::size_t past_end = 2 * kCacheLineBytes - kEnvelopeBytes;
  EXPECT_EQ(ring.map.data()[0], static_cast<std::byte>(past_end));
}

TEST(SpscRingTest, ReadIndexIsReadOnlyWhenTheCachedViewRunsOut) {
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
  EXPECT_TRUE(ring.producer.reserve(capacity - kCacheLineBytes).empty());
  EXPECT_TRUE(ring.producer.corrupt());
  EXPECT_TRUE(ring.producer.reserve(1).empty()) << "a corrupt ring stays refused";
}

TEST(SpscRingTest, ProducerRejectsAReadIndexThatMovesBackwards) {
  LocalRing ring(page_size());
  const std::size_t capacity = ring.producer.capacity();
  ASSERT_FALSE(ring.producer.reserve(capacity / 2).empty());
  ring.producer.commit(capacity / 2);
  ring.producer.publish();
  ASSERT_TRUE(ring.consumer.refresh());
  ring.consumer.release(capacity / 2);
  ASSERT_TRUE(ring.producer.refresh());
  ring.indices.read_index.store(8);
  EXPECT_FALSE(ring.producer.refresh());
  EXPECT_TRUE(ring.producer.corrupt());
}

// Publishes one 64-byte batch, then overwrites its envelope with `forged`.
bool consumer_accepts(uint64_t forged) {
  LocalRing ring(page_size());
  EXPECT_FALSE(ring.producer.reserve(64).empty());
  ring.producer.commit(64);
  ring.producer.publish();
  store_word(ring.map.data(), forged);
  const bool ok = ring.consumer.refresh();
  EXPECT_EQ(ok, !ring.consumer.corrupt());
  if (!ok) {
    EXPECT_TRUE(ring.consumer.readable().empty()) << "nothing of a refused batch is readable";
    EXPECT_FALSE(ring.consumer.refresh()) << "a corrupt ring stays refused";
  }
  return ok;
}

TEST(SpscRingTest, ConsumerRefusesCorruptEnvelopes) {
  const std::size_t capacity = page_size();
  EXPECT_TRUE(consumer_accepts(make_envelope(64, 1)));
  EXPECT_FALSE(consumer_accepts(make_envelope(64, 2))) << "sequence from the future";
  EXPECT_FALSE(consumer_accepts(make_envelope(64, 0))) << "sequence from the past";
  EXPECT_FALSE(consumer_accepts(make_envelope(0, 1))) << "empty batch";
  const auto most = static_cast<uint32_t>(capacity - kCacheLineBytes - kEnvelopeBytes);
  EXPECT_TRUE(consumer_accepts(make_envelope(most, 1))) << "the largest batch the producer can write";
  EXPECT_FALSE(consumer_accepts(make_envelope(most + 1, 1))) << "longer than the ring allows";
  EXPECT_FALSE(consumer_accepts(make_envelope(UINT32_MAX, 1)));
}

// ---- the hot window ----------------------------------------------------------

// Publishes one batch of `n` bytes, each the low byte of `tag` + its index.
void publish_tagged(SpscRingProducer& p, std::size_t n, uint64_t tag) {
  std::span<std::byte> space = p.reserve(n);
  ASSERT_GE(space.size(), n);
  for (std::size_t i = 0; i < n; ++i) space[i] = static_cast<std::byte>(tag + i);
  p.commit(n);
  ASSERT_EQ(p.publish(), n);
}

// Takes the next batch whole; it must be publish_tagged(n, tag)'s.
void consume_tagged(SpscRingConsumer& c, std::size_t n, uint64_t tag) {
  ASSERT_TRUE(c.refresh());
  const std::span<const std::byte> r = c.readable();
  ASSERT_EQ(r.size(), n) << "batch " << tag;
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], static_cast<std::byte>(tag + i)) << "batch " << tag;
  c.release(n);
}

TEST(SpscRingTest, ProducerGoesBackToTheStartWhileTheConsumerKeepsUp) {
  LocalRing ring(4 * kHotWindowBytes);
  const std::size_t capacity = ring.producer.capacity();
  constexpr std::size_t kBatch = 1000;
  std::size_t furthest = 0, returns = 0, last = 0;
  for (uint64_t tag = 0; tag < 5 * capacity / kBatch; ++tag) {
    publish_tagged(ring.producer, kBatch, tag);
    const std::size_t at = ring.producer.published_index() % capacity;
    if (at < last) {
      ++returns;
      // The gap the producer left is space the consumer frees on its next
      // poll, not a backlog: not in the fill that pressure levels read.
      EXPECT_LE(ring.producer.used_bytes(), kHotWindowBytes / 4 + kBatch + kCacheLineBytes) << "batch " << tag;
    }
    furthest = std::max(furthest, at);
    last = at;
    consume_tagged(ring.consumer, kBatch, tag);
    // Polled before the next batch: a gap just published is stepped over
    // onto the ring's start, where the slot is empty, not an earlier lap's.
    ASSERT_TRUE(ring.consumer.refresh()) << "batch " << tag;
    ASSERT_TRUE(ring.consumer.readable().empty());
  }
  EXPECT_LT(furthest, kHotWindowBytes + kBatch + kCacheLineBytes) << "the producer walked past its window";
  EXPECT_GE(returns, 5 * capacity / kHotWindowBytes - 1) << "it went back once per window of bytes";
  EXPECT_FALSE(ring.producer.corrupt());
  EXPECT_FALSE(ring.consumer.corrupt());
}

TEST(SpscRingTest, ALaggingConsumerKeepsTheWholeRingInUse) {
  LocalRing ring(4 * kHotWindowBytes);
  const std::size_t capacity = ring.producer.capacity();
  constexpr std::size_t kBatch = 1000;
  uint64_t tag = 0;
  // Nothing read: the producer fills the ring, window or not.
  while (!ring.producer.reserve(kBatch).empty()) publish_tagged(ring.producer, kBatch, tag++);
  EXPECT_GE(tag * (kBatch + 24), capacity - 2 * kBatch) << "the ring held less than its capacity";
  // Then it is read in order, one lap from the start.
  for (uint64_t t = 0; t < tag; ++t) consume_tagged(ring.consumer, kBatch, t);
  ASSERT_TRUE(ring.consumer.refresh());
  EXPECT_TRUE(ring.consumer.readable().empty());
}

TEST(SpscRingTest, ConsumerRefusesAGapThatDoesNotEndTheLap) {
  const auto forged_gap_after = [](std::size_t batch, uint32_t length_change) {
    LocalRing ring(4 * kHotWindowBytes);
    publish_tagged(ring.producer, batch, 1);
    consume_tagged(ring.consumer, batch, 1);
    const std::size_t at = ring.producer.published_index() % ring.producer.capacity();
    const auto rest = static_cast<uint32_t>(ring.producer.capacity() - at - kEnvelopeBytes);
    store_word(ring.map.data(), 0);  // the next envelope slot, as the producer clears it before a gap
    store_word(ring.map.data() + at, make_envelope((rest + length_change) | kGapBit, 2));
    const bool ok = ring.consumer.refresh();
    EXPECT_EQ(ok, !ring.consumer.corrupt());
    EXPECT_TRUE(ring.consumer.readable().empty());
    return ok;
  };
  EXPECT_TRUE(forged_gap_after(100, 0)) << "a gap to the lap's end is stepped over";
  EXPECT_FALSE(forged_gap_after(100, kCacheLineBytes)) << "past the lap's end";
  EXPECT_FALSE(forged_gap_after(100, static_cast<uint32_t>(-kCacheLineBytes))) << "short of the lap's end";
  // A gap at the ring's start would skip a whole lap (the producer never
  // writes one): it is refused.
  LocalRing ring(4 * kHotWindowBytes);
  store_word(ring.map.data(),
             make_envelope(static_cast<uint32_t>(ring.producer.capacity() - kEnvelopeBytes) | kGapBit, 1));
  EXPECT_FALSE(ring.consumer.refresh());
  EXPECT_TRUE(ring.consumer.corrupt());
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

// 32 MB in random-sized commits and reads: through a 64 KB ring (512 laps),
// and through one of four hot windows, which the producer leaves for its
// start whenever the reader is close behind.
class TwoProcessRing : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TwoProcessRing, StreamsVerifiedData) {
  const uint64_t seed = test_seeds().back();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with FJORD_TEST_SEED=" + std::to_string(seed) + ")");
  const std::size_t capacity = GetParam();
  UniqueFd memfd(::memfd_create("ring-test", MFD_CLOEXEC));
  ASSERT_TRUE(memfd.valid());
  ASSERT_EQ(::ftruncate(memfd.get(), static_cast<off_t>(page_size() + capacity)), 0);
  void* header = ::mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
  ASSERT_NE(header, MAP_FAILED);
  auto* indices = new (header) SpscRingIndices();
  auto ring_map = MirroredMap::map(memfd.get(), page_size(), capacity);
  ASSERT_TRUE(ring_map) << ring_map.status().to_string();

  constexpr uint64_t kTotal = 32ULL << 20;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) produce_in_child(memfd.get(), capacity, kTotal, seed);
  // A failed assertion returns early: the producer, blocked on a full ring,
  // must not outlive the test.
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{child};

  SpscRingConsumer consumer(indices, ring_map->data(), capacity);
  std::mt19937_64 rng(seed + 1);
  uint64_t read = 0;
  int status = 0;
  bool child_done = false;
  while (read < kTotal) {
    ASSERT_TRUE(consumer.refresh()) << "corrupt envelope at " << read;
    std::span<const std::byte> readable = consumer.readable();
    if (readable.empty()) {
      ASSERT_FALSE(child_done) << "producer exited (status " << status << ") after " << read << " bytes";
      // Once it has exited, one more refresh sees all it published.
      if (::waitpid(child, &status, WNOHANG) == child) child_done = reaper.reaped = true;
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
    reaper.reaped = true;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ::munmap(header, page_size());
}

INSTANTIATE_TEST_SUITE_P(SpscRingTest, TwoProcessRing, ::testing::Values(16 * 4096, 4 * kHotWindowBytes));

// Every batch size a transporter publishes, 8 bytes (one frame's worth of
// alignment) to the largest frame, through a ring two largest frames long:
// each size once with the consumer keeping up (wrapping at every offset the
// sizes lead to), and the ring filled until reserve() refuses before the
// consumer drains it, so it is exactly full again and again.
TEST(SpscRingTest, EveryBatchSizeFromEightBytesToTheLargestFrameWrapsAndFillsExactly) {
  constexpr std::size_t kLargest = 32 * 1024;
  LocalRing ring(2 * kLargest);
  const std::size_t capacity = ring.producer.capacity();
  uint64_t tag = 0;
  for (std::size_t n = 8; n <= kLargest; n += 8) {
    publish_tagged(ring.producer, n, tag);
    consume_tagged(ring.consumer, n, tag);
    if (HasFatalFailure()) return;
    ++tag;
  }
  EXPECT_GT(ring.producer.published_index() / capacity, 1000u) << "the test must lap the ring many times";
  for (std::size_t n = 8; n <= kLargest; n = n * 3 / 2 + 8 - (n * 3 / 2) % 8) {
    SCOPED_TRACE(n);
    std::vector<uint64_t> tags;
    // Fill: batches of n until the ring refuses one; what it holds then is
    // all it can hold (less than one more batch and its envelope is free).
    for (;;) {
      std::span<std::byte> space = ring.producer.reserve(n);
      if (space.empty()) break;
      for (std::size_t i = 0; i < n; ++i) space[i] = static_cast<std::byte>(tag + i);
      ring.producer.commit(n);
      ASSERT_EQ(ring.producer.publish(), n);
      tags.push_back(tag++);
    }
    ASSERT_FALSE(tags.empty()) << "an empty ring refused a batch of " << n;
    const std::size_t line_padded = align_to_batch(kEnvelopeBytes + n);
    // Each batch takes its line-padded length; one more would end where the
    // envelope after it no longer fits before the consumer's position.
    EXPECT_GT((tags.size() + 1) * line_padded + kEnvelopeBytes, capacity)
        << "refused with room left for another batch (" << tags.size() << " held)";
    EXPECT_FALSE(ring.consumer.corrupt());
    for (uint64_t t : tags) {
      consume_tagged(ring.consumer, n, t);
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(ring.consumer.refresh());
    EXPECT_TRUE(ring.consumer.readable().empty());
  }
}

}  // namespace
}  // namespace fjord::shm
