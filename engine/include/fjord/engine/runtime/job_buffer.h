// JobBuffer: a lock-free single-producer/single-consumer byte queue between
// two threads of one data node (NDB's job buffer, one per (producer thread,
// consumer thread) pair, plus each thread's local queue to itself).
//
// Entries are 8-byte aligned: an Envelope followed by one frame (see
// frame.h), so a frame received from a transporter is copied in unchanged.
// The memory is a MirroredMap allocated at start-up, so a reservation never
// wraps and nothing is allocated afterwards.
//
// Threads: push side (reserve/commit) by the producer only; pop side
// (peek/consume) by the consumer only; fill()/capacity() by anyone.
// Hot path: everything here.
//
// Memory orders (indices are monotonically increasing byte counts):
//   P1  producer: store-release write_ (after writing the entry bytes)
//   C1  consumer: load-acquire write_  -- pairs with P1: the consumer sees the
//       entry bytes before it sees the index that covers them.
//   C2  consumer: store-release read_ (after it stopped reading the bytes)
//   P2  producer: load-acquire read_   -- pairs with C2: the producer does not
//       overwrite bytes the consumer may still be reading.
// Each side caches the other's index and reloads it (P2/C1) only when its
// cached view says full/empty, so the other side's cache line moves only then.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/cache.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

// Precedes every frame in a job buffer.
struct Envelope {
  NodeId sender_node = kNoNode;  // where the signal came from (self for local signals)
  uint16_t flags = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(Envelope) == 8);

class JobBuffer {
 public:
  JobBuffer() = default;
  // capacity_bytes is rounded up to whole pages. numa_node >= 0 places the
  // memory on that NUMA node (the consumer's), before it is first touched.
  static Result<JobBuffer> create(std::size_t capacity_bytes, int numa_node = -1);

  JobBuffer(JobBuffer&&) noexcept;
  JobBuffer& operator=(JobBuffer&&) noexcept;

  // ---- producer ----
  // A writable span of at least `bytes`, or empty if that much is not free.
  std::span<std::byte> reserve(std::size_t bytes) noexcept {
    const uint64_t w = write_.value.load(std::memory_order_relaxed);
    if (w + bytes - cached_read_ > capacity_) {
      cached_read_ = read_.value.load(std::memory_order_acquire);  // P2
      if (w + bytes - cached_read_ > capacity_) return {};
    }
    return {base_ + (w & mask_), static_cast<std::size_t>(capacity_ - (w - cached_read_))};
  }
  // Publishes `bytes` written at the start of the last reservation.
  void commit(std::size_t bytes) noexcept {
    write_.value.store(write_.value.load(std::memory_order_relaxed) + bytes, std::memory_order_release);  // P1
  }
  // Free bytes as the producer last saw them (may be stale-low, never high).
  std::size_t free_bytes_hint() const noexcept {
    return static_cast<std::size_t>(capacity_ - (write_.value.load(std::memory_order_relaxed) - cached_read_));
  }
  std::size_t free_bytes() noexcept {
    cached_read_ = read_.value.load(std::memory_order_acquire);  // P2
    return free_bytes_hint();
  }

  // ---- consumer ----
  // Published, unconsumed bytes (whole entries) as far as the consumer has
  // looked: a prefix of what is published. It re-reads the producer's index
  // only when that view is empty, so empty means "nothing published".
  std::span<const std::byte> peek() noexcept {
    const uint64_t r = read_.value.load(std::memory_order_relaxed);
    if (r == cached_write_) {
      cached_write_ = write_.value.load(std::memory_order_acquire);  // C1
      if (r == cached_write_) return {};
    }
    return {base_ + (r & mask_), static_cast<std::size_t>(cached_write_ - r)};
  }
  // True if peek() would return bytes (reloads the producer's index).
  bool has_data() noexcept {
    return read_.value.load(std::memory_order_relaxed) != write_.value.load(std::memory_order_acquire);  // C1
  }
  void consume(std::size_t bytes) noexcept {
    read_.value.store(read_.value.load(std::memory_order_relaxed) + bytes, std::memory_order_release);  // C2
  }

  // ---- anyone ----
  std::size_t capacity() const noexcept { return static_cast<std::size_t>(capacity_); }
  // Bytes in the queue now (racy snapshot, exact when both sides are idle).
  std::size_t used_bytes() const noexcept {
    return static_cast<std::size_t>(write_.value.load(std::memory_order_relaxed) -
                                    read_.value.load(std::memory_order_relaxed));
  }

 private:
  struct alignas(kCacheLineBytes) Index {
    std::atomic<uint64_t> value{0};
  };

  MirroredMap memory_;
  std::byte* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
  Index write_;                                         // written by the producer
  alignas(kCacheLineBytes) uint64_t cached_read_ = 0;   // producer's private copy
  Index read_;                                          // written by the consumer
  alignas(kCacheLineBytes) uint64_t cached_write_ = 0;  // consumer's private copy
};

}  // namespace fjord::engine
