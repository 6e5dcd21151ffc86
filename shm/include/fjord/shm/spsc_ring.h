// A single-producer/single-consumer byte ring in shared memory.
//
// What it is for: moving a byte stream from one process (or thread) to
// another with no copy and no syscall. The ring's bytes live in a region
// mapped twice back to back (fjord::MirroredMap), so every readable or
// writable range is one contiguous span, even across the end of the ring.
// The two indices live in SpscRingIndices, a small block of shared memory
// that both sides map; each side keeps a private cached copy of the other
// side's index and reads the shared one only when its cached view says the
// ring is full (producer) or empty (consumer), so in steady state neither
// side touches the other's cache line.
//
// Indices are free-running 64-bit byte counters (they never wrap in practice:
// 2^64 bytes at 100 GB/s is 5 years); a position in the ring is the counter
// modulo the capacity, tracked incrementally so no division is needed. The
// capacity need not be a power of two.
//
// Memory orders (DPDK style: each pair names both ends):
//   P1 (producer publish, store-release of write_index) pairs with C1
//      (consumer refresh, load-acquire of write_index): the bytes written into
//      the ring before P1 are visible to the consumer after C1 reads the new
//      index.
//   C2 (consumer release, store-release of read_index) pairs with P2
//      (producer refresh, load-acquire of read_index): the consumer's reads of
//      released bytes happen before the producer, after P2, overwrites them.
// Nothing else is shared, so nothing stronger is needed here. A sleeping
// consumer needs a seq_cst fence on the producer side after P1; that
// protocol lives with the wake-up word (fjord/shm/wakeup.h), not here.
//
// Threads: one producer thread and one consumer thread at a time (they may
// be in different processes). Every method is on the hot path: no system
// call, no allocation, no lock.
//
// The other side is trusted to follow the protocol but not to be correct:
// an index that moves backwards or past the capacity makes refresh() return
// false (the caller takes the link down); nothing here reads or writes out
// of bounds whatever the shared indices say.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/base/cache.h"

namespace fjord::shm {

// The shared part of one ring. Place it in shared memory, zero-initialised
// (or constructed) before either side attaches.
struct SpscRingIndices {
  // Written by the producer only (P1); read by the consumer (C1).
  alignas(kCacheLineBytes) std::atomic<uint64_t> write_index{0};
  // Written by the consumer only (C2); read by the producer (P2).
  alignas(kCacheLineBytes) std::atomic<uint64_t> read_index{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "indices must be lock-free to work across processes");
static_assert(sizeof(SpscRingIndices) == 2 * kCacheLineBytes, "one cache line per index");

// The writing side. Not copyable (two producers would corrupt the ring).
class SpscRingProducer {
 public:
  SpscRingProducer() = default;
  // `data` is the start of a mirrored mapping of 2 * capacity bytes whose
  // halves are the same memory; `indices` is the shared index block.
  SpscRingProducer(SpscRingIndices* indices, std::byte* data, std::size_t capacity) noexcept
      : indices_(indices), data_(data), capacity_(capacity) {
    FJORD_ASSERT(indices != nullptr && data != nullptr && capacity > 0);
    committed_ = published_ = indices->write_index.load(std::memory_order_relaxed);
    const uint64_t read = indices->read_index.load(std::memory_order_acquire);  // P2, as in refresh()
    corrupt_ = committed_ - read > capacity;  // also catches read > committed (the difference wraps)
    cached_read_ = corrupt_ ? committed_ : read;
    write_offset_ = static_cast<std::size_t>(committed_ % capacity);
  }
  SpscRingProducer(const SpscRingProducer&) = delete;
  SpscRingProducer& operator=(const SpscRingProducer&) = delete;
  SpscRingProducer(SpscRingProducer&&) noexcept = default;
  SpscRingProducer& operator=(SpscRingProducer&&) noexcept = default;

  // Returns all free space (at least min_bytes) as one writable span, or an
  // empty span when fewer than min_bytes are free even after re-reading the
  // consumer's index (or the index is corrupt: see corrupt()). The span
  // stays valid until the next reserve() or commit().
  std::span<std::byte> reserve(std::size_t min_bytes) noexcept {
    FJORD_ASSERT(min_bytes > 0);
    if (corrupt_) return {};
    std::size_t free_bytes = capacity_ - used_bytes();
    if (free_bytes < min_bytes) {
      if (!refresh()) return {};
      free_bytes = capacity_ - used_bytes();
      if (free_bytes < min_bytes) return {};
    }
    reserved_ = free_bytes;
    return {data_ + write_offset_, free_bytes};
  }

  // Appends the first `bytes` of the last reservation to the stream. The
  // consumer sees them after the next publish().
  void commit(std::size_t bytes) noexcept {
    FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
    committed_ += bytes;
    write_offset_ += bytes;
    if (write_offset_ >= capacity_) write_offset_ -= capacity_;
    reserved_ = 0;
  }

  // Makes every committed byte visible to the consumer. Returns how many
  // bytes this call published (0: nothing new, no store made).
  std::size_t publish() noexcept {
    const uint64_t fresh = committed_ - published_;
    if (fresh == 0) return 0;
    // P1: store-release; pairs with C1. The ring bytes written before this
    // store are visible to a consumer that loads this index with acquire.
    indices_->write_index.store(committed_, std::memory_order_release);
    published_ = committed_;
    return static_cast<std::size_t>(fresh);
  }

  // Re-reads the consumer's index. Returns false (and latches corrupt())
  // if it moved backwards or beyond what was committed.
  bool refresh() noexcept {
    // P2: load-acquire; pairs with C2. After it, the consumer's reads of the
    // bytes below `read` are finished, so reserve() may hand them out again.
    const uint64_t read = indices_->read_index.load(std::memory_order_acquire);
    if (read - cached_read_ > committed_ - cached_read_) {
      corrupt_ = true;
      return false;
    }
    cached_read_ = read;
    return true;
  }

  // Committed bytes the consumer had not released at the last refresh
  // (an upper bound: the consumer may have released more since).
  std::size_t used_bytes() const noexcept { return static_cast<std::size_t>(committed_ - cached_read_); }
  std::size_t unpublished_bytes() const noexcept { return static_cast<std::size_t>(committed_ - published_); }
  std::size_t capacity() const noexcept { return capacity_; }
  uint64_t committed_index() const noexcept { return committed_; }
  // The consumer's index was found corrupt; the ring must not be used.
  bool corrupt() const noexcept { return corrupt_; }

 private:
  SpscRingIndices* indices_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  uint64_t committed_ = 0;        // private write index: bytes committed
  uint64_t published_ = 0;        // last value stored to write_index
  uint64_t cached_read_ = 0;      // the consumer's index as last read (P2)
  std::size_t write_offset_ = 0;  // committed_ % capacity_
  std::size_t reserved_ = 0;      // size of the outstanding reservation
  bool corrupt_ = false;
};

// The reading side. Not copyable (two consumers would corrupt the ring).
class SpscRingConsumer {
 public:
  SpscRingConsumer() = default;
  SpscRingConsumer(SpscRingIndices* indices, const std::byte* data, std::size_t capacity) noexcept
      : indices_(indices), data_(data), capacity_(capacity) {
    FJORD_ASSERT(indices != nullptr && data != nullptr && capacity > 0);
    read_ = cached_write_ = indices->read_index.load(std::memory_order_relaxed);
    read_offset_ = static_cast<std::size_t>(read_ % capacity);
  }
  SpscRingConsumer(const SpscRingConsumer&) = delete;
  SpscRingConsumer& operator=(const SpscRingConsumer&) = delete;
  SpscRingConsumer(SpscRingConsumer&&) noexcept = default;
  SpscRingConsumer& operator=(SpscRingConsumer&&) noexcept = default;

  // The published bytes not yet released, as of the last refresh(): one
  // contiguous span starting at the oldest unreleased byte. Reads only
  // private state.
  std::span<const std::byte> readable() const noexcept {
    return {data_ + read_offset_, static_cast<std::size_t>(cached_write_ - read_)};
  }

  // Re-reads the producer's index so readable() includes everything
  // published so far. Returns false (and latches corrupt()) if the index
  // moved backwards or claims more than the capacity.
  bool refresh() noexcept {
    // C1: load-acquire; pairs with P1. The bytes the producer wrote before
    // publishing `write` are visible to our reads after this load.
    const uint64_t write = indices_->write_index.load(std::memory_order_acquire);
    if (write - read_ > capacity_ || write - read_ < cached_write_ - read_) {
      corrupt_ = true;
      return false;
    }
    cached_write_ = write;
    return true;
  }

  // Gives the first `bytes` of readable() back to the producer.
  void release(std::size_t bytes) noexcept {
    FJORD_ASSERT_MSG(bytes <= cached_write_ - read_, "release beyond the readable bytes");
    if (bytes == 0) return;
    read_ += bytes;
    read_offset_ += bytes;
    if (read_offset_ >= capacity_) read_offset_ -= capacity_;
    // C2: store-release; pairs with P2. Our reads of the released bytes are
    // complete before the producer can see the space as free.
    indices_->read_index.store(read_, std::memory_order_release);
  }

  std::size_t capacity() const noexcept { return capacity_; }
  uint64_t read_index() const noexcept { return read_; }
  bool corrupt() const noexcept { return corrupt_; }

 private:
  SpscRingIndices* indices_ = nullptr;
  const std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  uint64_t read_ = 0;            // private read index: bytes released
  uint64_t cached_write_ = 0;    // the producer's index as last read (C1)
  std::size_t read_offset_ = 0;  // read_ % capacity_
  bool corrupt_ = false;
};

}  // namespace fjord::shm
