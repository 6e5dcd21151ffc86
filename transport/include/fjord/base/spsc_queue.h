// SpscQueue<T>: a bounded single-producer/single-consumer queue of values,
// for handing small requests from one thread to another (latency_bench's
// definers to its executors). Values travel by copy through slots allocated
// at construction; nothing is allocated afterwards.
//
// Threads: push() by the producer thread only; pop() by the consumer thread
// only; capacity() and size_hint() by anyone. Hot path: push and pop.
//
// Each side's index is a free-running count (position = count & mask) on its
// own cache line, beside that side's cached copy of the other's index: a
// side reads the other's line only when its cached view says full (producer)
// or empty (consumer).
//
// Memory orders (each pair names both ends):
//   P1  push: load-acquire head_ when the cached view says full -- pairs
//       with C2: the consumer is done reading every slot below head_, so
//       those slots may be overwritten.
//   P2  push: store-release tail_ after writing the slot -- pairs with C1.
//   C1  pop: load-acquire tail_ when the cached view says empty -- pairs
//       with P2: the slot below the tail read is written.
//   C2  pop: store-release head_ after reading the slot -- pairs with P1.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/base/cache.h"

namespace fjord {

template <typename T>
class SpscQueue {
  static_assert(std::is_trivially_copyable_v<T>, "values travel by copy");

 public:
  // capacity_pow2 slots (a power of two, at least 2). Allocates: start-up only.
  explicit SpscQueue(uint32_t capacity_pow2) : slots_(capacity_pow2), mask_(capacity_pow2 - 1) {
    FJORD_ASSERT(capacity_pow2 >= 2);
    FJORD_ASSERT((capacity_pow2 & (capacity_pow2 - 1)) == 0);
  }
  SpscQueue(const SpscQueue&) = delete;
  SpscQueue& operator=(const SpscQueue&) = delete;

  // Producer: appends `value`; false (nothing changed) when full.
  bool push(const T& value) noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);  // only we write it
    if (tail - head_cache_ == slots_.size()) {
      head_cache_ = head_.load(std::memory_order_acquire);  // P1
      if (tail - head_cache_ == slots_.size()) return false;
    }
    FJORD_ASSERT(tail - head_cache_ < slots_.size());
    slots_[tail & mask_] = value;
    tail_.store(tail + 1, std::memory_order_release);  // P2
    return true;
  }

  // Consumer: takes the oldest value into `value`; false (nothing changed)
  // when empty.
  bool pop(T& value) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);  // only we write it
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);  // C1
      if (head == tail_cache_) return false;
    }
    value = slots_[head & mask_];
    head_.store(head + 1, std::memory_order_release);  // C2
    return true;
  }

  std::size_t capacity() const noexcept { return slots_.size(); }
  // Values in the queue: a racy snapshot, exact when both sides are idle.
  // consumer_order is how head_ is read (seq_cst when it is one side of a
  // sleep protocol's store-then-load).
  std::size_t size_hint(std::memory_order consumer_order = std::memory_order_relaxed) const noexcept {
    const uint64_t head = head_.load(consumer_order);
    return static_cast<std::size_t>(tail_.load(std::memory_order_relaxed) - head);
  }

 private:
  std::vector<T> slots_;
  uint64_t mask_;
  // The producer's line: tail_, and its cached copy of head_.
  alignas(kCacheLineBytes) std::atomic<uint64_t> tail_{0};
  uint64_t head_cache_ = 0;
  // The consumer's line: head_, and its cached copy of tail_.
  alignas(kCacheLineBytes) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
};

}  // namespace fjord
