#include "counting_new.h"

#include <cstdlib>
#include <new>

namespace fjord::test {

std::atomic<bool> g_count_allocations{false};
std::atomic<uint64_t> g_allocations{0};

}  // namespace fjord::test

// noinline: GCC otherwise sees malloc/free through the inlined operators and
// warns (wrongly) that new and delete do not match.
__attribute__((noinline)) void* operator new(std::size_t bytes) {
  if (fjord::test::g_count_allocations.load(std::memory_order_relaxed))
    fjord::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new[](std::size_t bytes) { return operator new(bytes); }
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
