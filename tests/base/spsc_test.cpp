// The shared SPSC core (fjord/base/spsc_queue.h, fjord/base/hot_window.h):
// the queue against a std::deque model under random operations and between
// two threads; the hot window against a simple model of a ring's producer.
// Randomised tests print their seed on failure.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <thread>

#include "fjord/base/hot_window.h"
#include "fjord/base/spsc_queue.h"

namespace fjord {
namespace {

struct Item {
  uint64_t id = 0;
  uint32_t check = 0;
};

TEST(SpscQueueTest, MatchesADequeModel) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const uint32_t capacity : {2u, 8u, 64u}) {
    SpscQueue<Item> queue(capacity);
    std::deque<Item> model;
    uint64_t next = 0;
    for (int step = 0; step < 20'000; ++step) {
      // Phases that favour pushing, then popping, so the queue runs full and empty.
      const bool push_phase = (step / 97) % 2 == 0;
      if (rng() % 4 < (push_phase ? 3u : 1u)) {
        const Item item{next, static_cast<uint32_t>(next * 7)};
        const bool pushed = queue.push(item);
        ASSERT_EQ(pushed, model.size() < capacity) << "step " << step;
        if (pushed) {
          model.push_back(item);
          ++next;
        }
      } else {
        Item item;
        const bool popped = queue.pop(item);
        ASSERT_EQ(popped, !model.empty()) << "step " << step;
        if (popped) {
          EXPECT_EQ(item.id, model.front().id);
          EXPECT_EQ(item.check, model.front().check);
          model.pop_front();
        }
      }
      ASSERT_EQ(queue.size_hint(), model.size()) << "step " << step;
    }
  }
}

TEST(SpscQueueTest, BetweenTwoThreadsLosesAndReordersNothing) {
  SpscQueue<Item> queue(16);
  constexpr uint64_t kCount = 300'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i)
      while (!queue.push(Item{i, static_cast<uint32_t>(i * 3)})) std::this_thread::yield();
  });
  uint64_t expected = 0;
  while (expected < kCount) {
    Item item;
    if (!queue.pop(item)) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(item.id, expected);
    ASSERT_EQ(item.check, static_cast<uint32_t>(expected * 3));
    ++expected;
  }
  producer.join();
  EXPECT_EQ(queue.size_hint(), 0u);
}

TEST(HotWindowTest, ARingUnderFourWindowsNeverGoesBackEarly) {
  const HotWindow small(3 * 4096, 4096);
  EXPECT_EQ(small.bytes(), 0u);
  EXPECT_FALSE(small.due(UINT64_MAX - 1));
  const HotWindow none;
  EXPECT_FALSE(none.due(UINT64_MAX - 1));
  const HotWindow large(4 * 4096, 4096);
  EXPECT_EQ(large.bytes(), 4096u);
  EXPECT_FALSE(large.due(4095));
  EXPECT_TRUE(large.due(4096));
}

// A producer writes entries of random sizes into a ring (positions are
// byte counters) while a consumer lags by a random amount; the producer
// asks the window at every due position. The model's rule: go back exactly
// when the producer is a window or more into its lap and at most a quarter
// window is unread.
TEST(HotWindowTest, GoesBackExactlyWhenTheModelSays) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr uint64_t kCapacity = 1 << 16;
  constexpr uint64_t kWindow = 1 << 12;
  HotWindow window(kCapacity, kWindow);
  uint64_t position = 0;
  uint64_t read = 0;
  int returns = 0;
  for (int step = 0; step < 200'000; ++step) {
    const uint64_t lap_offset = position % kCapacity;
    const bool model_goes_back = lap_offset >= kWindow && position - read <= kWindow / 4;
    if (window.due(position)) {
      bool asked = false;
      const bool back = window.go_back_now(position, lap_offset, [&] {
        asked = true;
        return position - read;
      });
      ASSERT_EQ(back, model_goes_back) << "step " << step;
      EXPECT_EQ(asked, lap_offset >= kWindow) << "unread() called only past the window";
      if (back) {
        const uint64_t lap_end = HotWindow::lap_end(position, lap_offset, kCapacity);
        ASSERT_EQ(lap_end % kCapacity, 0u);
        ASSERT_GT(lap_end, position);
        position = lap_end;
        window.went_back(position);
        ++returns;
        ASSERT_FALSE(window.due(position)) << "a new lap starts with a window to go";
      }
    }
    // The producer moves on by an entry; the consumer takes a random share.
    const uint64_t entry = 8 + rng() % 64 * 8;
    if (position + entry - read <= kCapacity) position += entry;
    const uint64_t unread = position - read;
    read += rng() % 3 == 0 ? unread : rng() % (unread + 1) / 2;
  }
  EXPECT_GT(returns, 10) << "the producer went back";
}

}  // namespace
}  // namespace fjord
