#include "fjord/transport/pending_handshakes.h"

#include <sys/epoll.h>
#include <sys/socket.h>

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
  return true;
}

std::optional<PendingHandshakes::Entry> PendingHandshakes::take_ready(DeadlineNs now) {
  // Edges already seen are taken; every connection is looked at below.
  epoll_event events[16];
  while (::epoll_wait(epoll_fd_, events, 16, 0) == 16) {
  }
  expire(now);
  std::optional<Entry> ready;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (!handshake_message_waiting(pending_[i].conn.get(), kHandshakeRequestMagic)) continue;
    if (!ready) {
      ready = std::move(pending_[i]);
      remove(i--);  // the last entry moved into slot i: look at it next
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
    remove(i);
  }
}

DeadlineNs PendingHandshakes::next_deadline() const {
  DeadlineNs earliest = UINT64_MAX;
  for (const Entry& e : pending_) earliest = std::min(earliest, e.deadline);
  return earliest;
}

void PendingHandshakes::remove(std::size_t i) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pending_[i].conn.get(), nullptr);
  pending_[i] = std::move(pending_.back());
  pending_.pop_back();
}

}  // namespace fjord::transport
