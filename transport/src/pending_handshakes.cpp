#include "fjord/transport/pending_handshakes.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/log.h"
#include "fjord/transport/handshake.h"

namespace fjord::transport {

bool handshake_message_waiting(int fd, uint32_t magic) {
  std::byte bytes[kMaxHandshakeBytes];
  const ssize_t n = ::recv(fd, bytes, sizeof bytes, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // a failed peer: say so now
  if (n == 0) return true;                                                      // the peer left
  const auto got = static_cast<std::size_t>(n);
  if (got < kHandshakePrefixBytes) return false;
  Result<std::size_t> total = handshake_message_bytes(std::span(bytes, got), magic);
  return !total || got >= *total;  // not a handshake: the handshake names what is wrong
}

PendingHandshakes::PendingHandshakes(int epoll_fd, std::string what)
    : epoll_fd_(epoll_fd),
      what_(std::move(what)),
      timer_(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {
  // Level-triggered: an expired timer keeps the set readable until
  // take_ready() reads it. Without it (no timerfd here), expired
  // connections are still closed at the next accept().
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (!timer_.valid() || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_.get(), &ev) != 0) {
    FJORD_LOG_WARN("%s: no set-up timer (%s): silent peers are closed only when another connection comes",
                   what_.c_str(), std::strerror(errno));
    timer_.reset();
  }
}

void PendingHandshakes::arm_timer() {
  if (!timer_.valid()) return;
  const DeadlineNs at = next_deadline();
  itimerspec spec{};  // all zero: off
  if (at != UINT64_MAX) {
    spec.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000ULL);
    spec.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000ULL);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  }
  (void)::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
}

bool PendingHandshakes::add(Entry entry, DeadlineNs now) {
  if (pending_.size() >= kMaxPending) expire(now);
  if (pending_.size() >= kMaxPending) {
    FJORD_LOG_WARN("%s: refused a connection from %s: %zu connections are already waiting for their handshake",
                   what_.c_str(), entry.peer.c_str(), pending_.size());
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = 0;  // readiness only: take_ready() looks at every waiting connection
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, entry.conn.get(), &ev) != 0) {
    FJORD_LOG_WARN("%s: refused a connection from %s: epoll_ctl: %s", what_.c_str(), entry.peer.c_str(),
                   std::strerror(errno));
    return false;
  }
  pending_.push_back(std::move(entry));
  arm_timer();
  return true;
}

std::optional<PendingHandshakes::Entry> PendingHandshakes::take_ready(DeadlineNs now) {
  // Edges already seen are taken; every connection is looked at below.
  epoll_event events[16];
  while (::epoll_wait(epoll_fd_, events, 16, 0) == 16) {
  }
  if (timer_.valid()) {
    uint64_t expirations;
    (void)::read(timer_.get(), &expirations, sizeof expirations);  // nothing to read when not expired
  }
  expire(now);
  std::optional<Entry> ready;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (!handshake_message_waiting(pending_[i].conn.get(), kHandshakeRequestMagic)) continue;
    if (!ready) {
      ready = take(i--);  // the last entry moved into slot i: look at it next
      continue;
    }
    // The caller takes one a call, and polls the set before the next: the
    // edge of this one was taken above, so re-arm it (EPOLL_CTL_MOD queues
    // an edge-triggered fd that is ready now), or the set would read idle
    // while it waits and its peer would time out.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, pending_[i].conn.get(), &ev);
  }
  arm_timer();
  return ready;
}

void PendingHandshakes::expire(DeadlineNs now) {
  for (std::size_t i = 0; i < pending_.size();) {
    if (now < pending_[i].deadline || handshake_message_waiting(pending_[i].conn.get(), kHandshakeRequestMagic)) {
      ++i;
      continue;
    }
    FJORD_LOG_WARN("%s: closed a connection from %s that sent no whole handshake in %llu s", what_.c_str(),
                   pending_[i].peer.c_str(), static_cast<unsigned long long>(kSetupBudgetNs / 1'000'000'000ULL));
    (void)take(i);  // closed here
  }
}

DeadlineNs PendingHandshakes::next_deadline() const {
  DeadlineNs earliest = UINT64_MAX;
  for (const Entry& e : pending_) earliest = std::min(earliest, e.deadline);
  return earliest;
}

// Out of the epoll set first, while the entry still holds its descriptor: a
// connection set up and handed to a transporter stays open, and left in the
// set, its every edge (each burst of the link's data, its close) would make
// the listener's fd readable, waking the poller for nothing.
PendingHandshakes::Entry PendingHandshakes::take(std::size_t i) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pending_[i].conn.get(), nullptr);
  Entry out = std::move(pending_[i]);
  if (i + 1 != pending_.size()) pending_[i] = std::move(pending_.back());
  pending_.pop_back();
  return out;
}

}  // namespace fjord::transport
