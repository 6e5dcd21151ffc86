// The state sessions of one shared ClusterConnection share (SharedLink), and
// each session's mailbox of answers handed to it (Mailbox). Any thread of
// the program; the send lock is taken per frame sent (a key request is
// flushed in the same hold), a mailbox's lock per run of answers handed to
// it; a Connection's session has none of this.
//
// Waking (docs/api.md, "Threads"): a session that must wait announces it
// (Mailbox::begin_sleep: state kSleeping, then a seq_cst fence, S1), then
// looks again at everything that could end its wait: its mailbox, the poll
// right, the link. Whoever changes one of those (the poll owner appending to
// a mailbox, an owner giving the right up, close()) stores the change, then
// fences (W1, pairs with S1) and reads the state: at least one side sees the
// other's store, so either the sleeper finds the change, or the changer finds
// it kSleeping and wakes it through its futex.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "fjord/base/assert.h"

namespace fjord::api {
class Session;
}  // namespace fjord::api

namespace fjord::api::detail {

// What an answer carries to find its session: a transaction's handle is its
// slot in the low 16 bits, a generation in the next 8 and the session's
// index in bits 24..30 (a refused one's: Session::kRefusedHandleBit); a
// scan's, bit 31, the session's index and its slot; a schema request id, the
// session's index and a count below it.
constexpr uint32_t kMaxTransactionSlots = 1u << 16;
constexpr uint32_t kSessionShift = 24;
constexpr uint32_t kSessionMask = 0x7F;
constexpr uint32_t kRequestCountMask = (1u << kSessionShift) - 1;
inline uint32_t session_of(uint32_t api_conn_or_request) { return api_conn_or_request >> kSessionShift & kSessionMask; }

// Frames routed to one session by the poll owner, and the futex it sleeps on.
// One per session index, made with the SharedLink and kept until it goes:
// the poll owner reaches it without the session table's lock, and `open`
// (under `mutex`) says whether a session has it now.
struct Mailbox {
  static constexpr uint32_t kAwake = 0;
  static constexpr uint32_t kSleeping = 1;

  // Poll owner: appends a run of whole frames, then wakes the session if it
  // sleeps. A run for an index no session has (a late answer) is dropped.
  void deliver(std::span<const std::byte> run) {
    {
      const std::lock_guard lock(mutex);
      if (!open) return;
      frames.insert(frames.end(), run.begin(), run.end());
      // Release: pairs with the acquire in has_frames(); the bytes are
      // under the mutex anyway, the flag only spares an empty lock.
      filled.store(true, std::memory_order_release);
    }
    wake();
  }
  // A session takes this index (open) or leaves it (closed): what a session
  // before it left behind is dropped.
  void set_open(bool now_open) {
    const std::lock_guard lock(mutex);
    FJORD_ASSERT(open != now_open);
    open = now_open;
    frames.clear();
    filled.store(false, std::memory_order_relaxed);  // under the mutex that deliver() holds
  }
  bool has_frames() const { return filled.load(std::memory_order_acquire); }
  // The session: takes every frame delivered so far into `into` (emptied first).
  void take(std::vector<std::byte>& into) {
    into.clear();
    const std::lock_guard lock(mutex);
    into.swap(frames);
    filled.store(false, std::memory_order_relaxed);  // under the mutex that deliver() holds
  }

  void begin_sleep() {
    state.store(kSleeping, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // S1: pairs with W1
  }
  void end_sleep() { state.store(kAwake, std::memory_order_relaxed); }
  bool sleeping() const { return state.load(std::memory_order_relaxed) == kSleeping; }
  void sleep(uint64_t timeout_ns) {
    const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ULL),
                      static_cast<long>(timeout_ns % 1'000'000'000ULL)};
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAIT_PRIVATE, kSleeping, &ts, nullptr, 0);
  }
  // Any thread, after storing what the session waits for.
  void wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // W1: pairs with S1
    if (state.load(std::memory_order_relaxed) != kSleeping) return;
    if (state.exchange(kAwake, std::memory_order_relaxed) != kSleeping) return;  // another waker was first
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

  std::mutex mutex;
  bool open = false;              // under mutex
  std::vector<std::byte> frames;  // under mutex
  std::vector<std::byte> taken;   // the session's own: what it dispatches
  std::atomic<bool> filled{false};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");
  alignas(64) std::atomic<uint32_t> state{kAwake};
};

// One per shared ClusterConnection.
struct SharedLink {
  explicit SharedLink(uint32_t session_slots) : sessions(session_slots, nullptr) {
    mailboxes.reserve(session_slots);
    for (uint32_t i = 0; i < session_slots; ++i) mailboxes.push_back(std::make_unique<Mailbox>());
  }

  // The link's send side: held while one frame is packed, or a flush runs.
  std::mutex send_mutex;
  // Bytes committed that a flush left pending; the poll owner flushes them
  // on an empty poll. Written under send_mutex; relaxed: a stale false is
  // made good by the next flush, a stale true costs one flush.
  std::atomic<bool> unflushed{false};
  // The receive side: whoever takes it (compare-exchange, acquire) is the
  // poll owner until it stores false (release) and wakes one sleeper.
  std::atomic<bool> poll_owned{false};
  // Sessions by index (nullptr: free), under sessions_mutex.
  std::mutex sessions_mutex;
  std::vector<Session*> sessions;
  // Mailboxes by session index: made here, never moved or freed while the
  // link lives, so the poll owner hands over without sessions_mutex.
  std::vector<std::unique_ptr<Mailbox>> mailboxes;
  uint32_t next_woken = 0;  // where the hand-off of the poll right starts looking (sessions_mutex)
  // Sessions between begin_sleep and end_sleep. Incremented before S1 and
  // read after W1 (the same pairing as a mailbox's state), so a hand-off
  // that reads 0 has no sleeper to miss: the table is not locked then.
  std::atomic<uint32_t> sleepers{0};

  bool try_take_poll_right() {
    bool expected = false;
    return poll_owned.compare_exchange_strong(expected, true, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // Gives the poll right up, then wakes one sleeping session so that it
  // takes the right over (its answers may be on the link already).
  void release_poll_right() {
    FJORD_ASSERT(poll_owned.load(std::memory_order_relaxed));
    poll_owned.store(false, std::memory_order_release);
    wake_one_sleeper();
  }
  // A session ends its wait without the poll right: had it been woken to
  // take the right over, no other sleeper would be, so while the right is
  // free it passes the wake on. (It cannot tell that wake from one for
  // its mailbox; an extra wake costs a sleeper one look.)
  void pass_poll_right_on() {
    if (!poll_owned.load(std::memory_order_acquire)) wake_one_sleeper();
  }
  void wake_one_sleeper() {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // W1: pairs with S1
    if (sleepers.load(std::memory_order_relaxed) == 0) return;
    const std::lock_guard lock(sessions_mutex);
    const auto n = static_cast<uint32_t>(mailboxes.size());
    for (uint32_t k = 0; k < n; ++k) {
      Mailbox* m = mailboxes[(next_woken + k) % n].get();
      // W1 inside wake() orders the store above before reading the state.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (!m->sleeping()) continue;
      next_woken = (next_woken + k + 1) % n;
      m->wake();
      return;
    }
  }
  // close(): every session looks at the link again.
  void wake_all() {
    const std::lock_guard lock(sessions_mutex);
    for (const auto& m : mailboxes) m->wake();
  }
};

}  // namespace fjord::api::detail
