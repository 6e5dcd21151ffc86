// Statistics counters with one writing thread, read by others (a block's or
// a thread's counters, a link's byte counts).
// Hot path: bump().
#pragma once

#include <atomic>
#include <cstdint>

namespace fjord {

// Adds `delta` (negative: a gauge going down) to a counter that only the
// calling thread writes. With one writer a relaxed load and store is an
// exact increment, and it compiles to what `++` on a plain integer does (no
// lock prefix, no fence); readers on other threads see a recent value. That
// is enough for a statistic: each counter is read on its own, and no other
// memory is published through it.
inline void bump(std::atomic<uint64_t>& counter, int64_t delta = 1) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + static_cast<uint64_t>(delta), std::memory_order_relaxed);
}

}  // namespace fjord
