// The CPU's cycle counter as a clock for short intervals, as perftest stamps
// its own: a few ns to read, where clock_gettime costs tens of ns with a TSC
// clocksource and microseconds with an emulated HPET (the soft-RoCE guest).
// CLOCK_MONOTONIC where there is no counter. The rate is calibrated against
// CLOCK_MONOTONIC once, by the constructor. Counters of different CPUs are
// taken to be in step (QEMU and KVM derive them from one clock): callers
// drop an interval whose end is below its start. For benchmarks and
// measuring tools; any thread.
#pragma once

#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "fjord/base/clock.h"

namespace fjord {

class CycleClock {
 public:
  // Spins for `calibrate_ns` to measure the counter's rate.
  explicit CycleClock(uint64_t calibrate_ns = 200'000'000) {
#if defined(__x86_64__)
    const uint64_t t0 = monotonic_ns();
    const uint64_t c0 = now();
    while (monotonic_ns() - t0 < calibrate_ns) {
    }
    const uint64_t c1 = now();
    const uint64_t t1 = monotonic_ns();
    ns_per_tick_ = static_cast<double>(t1 - t0) / static_cast<double>(c1 - c0);
#else
    (void)calibrate_ns;
#endif
  }
  static uint64_t now() noexcept {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return monotonic_ns();
#endif
  }
  double ns_per_tick() const noexcept { return ns_per_tick_; }
  uint64_t to_ns(uint64_t ticks) const noexcept {
    return static_cast<uint64_t>(static_cast<double>(ticks) * ns_per_tick_);
  }
  static const char* name() noexcept {
#if defined(__x86_64__)
    return "cycle counter";
#else
    return "CLOCK_MONOTONIC";
#endif
  }

 private:
  double ns_per_tick_ = 1.0;
};

}  // namespace fjord
