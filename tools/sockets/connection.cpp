// The SHM byte stream of an accelerated connection.
#include "connection.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "fjord/base/assert.h"
#include "real_calls.h"
#include "settings.h"

namespace fjord::sockets {
namespace {

std::atomic<uint64_t> g_next_id{1};

SocketShared* shared_of(const shm::Segment& segment) {
  return reinterpret_cast<SocketShared*>(reinterpret_cast<std::byte*>(&segment.header()) + kSocketSharedOffset);
}

// The futex sleep between two checks of the kernel socket (peer gone?).
constexpr uint64_t kSleepSliceNs = 10'000'000;
// A busy-polling non-blocking reader looks at the kernel socket this often.
constexpr uint64_t kLifeLineIntervalNs = 1'000'000;

}  // namespace

Connection::Connection(int tcp_fd, shm::Side side, shm::Segment segment)
    : tcp_fd_(tcp_fd),
      side_(side),
      peer_(side == shm::kClientSide ? shm::kServerSide : shm::kClientSide),
      id_(g_next_id.fetch_add(1, std::memory_order_relaxed)),
      segment_(std::move(segment)),
      shared_(shared_of(segment_)) {
  FJORD_ASSERT(tcp_fd >= 0);
  FJORD_ASSERT(side != peer_);
  const std::size_t bytes = segment_.ring_bytes();
  shm::SegmentHeader& h = segment_.header();
  producer_ = shm::SpscRingProducer(&h.rings[side_].indices, segment_.ring_data(side_), bytes);
  consumer_ = shm::SpscRingConsumer(&h.rings[peer_].indices, segment_.ring_data(peer_), bytes);
  shared_->processes[side_].store(1, std::memory_order_relaxed);
  // The kernel connection now carries only one-byte doorbells: Nagle's
  // algorithm would hold one back until the previous one is acknowledged
  // (a delayed ACK, tens of milliseconds).
  const int on = 1;
  (void)::setsockopt(tcp_fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

Connection::~Connection() = default;

Result<std::unique_ptr<Connection>> Connection::create(int tcp_fd, std::size_t ring_bytes, const uint64_t token[2]) {
  auto segment = shm::Segment::create(ring_bytes);
  if (!segment) return segment.status();
  auto* shared = new (shared_of(segment.value())) SocketShared();
  shared->token[0] = token[0];
  shared->token[1] = token[1];
  return std::unique_ptr<Connection>(new Connection(tcp_fd, shm::kClientSide, std::move(segment).value()));
}

Result<std::unique_ptr<Connection>> Connection::attach(int tcp_fd, UniqueFd memfd, std::size_t ring_bytes,
                                                       const uint64_t token[2]) {
  auto segment = shm::Segment::attach(std::move(memfd), ring_bytes);
  if (!segment) return segment.status();
  segment.value().close_memfd();
  const SocketShared* shared = shared_of(segment.value());
  if (shared->token[0] != token[0] || shared->token[1] != token[1])
    return Status(StatusCode::kProtocolError, "the segment does not carry the hello's token");
  return std::unique_ptr<Connection>(new Connection(tcp_fd, shm::kServerSide, std::move(segment).value()));
}

void Connection::wake(shm::WakeupWord& word) {
  switch (shm::take_sleeper(word)) {
    case shm::SleepState::kAwake: return;
    case shm::SleepState::kFutex: shm::futex_wake(word); return;
    case shm::SleepState::kEventFd: {
      const char doorbell = 0;
      (void)real().send(tcp_fd(), &doorbell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      return;
    }
  }
}

ssize_t Connection::receive_now(const iovec* iov, int iov_count, int flags) {
  FJORD_ASSERT(iov_count >= 0);
  FJORD_ASSERT(iov_count <= UIO_MAXIOV);
  const bool peek = (flags & MSG_PEEK) != 0;
  std::size_t total = 0;
  std::size_t peeked = 0;  // of the batch in hand, copied but not released (MSG_PEEK)
  for (int i = 0; i < iov_count; ++i) {
    auto* out = static_cast<std::byte*>(iov[i].iov_base);
    std::size_t want = iov[i].iov_len;
    while (want > 0) {
      if (!consumer_.refresh()) return -ECONNRESET;  // corrupt ring: the link is unusable
      auto span = consumer_.readable().subspan(peeked);
      if (span.empty()) break;
      const std::size_t n = std::min(want, span.size());
      std::memcpy(out, span.data(), n);
      out += n;
      want -= n;
      total += n;
      if (peek)
        peeked += n;
      else
        consumer_.release(n);
    }
    if (want > 0) break;
  }
  if (total > 0 && !peek) wake(shared_->writer_wakeup[peer_]);
  return static_cast<ssize_t>(total);
}

// Nothing to read: end of file once the peer closed (after its last bytes),
// a reset once its process is gone, else EAGAIN.
ssize_t Connection::empty_ring_result() {
  // Acquire pairs with the peer's release store of `closed`, made after its
  // last publish: the re-check below sees every byte it wrote.
  if (segment_.header().sides[peer_].closed.load(std::memory_order_acquire) != 0) return 0;
  if (peer_gone()) return -ECONNRESET;
  return -EAGAIN;
}

ssize_t Connection::receive(const iovec* iov, int iov_count, int flags, bool descriptor_nonblocking) {
  if (iov_count < 0 || iov_count > UIO_MAXIOV) return -EINVAL;
  std::lock_guard lock(read_mutex_);
  std::size_t want = 0;
  for (int i = 0; i < iov_count; ++i) want += iov[i].iov_len;
  if (want == 0) return 0;
  const bool wait_all = (flags & MSG_WAITALL) != 0 && (flags & MSG_PEEK) == 0;
  const bool dont_wait = descriptor_nonblocking || (flags & MSG_DONTWAIT) != 0;
  std::size_t total = 0;
  uint64_t spin_until = 0;
  uint64_t deadline = UINT64_MAX;
  iovec rest[UIO_MAXIOV];
  const iovec* current = iov;
  int current_count = iov_count;
  for (;;) {
    if (shut_read_) return static_cast<ssize_t>(total);
    ssize_t n = receive_now(current, current_count, flags);
    if (n == 0) {
      n = empty_ring_result();
      // End of file or a reset: bytes published before it are read first.
      if (n != -EAGAIN) {
        const ssize_t last = receive_now(current, current_count, flags);
        if (last != 0) n = last;
      }
    }
    if (n > 0) {
      total += static_cast<std::size_t>(n);
      if (!wait_all || total == want) {
        // Fewer bytes than asked: the ring was empty. Programs using edge
        // triggering often take that, not EAGAIN, as "drained".
        if (total < want) read_edge.store(true, std::memory_order_relaxed);
        return static_cast<ssize_t>(total);
      }
      // MSG_WAITALL: go on with what is left of the caller's buffers.
      current_count = 0;
      std::size_t skip = total;
      for (int i = 0; i < iov_count; ++i) {
        if (skip >= iov[i].iov_len) {
          skip -= iov[i].iov_len;
          continue;
        }
        rest[current_count++] = {static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip};
        skip = 0;
      }
      current = rest;
      continue;
    }
    if (n == 0) return static_cast<ssize_t>(total);
    if (n != -EAGAIN) return total > 0 ? static_cast<ssize_t>(total) : n;
    if (dont_wait) {
      look_at_kernel_socket();
      read_edge.store(true, std::memory_order_relaxed);
      return total > 0 ? static_cast<ssize_t>(total) : -EAGAIN;
    }
    if (spin_until == 0) {
      const uint64_t now = now_ns();
      spin_until = now + settings().spin_ns;
      const uint64_t timeout = receive_timeout_ns.load(std::memory_order_relaxed);
      deadline = timeout == 0 ? UINT64_MAX : now + timeout;
    } else if (now_ns() >= deadline) {
      return total > 0 ? static_cast<ssize_t>(total) : -EAGAIN;  // SO_RCVTIMEO
    }
    wait(segment_.header().rings[peer_].reader_wakeup, true, spin_until, deadline);
  }
}

ssize_t Connection::send_now(const iovec* iov, int iov_count) {
  FJORD_ASSERT(iov_count >= 0);
  FJORD_ASSERT(iov_count <= UIO_MAXIOV);
  std::size_t total = 0;
  for (int i = 0; i < iov_count; ++i) {
    const auto* in = static_cast<const std::byte*>(iov[i].iov_base);
    std::size_t left = iov[i].iov_len;
    while (left > 0) {
      auto space = producer_.reserve(1);
      if (space.empty()) break;
      const std::size_t n = std::min(left, space.size());
      std::memcpy(space.data(), in, n);
      producer_.commit(n);
      in += n;
      left -= n;
      total += n;
    }
    if (left > 0) break;
  }
  if (producer_.publish() > 0) wake(segment_.header().rings[side_].reader_wakeup);
  return static_cast<ssize_t>(total);
}

// 0 while the peer reads; else -ECONNRESET once its process is gone
// without closing, or -EPIPE (and SIGPIPE unless MSG_NOSIGNAL) after a
// shutdown or an orderly close, as the kernel's TCP.
ssize_t Connection::write_refused(int flags) {
  const bool reader_gone = shared_->reader_gone[peer_].load(std::memory_order_acquire) != 0;
  if (!shut_write_ && !reader_gone && !peer_gone()) return 0;
  if (!shut_write_ && !reader_gone) return -ECONNRESET;
  if ((flags & MSG_NOSIGNAL) == 0) ::raise(SIGPIPE);
  return -EPIPE;
}

ssize_t Connection::send(const iovec* iov, int iov_count, int flags, bool descriptor_nonblocking) {
  if (iov_count < 0 || iov_count > UIO_MAXIOV) return -EINVAL;
  std::lock_guard lock(write_mutex_);
  const bool dont_wait = descriptor_nonblocking || (flags & MSG_DONTWAIT) != 0;
  std::size_t total = 0;
  std::size_t want = 0;
  for (int i = 0; i < iov_count; ++i) want += iov[i].iov_len;
  uint64_t spin_until = 0;
  uint64_t deadline = UINT64_MAX;
  iovec rest[UIO_MAXIOV];
  for (;;) {
    if (const ssize_t refused = write_refused(flags); refused != 0)
      return total > 0 ? static_cast<ssize_t>(total) : refused;
    if (producer_.corrupt()) return total > 0 ? static_cast<ssize_t>(total) : -ECONNRESET;
    // The caller's buffers past what is already written.
    int count = 0;
    std::size_t skip = total;
    for (int i = 0; i < iov_count; ++i) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      rest[count++] = {static_cast<char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip};
      skip = 0;
    }
    total += static_cast<std::size_t>(send_now(rest, count));
    if (total == want) return static_cast<ssize_t>(total);
    if (dont_wait) {
      write_edge.store(true, std::memory_order_relaxed);
      return total > 0 ? static_cast<ssize_t>(total) : -EAGAIN;
    }
    if (spin_until == 0) {
      const uint64_t now = now_ns();
      spin_until = now + settings().spin_ns;
      const uint64_t timeout = send_timeout_ns.load(std::memory_order_relaxed);
      deadline = timeout == 0 ? UINT64_MAX : now + timeout;
    } else if (now_ns() >= deadline) {
      return total > 0 ? static_cast<ssize_t>(total) : -EAGAIN;  // SO_SNDTIMEO
    }
    wait(shared_->writer_wakeup[side_], false, spin_until, deadline);
  }
}

// One step of a blocking call's wait: spin while before spin_until, else a
// futex sleep of at most one slice (and not past the deadline), then a look
// at the kernel socket (the peer's process may be gone). The caller
// re-checks its ring after.
void Connection::wait(shm::WakeupWord& word, bool for_read, uint64_t spin_until_ns, uint64_t deadline_ns) {
  const uint64_t now = now_ns();
  if (now < spin_until_ns) {
    for (int i = 0; i < 64; ++i) __builtin_ia32_pause();
    return;
  }
  shm::announce_sleep(word, shm::SleepState::kFutex);
  const bool ready = for_read ? (consumer_.refresh() && !consumer_.readable().empty()) || shut_read_ ||
                                    segment_.header().sides[peer_].closed.load(std::memory_order_acquire) != 0
                              : !producer_.reserve(1).empty() || shut_write_ ||
                                    shared_->reader_gone[peer_].load(std::memory_order_acquire) != 0;
  if (!ready && now < deadline_ns) shm::futex_sleep(word, std::min(kSleepSliceNs, deadline_ns - now));
  (void)shm::cancel_sleep(word);
  if (!ready) drain_doorbells();
}

// A non-blocking reader that found the ring empty: doorbells are drained
// (and the life line read) when poll/epoll armed them, else at most once per
// kLifeLineIntervalNs, so a busy-polling reader makes no system call per poll.
void Connection::look_at_kernel_socket() {
  const uint64_t now = now_ns();
  if (!doorbells_armed_.exchange(false, std::memory_order_relaxed) && now - last_look_ns_ < kLifeLineIntervalNs) return;
  last_look_ns_ = now;
  drain_doorbells();
}

void Connection::drain_doorbells() {
  char bytes[64];
  for (;;) {
    const ssize_t n = real().recv(tcp_fd(), bytes, sizeof bytes, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      tcp_gone_.store(true, std::memory_order_release);
    return;
  }
}

// Lock-free, so that shutdown() from another thread ends a call blocked on
// this connection (it holds the direction's mutex), as on the kernel's TCP.
void Connection::shutdown(int how) {
  if (how == SHUT_RD || how == SHUT_RDWR) {
    shut_read_.store(true, std::memory_order_release);
    wake_local(segment_.header().rings[peer_].reader_wakeup);
  }
  if (how == SHUT_WR || how == SHUT_RDWR) {
    shut_write_.store(true, std::memory_order_release);
    // Release after this thread's last publish: pairs with the reader's
    // acquire in empty_ring_result().
    segment_.header().sides[side_].closed.store(1, std::memory_order_release);
    wake(segment_.header().rings[side_].reader_wakeup);
    wake_local(shared_->writer_wakeup[side_]);
  }
}

// Wakes a thread of this process blocked on one of our own words.
void Connection::wake_local(shm::WakeupWord& word) {
  if (shm::take_sleeper(word) == shm::SleepState::kFutex) shm::futex_wake(word);
}

void Connection::close_side() {
  if (shared_->processes[side_].fetch_sub(1, std::memory_order_acq_rel) == 1) {
    shutdown(SHUT_RDWR);
    shared_->reader_gone[side_].store(1, std::memory_order_release);
    wake(shared_->writer_wakeup[peer_]);
  }
}

std::size_t Connection::readable_bytes() {
  std::unique_lock lock(read_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !consumer_.refresh()) return 0;  // another thread is reading
  return consumer_.readable().size();
}

Readiness Connection::readiness() {
  Readiness r;
  const bool closed = segment_.header().sides[peer_].closed.load(std::memory_order_acquire) != 0;
  // A direction another thread is blocked in counts as not ready: poll and
  // epoll must not wait for that thread.
  {
    std::unique_lock lock(read_mutex_, std::try_to_lock);
    const bool data = lock.owns_lock() && consumer_.refresh() && !consumer_.readable().empty();
    r.readable = data || closed || shut_read_ || peer_gone() || consumer_.corrupt();
  }
  const bool reader_gone = shared_->reader_gone[peer_].load(std::memory_order_acquire) != 0;
  {
    std::unique_lock lock(write_mutex_, std::try_to_lock);
    const bool space = lock.owns_lock() && !producer_.reserve(1).empty();
    r.writable = space || reader_gone || peer_gone() || shut_write_;
  }
  r.peer_closed = closed;
  r.error = (peer_gone() && !closed) || consumer_.corrupt();
  return r;
}

void Connection::arm_doorbells(bool read, bool write) {
  doorbells_armed_.store(true, std::memory_order_relaxed);
  if (read) shm::announce_sleep(segment_.header().rings[peer_].reader_wakeup, shm::SleepState::kEventFd);
  if (write) shm::announce_sleep(shared_->writer_wakeup[side_], shm::SleepState::kEventFd);
}

void Connection::disarm_doorbells(bool read, bool write) {
  if (read) (void)shm::cancel_sleep(segment_.header().rings[peer_].reader_wakeup);
  if (write) (void)shm::cancel_sleep(shared_->writer_wakeup[side_]);
}

}  // namespace fjord::sockets
