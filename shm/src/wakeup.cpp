// The futex half of fjord/shm/wakeup.h. System calls only when sleeping or
// waking a sleeper.
#include "fjord/shm/wakeup.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace fjord::shm {
namespace {

// Shared (not FUTEX_PRIVATE_FLAG): the word lives in memory mapped by two
// processes, and the kernel must key the futex by the page, not the mm.
long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) noexcept {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, value, timeout, nullptr, 0);
}

}  // namespace

void futex_sleep(WakeupWord& word, uint64_t timeout_ns) noexcept {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000ULL);
  relative.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000ULL);
  // FUTEX_WAIT returns at once (EAGAIN) if the word is no longer kFutex,
  // i.e. a waker took the sleeper between the caller's re-check and here.
  // EINTR and ETIMEDOUT are ordinary returns: the caller re-checks.
  (void)futex(word.state, FUTEX_WAIT, static_cast<uint32_t>(SleepState::kFutex), timeout_ns == 0 ? nullptr : &relative);
}

void futex_wake(WakeupWord& word) noexcept { (void)futex(word.state, FUTEX_WAKE, INT32_MAX, nullptr); }

}  // namespace fjord::shm
