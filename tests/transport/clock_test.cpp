// The two clocks of fjord/base/clock.h: the coarse one is the same clock at
// the kernel tick's resolution, so it never runs ahead of the precise one,
// trails it by at most a tick, and moves forward.
#include "fjord/base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace fjord {
namespace {

TEST(ClockTest, CoarseClockTrailsThePreciseOneByAtMostATick) {
  for (int i = 0; i < 1000; ++i) {
    const uint64_t coarse = coarse_monotonic_ns();
    const uint64_t precise = monotonic_ns();
    ASSERT_LE(coarse, precise) << "the coarse clock is the last tick's reading of the same clock";
    // HZ is 100..1000: a tick is at most 10 ms; allow for a descheduled thread.
    ASSERT_LT(precise - coarse, 50'000'000u) << "round " << i;
  }
}

TEST(ClockTest, CoarseClockMovesForward) {
  const uint64_t before = coarse_monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // several ticks at any HZ
  const uint64_t after = coarse_monotonic_ns();
  EXPECT_GT(after, before);
  EXPECT_GE(after - before, 10'000'000u) << "30 ms slept, at most one 10 ms tick lost at each end";
}

}  // namespace
}  // namespace fjord
