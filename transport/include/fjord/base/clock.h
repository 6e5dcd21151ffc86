// Monotonic time in nanoseconds. Any thread; hot path (a vDSO call, ~20 ns).
#pragma once

#include <cstdint>
#include <ctime>

namespace fjord {

inline uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// The same clock at the kernel tick's resolution (1-10 ms), read from the
// vDSO's page without touching the clock hardware: a few ns whatever the
// clocksource. For "about every millisecond" checks inside busy-poll loops,
// where monotonic_ns() would cost a system call and an emulated HPET read
// on a machine without a usable TSC (microseconds in the soft-RoCE guest).
inline uint64_t coarse_monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// A CPU hint inside spin loops (PAUSE on x86): lets a sibling hyperthread run
// and slows the loop enough not to flood the memory system.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace fjord
