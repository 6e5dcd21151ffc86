// Cache-line size, and an allocator for containers that one thread writes
// while others work nearby: false sharing costs a line transfer per write.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace fjord {

inline constexpr std::size_t kCacheLineBytes = 64;

// Allocates whole, aligned cache lines, so a small array (a thread's wake
// marks, a block table row) never shares a line with another allocation
// that a different thread writes. Memory is allocated at start-up; the cost
// is at most one line of padding per container.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>& /*unused*/) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    // T may be a pointer type (a row of Block*): its size is what is meant.
    constexpr std::size_t kElement = sizeof(T);  // NOLINT(bugprone-sizeof-expression)
    const std::size_t bytes = (n * kElement + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
    return static_cast<T*>(::operator new (bytes, std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept { ::operator delete (p, std::align_val_t{kCacheLineBytes}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>& /*unused*/) const noexcept {
    return true;
  }
};

template <class T>
using LineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace fjord
