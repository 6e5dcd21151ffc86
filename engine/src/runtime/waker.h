// Waker: how a sleeping thread is woken without ever losing a wake-up.
//
// Sleeper:  begin_sleep()  -- announce, then re-check every input
//           sleep(...)     -- only if the re-check found nothing
//           end_sleep()
// Producer: publish work (release store), then wake().
//
// Why nothing is lost (Dekker): the sleeper stores kSleeping and then reads
// the inputs; the producer stores the input and then reads the state. Each
// side has a seq_cst fence between its store and its load (S1 and W1 below),
// so at least one of them sees the other's store: either the sleeper finds
// the work, or the producer finds kSleeping and wakes it.
//
// Threads that sleep in epoll (they also wait on transporter fds) are woken
// through an eventfd; the others through a futex on the state word.
#pragma once

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>

#include "fjord/base/fd.h"
#include "fjord/base/status.h"

namespace fjord::engine {

class Waker {
 public:
  static constexpr uint32_t kAwake = 0;
  static constexpr uint32_t kSleeping = 1;

  Status init(bool use_eventfd) {
    if (use_eventfd) {
      event_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      if (!event_fd_.valid()) return io_error("eventfd", errno);
    }
    return Status::ok();
  }
  int event_fd() const { return event_fd_.get(); }

  // ---- sleeper ----
  void begin_sleep() {
    state_.store(kSleeping, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // S1: pairs with W1
  }
  void end_sleep() {
    state_.store(kAwake, std::memory_order_relaxed);
    if (event_fd_.valid()) {
      uint64_t drained;
      [[maybe_unused]] ssize_t n = ::read(event_fd_.get(), &drained, sizeof drained);
    }
  }
  // Futex sleep (threads without an eventfd), at most timeout_ns.
  void futex_sleep(uint64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ULL), static_cast<long>(timeout_ns % 1'000'000'000ULL)};
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleeping, &ts, nullptr, 0);
  }
  bool sleeping() const { return state_.load(std::memory_order_relaxed) == kSleeping; }

  // ---- producers (any thread) ----
  void wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // W1: pairs with S1
    if (state_.load(std::memory_order_relaxed) != kSleeping) return;
    if (state_.exchange(kAwake, std::memory_order_relaxed) != kSleeping) return;  // someone else woke it
    if (event_fd_.valid()) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(event_fd_.get(), &one, sizeof one);
    } else {
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");
  alignas(64) std::atomic<uint32_t> state_{kAwake};
  UniqueFd event_fd_;
};

}  // namespace fjord::engine
