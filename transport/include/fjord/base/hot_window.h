// HotWindow: when the producer of a ring goes back to the ring's start
// before the end of a lap. Shared by every ring of Fjord (job buffers, the
// SHM ring, the TCP rings).
//
// A ring walked end to end keeps every line of it in play: each line the
// producer comes back to a lap later has left both cores' caches. So while
// the consumer keeps up, the producer keeps to the first window_bytes of
// the ring: once it is that far into a lap with at most a quarter of the
// window unread (tuning::kHotWindowSlackDivisor), it goes back to the start
// (how is the ring's own business: a gap entry over the rest of the lap, or
// moving private counters on to the next lap). A consumer that falls behind
// keeps the producer walking the whole ring, all of its capacity in use.
// A ring under tuning::kHotWindowMinLaps windows never goes back early.
//
// Positions are free-running byte counters of the ring (position modulo
// capacity is the place in the lap); the caller supplies both, as each ring
// tracks the lap offset its own way (a mask, a running offset).
//
// Threads: the producer's only. Hot path: due() is one compare per publish;
// the rest runs at most once per quarter window of bytes.
#pragma once

#include <cstdint>

#include "fjord/base/assert.h"
#include "fjord/base/tuning.h"

namespace fjord {

class HotWindow {
 public:
  // Never goes back early.
  HotWindow() = default;
  HotWindow(uint64_t capacity_bytes, uint64_t window_bytes) noexcept
      : window_(capacity_bytes >= tuning::kHotWindowMinLaps * window_bytes ? window_bytes : 0),
        decide_at_(window_ != 0 ? window_ : UINT64_MAX) {}

  // The window in bytes; 0 when the ring never goes back early.
  uint64_t bytes() const noexcept { return window_; }
  // The most bytes unread with which the producer still goes back.
  uint64_t max_unread_bytes() const noexcept { return window_ / tuning::kHotWindowSlackDivisor; }

  // Whether the producer at `position` must decide (go_back_now): at most
  // once per quarter window of bytes.
  bool due(uint64_t position) const noexcept { return position >= decide_at_; }

  // At a due `position`, `lap_offset` bytes into its lap: true if the
  // producer goes back to the ring's start now (it then calls went_back()).
  // unread() returns the bytes the consumer has not released (it may read
  // the consumer's index: it is called only past the window). On false the
  // next due position is set: the window's end in this lap, or a quarter
  // window on when the consumer is behind.
  template <typename Unread>
  bool go_back_now(uint64_t position, uint64_t lap_offset, Unread&& unread) noexcept {
    FJORD_ASSERT(window_ != 0);
    FJORD_ASSERT(lap_offset <= position);
    if (lap_offset < window_) {  // a lap began the usual way
      decide_at_ = position - lap_offset + window_;
      return false;
    }
    if (unread() > max_unread_bytes()) {
      decide_at_ = position + max_unread_bytes();
      return false;
    }
    return true;
  }
  // The producer went back: its position is now `lap_start`, a lap's start.
  void went_back(uint64_t lap_start) noexcept { decide_at_ = lap_start + window_; }

  // The position of the next lap's start after `position`.
  static constexpr uint64_t lap_end(uint64_t position, uint64_t lap_offset, uint64_t capacity_bytes) noexcept {
    return position - lap_offset + capacity_bytes;
  }

 private:
  uint64_t window_ = 0;
  uint64_t decide_at_ = UINT64_MAX;  // due() from here on
};

}  // namespace fjord
