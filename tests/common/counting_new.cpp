#include "counting_new.h"

#include <execinfo.h>

#include <cstdlib>
#include <new>

namespace fjord::test {

std::atomic<bool> g_count_allocations{false};
std::atomic<uint64_t> g_allocations{0};

namespace {
// The first counted allocation's size and stack, written by the one thread
// whose fetch_add took g_allocations from 0 to 1.
constexpr int kFrames = 24;
void* g_first_stack[kFrames];
std::atomic<int> g_first_frames{0};
std::size_t g_first_bytes = 0;

// backtrace() loads the unwinder on its first call, which allocates: do
// that before any test counts.
const int g_warm_up = [] {
  void* frames[2];
  return backtrace(frames, 2);
}();
}  // namespace

std::string first_allocation() {
  const int n = g_first_frames.load(std::memory_order_acquire);
  if (n == 0) return "none recorded";
  std::string out = "first allocation counted: " + std::to_string(g_first_bytes) + " bytes at";
  char** symbols = backtrace_symbols(g_first_stack, n);
  for (int i = 0; i < n; ++i) out += std::string("\n  ") + (symbols != nullptr ? symbols[i] : "?");
  std::free(symbols);
  return out;
}

}  // namespace fjord::test

// noinline: GCC otherwise sees malloc/free through the inlined operators and
// warns (wrongly) that new and delete do not match.
__attribute__((noinline)) void* operator new(std::size_t bytes) {
  if (fjord::test::g_count_allocations.load(std::memory_order_relaxed) &&
      fjord::test::g_allocations.fetch_add(1, std::memory_order_relaxed) == 0) {
    fjord::test::g_first_bytes = bytes;
    fjord::test::g_first_frames.store(backtrace(fjord::test::g_first_stack, fjord::test::kFrames),
                                      std::memory_order_release);
  }
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new[](std::size_t bytes) { return operator new(bytes); }
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
