// Readiness of accelerated sockets in poll, select and epoll.
#include "readiness.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <vector>

#include "fd_table.h"
#include "real_calls.h"
#include "settings.h"

namespace fjord::sockets {
namespace {

// ---- poll -----------------------------------------------------------------

short poll_events(Connection& c, short events) {
  const Readiness r = c.readiness();
  short out = 0;
  if (r.readable) out |= static_cast<short>(events & (POLLIN | POLLRDNORM));
  if (r.writable) out |= static_cast<short>(events & (POLLOUT | POLLWRNORM));
  if (r.peer_closed) out |= static_cast<short>(events & POLLRDHUP);
  if (r.error) out |= POLLERR | POLLHUP;
  return out;
}

// Fills revents of the accelerated entries from their rings; returns how
// many are ready.
int scan(pollfd* fds, nfds_t count) {
  int ready = 0;
  for (nfds_t i = 0; i < count; ++i) {
    Connection* c = accelerated(fds[i].fd);
    if (c == nullptr) continue;
    fds[i].revents = poll_events(*c, fds[i].events);
    if (fds[i].revents != 0) ++ready;
  }
  return ready;
}

void arm_all(const pollfd* fds, nfds_t count, bool arm) {
  for (nfds_t i = 0; i < count; ++i) {
    Connection* c = accelerated(fds[i].fd);
    if (c == nullptr) continue;
    const bool read = (fds[i].events & (POLLIN | POLLRDNORM | POLLRDHUP)) != 0;
    const bool write = (fds[i].events & (POLLOUT | POLLWRNORM)) != 0;
    if (arm) {
      c->arm_doorbells(read, write);
      c->drain_doorbells();
    } else {
      c->disarm_doorbells(read, write);
    }
  }
}

int remaining_ms(uint64_t deadline_ns) {
  if (deadline_ns == UINT64_MAX) return -1;
  const uint64_t now = now_ns();
  if (now >= deadline_ns) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline_ns - now + 999'999) / 1'000'000, INT32_MAX));
}

// The kernel call over a copy of the set whose accelerated entries watch
// their kernel socket for input; merges the kernel's answer for the others.
int kernel_poll(pollfd* fds, nfds_t count, int timeout_ms, const sigset_t* mask) {
  std::vector<pollfd> copy(fds, fds + count);
  for (pollfd& p : copy)
    if (accelerated(p.fd) != nullptr) p.events = POLLIN;
  timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
  const int r = real().ppoll(copy.data(), count, timeout_ms < 0 ? nullptr : &t, mask);
  if (r < 0) return r;
  int ready = 0;
  for (nfds_t i = 0; i < count; ++i) {
    if (accelerated(fds[i].fd) != nullptr) continue;
    fds[i].revents = copy[i].revents;
    if (fds[i].revents != 0) ++ready;
  }
  return ready;
}

int poll_mixed(pollfd* fds, nfds_t count, uint64_t deadline_ns, const sigset_t* mask) {
  const uint64_t spin_until = now_ns() + settings().spin_ns;
  for (;;) {
    int ready = scan(fds, count);
    const bool spinning = ready == 0 && now_ns() < spin_until && deadline_ns != 0;
    if (ready == 0 && !spinning) {
      arm_all(fds, count, true);
      ready = scan(fds, count);
      if (ready > 0) arm_all(fds, count, false);
    }
    if (ready > 0 || spinning) {
      const int others = kernel_poll(fds, count, 0, mask);
      if (others < 0) return others;
      if (ready + others > 0) return ready + others;
      continue;
    }
    const int others = kernel_poll(fds, count, remaining_ms(deadline_ns), mask);
    arm_all(fds, count, false);
    if (others < 0) return others;
    ready = scan(fds, count) + others;
    if (ready > 0 || remaining_ms(deadline_ns) == 0) return ready;
  }
}

bool any_accelerated(const pollfd* fds, nfds_t count) {
  for (nfds_t i = 0; i < count; ++i)
    if (accelerated(fds[i].fd) != nullptr) return true;
  return false;
}

uint64_t deadline_after(int64_t timeout_ns) {
  return timeout_ns < 0 ? UINT64_MAX : now_ns() + static_cast<uint64_t>(timeout_ns);
}

// ---- select ---------------------------------------------------------------

bool select_has_accelerated(int n, const fd_set* r, const fd_set* w) {
  for (int fd = 0; fd < n && fd < FD_SETSIZE; ++fd)
    if (((r != nullptr && FD_ISSET(fd, r)) || (w != nullptr && FD_ISSET(fd, w))) && accelerated(fd) != nullptr)
      return true;
  return false;
}

int select_by_poll(int n, fd_set* r, fd_set* w, fd_set* e, uint64_t deadline_ns, const sigset_t* mask) {
  std::vector<pollfd> fds;
  for (int fd = 0; fd < n && fd < FD_SETSIZE; ++fd) {
    short events = 0;
    if (r != nullptr && FD_ISSET(fd, r)) events |= POLLIN;
    if (w != nullptr && FD_ISSET(fd, w)) events |= POLLOUT;
    if (e != nullptr && FD_ISSET(fd, e)) events |= POLLPRI;
    if (events != 0) fds.push_back({fd, events, 0});
  }
  const int ready = poll_mixed(fds.data(), fds.size(), deadline_ns, mask);
  if (ready < 0) return ready;
  for (fd_set* set : {r, w, e})
    if (set != nullptr) FD_ZERO(set);
  int bits = 0;
  for (const pollfd& p : fds) {
    if (r != nullptr && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(p.fd, r), ++bits;
    if (w != nullptr && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) FD_SET(p.fd, w), ++bits;
    if (e != nullptr && (p.events & POLLPRI) && (p.revents & POLLPRI)) FD_SET(p.fd, e), ++bits;
  }
  return bits;
}

// ---- epoll ----------------------------------------------------------------

constexpr uint64_t kTag = 0xF50C'0000'0000'0000ULL;  // data word of the library's kernel registrations
constexpr uint64_t kTagMask = 0xFFFF'0000'0000'0000ULL;

struct EpollEntry {
  int fd;
  uint64_t connection_id;
  uint32_t events;
  epoll_data_t data;
  bool fired = false;  // EPOLLONESHOT reported, until EPOLL_CTL_MOD
};

struct EpollSet {
  std::mutex mutex;
  std::vector<EpollEntry> entries;
};

std::atomic<EpollSet*> g_sets[kMaxFds];

EpollSet* set_of(int epfd, bool create) {
  if (epfd < 0 || epfd >= kMaxFds) return nullptr;
  EpollSet* s = g_sets[epfd].load(std::memory_order_acquire);
  if (s != nullptr || !create) return s;
  auto* fresh = new EpollSet();
  if (g_sets[epfd].compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;
  return s;
}

uint32_t epoll_ready(Connection& c, EpollEntry& e) {
  const Readiness r = c.readiness();
  uint32_t out = 0;
  if (r.readable && (e.events & EPOLLIN)) {
    const bool edge = (e.events & EPOLLET) == 0 || c.read_edge.exchange(false, std::memory_order_relaxed);
    if (edge) out |= EPOLLIN;
  }
  if (r.writable && (e.events & EPOLLOUT)) {
    const bool edge = (e.events & EPOLLET) == 0 || c.write_edge.exchange(false, std::memory_order_relaxed);
    if (edge) out |= EPOLLOUT;
  }
  if (r.peer_closed && (e.events & EPOLLRDHUP) && (out & EPOLLIN)) out |= EPOLLRDHUP;
  if (r.error) out |= EPOLLERR | EPOLLHUP;
  return out;
}

// Accelerated entries that are ready, into events[0, max). Drops entries
// whose socket was closed (the kernel dropped its registration already).
int collect(EpollSet& set, epoll_event* events, int max) {
  std::lock_guard lock(set.mutex);
  int n = 0;
  auto& entries = set.entries;
  for (std::size_t i = 0; i < entries.size() && n < max;) {
    EpollEntry& e = entries[i];
    Connection* c = accelerated(e.fd);
    if (c == nullptr || c->id() != e.connection_id) {
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
    if (e.fired) continue;
    const uint32_t ready = epoll_ready(*c, e);
    if (ready == 0) continue;
    events[n].events = ready;
    events[n].data = e.data;
    ++n;
    if (e.events & EPOLLONESHOT) e.fired = true;
  }
  return n;
}

void arm_set(EpollSet& set, bool arm) {
  std::lock_guard lock(set.mutex);
  for (const EpollEntry& e : set.entries) {
    Connection* c = accelerated(e.fd);
    if (c == nullptr || c->id() != e.connection_id || e.fired) continue;
    const bool read = (e.events & (EPOLLIN | EPOLLRDHUP)) != 0;
    const bool write = (e.events & EPOLLOUT) != 0;
    if (arm) {
      c->arm_doorbells(read, write);
      c->drain_doorbells();
    } else {
      c->disarm_doorbells(read, write);
    }
  }
}

// Removes the library's own (tagged) events from what the kernel returned,
// draining the doorbells they announce. Returns the events left.
int drop_tagged(epoll_event* events, int n) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if ((events[i].data.u64 & kTagMask) == kTag) {
      if (Connection* c = accelerated(static_cast<int>(events[i].data.u64 & 0xFFFF'FFFF))) c->drain_doorbells();
      continue;
    }
    events[kept++] = events[i];
  }
  return kept;
}

int kernel_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) {
  const int n = real().epoll_pwait(epfd, events, max, timeout_ms, mask);
  return n < 0 ? n : drop_tagged(events, n);
}

int epoll_mixed(int epfd, EpollSet& set, epoll_event* events, int max, uint64_t deadline_ns, const sigset_t* mask) {
  const uint64_t spin_until = now_ns() + settings().spin_ns;
  for (;;) {
    int n = collect(set, events, max);
    const bool spinning = n == 0 && now_ns() < spin_until && deadline_ns != 0;
    if (n == 0 && !spinning) {
      arm_set(set, true);
      n = collect(set, events, max);
      if (n > 0) arm_set(set, false);
    }
    if (n > 0 || spinning) {
      if (n == max) return n;
      const int others = kernel_wait(epfd, events + n, max - n, 0, mask);
      if (others < 0 && n == 0) return others;
      if (n + std::max(others, 0) > 0) return n + std::max(others, 0);
      continue;
    }
    const int others = kernel_wait(epfd, events, max, remaining_ms(deadline_ns), mask);
    arm_set(set, false);
    if (others < 0) return others;
    n = others + collect(set, events + others, max - others);
    if (n > 0 || remaining_ms(deadline_ns) == 0) return n;
  }
}

int control_accelerated(int epfd, int op, int fd, epoll_event* event, Connection& c) {
  if (op != EPOLL_CTL_DEL && event == nullptr) {
    errno = EFAULT;  // as the kernel says for a missing event
    return -1;
  }
  if (epfd < 0 || epfd >= kMaxFds) {
    errno = ENOMEM;  // an epoll descriptor past the table cannot watch an accelerated socket
    return -1;
  }
  epoll_event kernel{EPOLLIN | EPOLLRDHUP | EPOLLET, {}};
  kernel.data.u64 = kTag | static_cast<uint32_t>(fd);
  // The kernel first: a stale or wrong epfd fails here and leaves no set behind.
  const int r = real().epoll_ctl(epfd, op, fd, op == EPOLL_CTL_DEL ? nullptr : &kernel);
  if (r != 0) return r;
  EpollSet* set = set_of(epfd, true);
  std::lock_guard lock(set->mutex);
  auto& entries = set->entries;
  entries.erase(std::remove_if(entries.begin(), entries.end(), [fd](const EpollEntry& e) { return e.fd == fd; }),
                entries.end());
  if (op != EPOLL_CTL_DEL) {
    entries.push_back({fd, c.id(), event->events, event->data, false});
    c.read_edge.store(true, std::memory_order_relaxed);
    c.write_edge.store(true, std::memory_order_relaxed);
  }
  return 0;
}

// A socket whose non-blocking connect is under way may be accelerated
// later: remember where it is registered.
void note_connecting_registration(int epfd, int op, int fd, const epoll_event* event) {
  FdEntry* e = fd_entry(fd);
  if (e == nullptr || e->pending.load(std::memory_order_relaxed) != Pending::kConnecting) return;
  if (op == EPOLL_CTL_ADD) {
    if (++e->connecting_epoll_sets > 1) return;
    e->connecting_epoll_fd = epfd;
  }
  if (e->connecting_epoll_fd != epfd) return;
  if (op == EPOLL_CTL_DEL) {
    e->connecting_epoll_fd = -1;
    --e->connecting_epoll_sets;
    return;
  }
  e->connecting_events = event->events;
  e->connecting_data = event->data.u64;
}

}  // namespace

void adopt_epoll_registration(int epfd, int fd, uint32_t events, uint64_t data) {
  Connection* c = accelerated(fd);
  if (c == nullptr) return;
  epoll_event event{events, {}};
  event.data.u64 = data;
  (void)control_accelerated(epfd, EPOLL_CTL_MOD, fd, &event, *c);
}

void forget_epoll_set(int fd) {
  if (fd < 0 || fd >= kMaxFds || g_sets[fd].load(std::memory_order_relaxed) == nullptr) return;
  delete g_sets[fd].exchange(nullptr, std::memory_order_acq_rel);
}

}  // namespace fjord::sockets

using namespace fjord::sockets;  // NOLINT: the exported C names below

extern "C" {

int poll(pollfd* fds, nfds_t count, int timeout_ms) {
  if (!any_accelerated(fds, count)) return real().poll(fds, count, timeout_ms);
  return poll_mixed(fds, count, deadline_after(timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1'000'000), nullptr);
}

int __poll_chk(pollfd* fds, nfds_t count, int timeout_ms, size_t fds_bytes) {
  if (fds_bytes / sizeof(pollfd) < count) __builtin_trap();
  return poll(fds, count, timeout_ms);
}

int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  if (!any_accelerated(fds, count)) return real().ppoll(fds, count, timeout, mask);
  const int64_t ns = timeout == nullptr ? -1 : timeout->tv_sec * 1'000'000'000LL + timeout->tv_nsec;
  return poll_mixed(fds, count, deadline_after(ns), mask);
}

int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  if (!select_has_accelerated(n, r, w)) return real().select(n, r, w, e, timeout);
  const int64_t ns = timeout == nullptr ? -1 : timeout->tv_sec * 1'000'000'000LL + timeout->tv_usec * 1000LL;
  return select_by_poll(n, r, w, e, deadline_after(ns), nullptr);
}

int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* timeout, const sigset_t* mask) {
  if (!select_has_accelerated(n, r, w)) return real().pselect(n, r, w, e, timeout, mask);
  const int64_t ns = timeout == nullptr ? -1 : timeout->tv_sec * 1'000'000'000LL + timeout->tv_nsec;
  return select_by_poll(n, r, w, e, deadline_after(ns), mask);
}

int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  Connection* c = accelerated(fd);
  if (c != nullptr) return control_accelerated(epfd, op, fd, event, *c);
  const int r = real().epoll_ctl(epfd, op, fd, event);
  if (r == 0) note_connecting_registration(epfd, op, fd, event);
  return r;
}

int epoll_pwait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) {
  EpollSet* set = set_of(epfd, false);
  if (set == nullptr || max <= 0) return real().epoll_pwait(epfd, events, max, timeout_ms, mask);
  return epoll_mixed(epfd, *set, events, max, deadline_after(timeout_ms < 0 ? -1 : int64_t{timeout_ms} * 1'000'000),
                     mask);
}

int epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms) {
  return epoll_pwait(epfd, events, max, timeout_ms, nullptr);
}

}  // extern "C"
