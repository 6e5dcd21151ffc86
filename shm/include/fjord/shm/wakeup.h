// Spin-then-sleep wake-up for a consumer of shared memory, without lost
// wake-ups, across processes.
//
// What it is for: a consumer that found its ring empty may sleep, either on
// a futex (one link: Transporter::wait_for_receive) or on an eventfd that
// epoll watches together with other links (Transporter::wait_fd). The
// producer must wake it, but must not pay a system call per message while
// the consumer is awake and polling. The protocol is Dekker's:
//
//   consumer                               producer
//   S1  state = kFutex/kEventFd (seq_cst)  P1  publish data (release store)
//   FC  seq_cst fence                      FP  seq_cst fence
//   L1  re-check the ring (acquire load)   L2  load state; if asleep: take it, wake
//       if still empty: sleep
//
// The two fences are ordered one way or the other in the single total order
// of seq_cst operations. If FP comes first, P1 (before FP) is visible to L1
// (after FC): the consumer sees the data and does not sleep. If FC comes
// first, S1 (before FC) is visible to L2 (after FP): the producer sees the
// sleeper and wakes it. One of the two always sees the other, so a wake-up
// cannot be lost. The word is 32 bits because the futex is.
//
// Only the consumer stores kFutex/kEventFd; a waker takes the sleeper with
// an exchange to kAwake, so exactly one waker signals for each sleep even
// when a flush and a close race. The word lives on its own cache line in
// shared memory: the producer reads it on every flush, which costs nothing
// while the consumer is awake (the line stays shared, nobody writes it).
//
// Threads: the consumer's thread calls the consumer half, the producer's
// thread (or any thread that takes the link down) the producer half. Hot
// path: announce/cancel and take_sleeper are a few instructions; the futex
// calls are system calls made only when someone sleeps.
#pragma once

#include <atomic>
#include <cstdint>

#include "fjord/base/cache.h"

namespace fjord::shm {

enum class SleepState : uint32_t {
  kAwake = 0,    // polling or busy: no wake-up needed
  kFutex = 1,    // about to sleep, or sleeping, in futex_sleep()
  kEventFd = 2,  // about to sleep, or sleeping, on the consumer's eventfd (epoll)
};

struct WakeupWord {
  alignas(kCacheLineBytes) std::atomic<uint32_t> state{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
              "the futex word must be a plain 32-bit integer");

// ---- consumer half --------------------------------------------------------

// S1 + FC: announces the intention to sleep. The caller must then re-check
// the ring (L1: the ring's acquire refresh) and sleep only if it is empty.
inline void announce_sleep(WakeupWord& word, SleepState how) noexcept {
  // S1: seq_cst store, as the protocol is usually stated. On its own it would
  // not order the caller's later acquire load (L1) after it; FC does.
  word.state.store(static_cast<uint32_t>(how), std::memory_order_seq_cst);
  // FC: seq_cst fence; pairs with FP in take_sleeper().
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Back to polling. Returns true if a waker took the sleeper meanwhile (it has
// signalled, or is about to signal, the futex or the eventfd).
inline bool cancel_sleep(WakeupWord& word) noexcept {
  // Relaxed is enough: the exchange is a read-modify-write, so it either sees
  // the waker's kAwake or the waker's later exchange sees ours; no data is
  // published through this word.
  return word.state.exchange(static_cast<uint32_t>(SleepState::kAwake), std::memory_order_relaxed) ==
         static_cast<uint32_t>(SleepState::kAwake);
}

// Sleeps while the word is still kFutex, at most timeout_ns (0 = forever).
// Returns on a wake-up, a timeout, a signal, or at once if a waker already
// took the sleeper. Works across processes (no FUTEX_PRIVATE_FLAG).
void futex_sleep(WakeupWord& word, uint64_t timeout_ns) noexcept;

// ---- producer half --------------------------------------------------------

// After publishing: FP, then L2. Returns the state the sleeper was in when
// this call took it (kAwake: nobody sleeps, nothing to do). The caller then
// calls futex_wake() for kFutex or writes the consumer's eventfd for kEventFd.
inline SleepState take_sleeper(WakeupWord& word) noexcept {
  // FP: seq_cst fence; orders the caller's publish (P1) before L2. Pairs with
  // FC in announce_sleep().
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // L2: relaxed is enough after FP (fence-to-fence ordering, see the header);
  // the common case (awake) ends here.
  if (word.state.load(std::memory_order_relaxed) == static_cast<uint32_t>(SleepState::kAwake))
    return SleepState::kAwake;
  // Exactly one waker wins the sleeper (see the header).
  return static_cast<SleepState>(
      word.state.exchange(static_cast<uint32_t>(SleepState::kAwake), std::memory_order_relaxed));
}

// Wakes every thread sleeping in futex_sleep() on this word.
void futex_wake(WakeupWord& word) noexcept;

}  // namespace fjord::shm
