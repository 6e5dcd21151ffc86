// TimerQueue: a thread's delayed signals (NDB's sendSignalWithDelay), a
// binary min-heap over a fixed pool of slots. Single-threaded; no allocation
// after init(). Hot path: next_deadline() is checked every loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

struct DelayedSignal {
  BlockRef from;
  BlockRef to;
  uint16_t signal_number = 0;
  uint8_t words = 0;
  uint32_t data[8] = {};
};

class TimerQueue {
 public:
  void init(uint32_t capacity) {
    slots_.resize(capacity);
    heap_.reserve(capacity);
    free_.reserve(capacity);
    for (uint32_t i = 0; i < capacity; ++i) free_.push_back(capacity - 1 - i);
  }

  bool full() const { return free_.empty(); }
  bool empty() const { return heap_.empty(); }
  uint64_t next_deadline() const { return heap_.empty() ? UINT64_MAX : heap_.front().deadline_ns; }

  void add(uint64_t deadline_ns, const DelayedSignal& signal) {
    FJORD_ASSERT_MSG(!free_.empty(), "timer queue full: raise RuntimeOptions::timer_capacity");
    const uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = signal;
    heap_.push_back({deadline_ns, sequence_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // Removes the earliest timer if it is due; returns false otherwise.
  bool pop_due(uint64_t now_ns, DelayedSignal& out) {
    if (heap_.empty() || heap_.front().deadline_ns > now_ns) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const uint32_t slot = heap_.back().slot;
    heap_.pop_back();
    out = slots_[slot];
    free_.push_back(slot);
    return true;
  }

 private:
  struct Entry {
    uint64_t deadline_ns;
    uint64_t sequence;  // equal deadlines fire in the order they were set
    uint32_t slot;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.deadline_ns != b.deadline_ns ? a.deadline_ns > b.deadline_ns : a.sequence > b.sequence;
    }
  };
  std::vector<DelayedSignal> slots_;
  std::vector<Entry> heap_;
  std::vector<uint32_t> free_;
  uint64_t sequence_ = 0;
};

}  // namespace fjord::engine
