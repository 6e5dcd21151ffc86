// The exported socket calls of libfjord-sockets: each looks its descriptor
// up in the table (one atomic load) and either serves it from the SHM
// connection or passes it to the C library unchanged. poll, select and
// epoll are in readiness.cpp. Any thread; the data calls are the hot path.

// The plain names (fcntl, sendfile) are defined below besides their 64-bit
// twins: the headers must not rename one into the other.
#undef _FILE_OFFSET_BITS
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "agreement.h"
#include "fd_table.h"
#include "readiness.h"
#include "real_calls.h"
#include "settings.h"

namespace fjord::sockets {
namespace {

ssize_t with_errno(ssize_t result) {
  if (result >= 0) return result;
  errno = static_cast<int>(-result);
  return -1;
}

bool descriptor_nonblocking(int fd) { return (real().fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

uint64_t timeval_ns(const timeval& t) {
  if (t.tv_sec < 0 || t.tv_usec < 0) return 0;
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(t.tv_usec) * 1000ULL;
}

// The kernel socket's SO_RCVTIMEO or SO_SNDTIMEO (0: none).
uint64_t socket_timeout_ns(int fd, int option) {
  timeval t{};
  socklen_t length = sizeof t;
  return ::getsockopt(fd, SOL_SOCKET, option, &t, &length) == 0 ? timeval_ns(t) : 0;
}

// Hands the outcome of an agreement to the table.
void finish_agreement(int fd, std::unique_ptr<Connection> c, Pending pending) {
  FdEntry* e = fd_entry(fd);
  if (c) {
    c->nonblocking.store(descriptor_nonblocking(fd), std::memory_order_relaxed);
    c->receive_timeout_ns.store(socket_timeout_ns(fd, SO_RCVTIMEO), std::memory_order_relaxed);
    c->send_timeout_ns.store(socket_timeout_ns(fd, SO_SNDTIMEO), std::memory_order_relaxed);
    install(fd, c.release());
  }
  // Release: a thread that waited for the agreement (kAgreeing) and sees
  // this store finds the installed connection.
  e->pending.store(pending, std::memory_order_release);
}

// A non-blocking connect that has completed: the agreement runs now, at
// the first data call, unless the peer has spoken already (then it is not
// a library server waiting for a hello).
void finish_connect(int fd, FdEntry& e) {
  Pending expected = Pending::kConnecting;
  if (!e.pending.compare_exchange_strong(expected, Pending::kAgreeing, std::memory_order_acq_rel)) {
    // Another thread of the process runs the agreement: wait for its outcome
    // (bounded by FJORD_SOCKETS_CONNECT_WAIT_MS on that thread).
    while (e.pending.load(std::memory_order_acquire) == Pending::kAgreeing) ::usleep(20);
    return;
  }
  sockaddr_storage peer{};
  socklen_t length = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) {  // not connected yet
    e.pending.store(Pending::kConnecting, std::memory_order_release);
    return;
  }
  char byte = 0;
  if (real().recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 || e.connecting_epoll_sets > 1) {
    if (e.connecting_epoll_sets > 1) log_path("fd %d: kernel (in more than one epoll set)", fd);
    e.pending.store(Pending::kNone, std::memory_order_release);
    return;
  }
  Pending pending = Pending::kNone;
  auto c = agree_as_connector(fd, &pending);
  const bool moved = c != nullptr;
  if (moved && e.connecting_epoll_fd >= 0) {
    const int epfd = e.connecting_epoll_fd;
    finish_agreement(fd, std::move(c), pending);
    adopt_epoll_registration(epfd, fd, e.connecting_events, e.connecting_data);
    return;
  }
  finish_agreement(fd, std::move(c), pending);
}

// A descriptor the library does not accelerate may still have agreement
// bytes at the front of its stream, or a connect to finish: deals with
// them first. False (errno EAGAIN) when a non-blocking caller must come back.
bool take_pending(int fd, int flags) {
  FdEntry* e = fd_entry(fd);
  if (e == nullptr) return true;
  Pending p = e->pending.load(std::memory_order_relaxed);
  if (p == Pending::kNone) return true;
  const int saved = errno;
  if (p == Pending::kConnecting || p == Pending::kAgreeing) {
    finish_connect(fd, *e);
    p = e->pending.load(std::memory_order_relaxed);
    errno = saved;
    if (p == Pending::kNone || p == Pending::kConnecting) return true;
  }
  bool would_block = false;
  const bool nonblocking = (flags & MSG_DONTWAIT) != 0 || descriptor_nonblocking(fd);
  e->pending.store(resolve_pending(fd, p, nonblocking, &would_block), std::memory_order_relaxed);
  errno = would_block ? EAGAIN : saved;
  return !would_block;
}

// Accelerated receive: true with *result set, or false for the kernel path.
bool receive_accelerated(int fd, const iovec* iov, int count, int flags, ssize_t* result) {
  Connection* c = accelerated(fd);
  if (c == nullptr) {
    if (!take_pending(fd, flags)) {
      *result = -1;
      return true;
    }
    c = accelerated(fd);  // a connect that finished may be accelerated now
    if (c == nullptr) return false;
  }
  if ((flags & MSG_OOB) != 0) {
    *result = with_errno(-EOPNOTSUPP);
    return true;
  }
  *result = with_errno(c->receive(iov, count, flags, c->nonblocking.load(std::memory_order_relaxed)));
  return true;
}

bool send_accelerated(int fd, const iovec* iov, int count, int flags, ssize_t* result) {
  Connection* c = accelerated(fd);
  if (c == nullptr) {
    FdEntry* e = fd_entry(fd);
    if (e == nullptr) return false;
    const Pending p = e->pending.load(std::memory_order_relaxed);
    if (p != Pending::kConnecting && p != Pending::kAgreeing) return false;
    const int saved = errno;
    finish_connect(fd, *e);
    errno = saved;
    c = accelerated(fd);
    if (c == nullptr) return false;
  }
  if ((flags & MSG_OOB) != 0) {
    *result = with_errno(-EOPNOTSUPP);
    return true;
  }
  *result = with_errno(c->send(iov, count, flags, c->nonblocking.load(std::memory_order_relaxed)));
  return true;
}

// dup family: the new number shares the connection. A number past the
// table cannot be served: the duplicate is refused (EMFILE).
int share_duplicate(int old_fd, int new_fd) {
  Connection* c = accelerated(old_fd);
  if (new_fd < 0 || c == nullptr) return new_fd;
  if (fd_entry(new_fd) == nullptr) {
    (void)real().close(new_fd);
    errno = EMFILE;
    return -1;
  }
  c->descriptors.fetch_add(1, std::memory_order_relaxed);
  install(new_fd, c);
  return new_fd;
}

// The kernel closes new_fd silently in dup2/dup3: so does the table.
void before_replace(int old_fd, int new_fd) {
  if (old_fd != new_fd && fd_entry(new_fd) != nullptr) release_fd(new_fd);
}

int accepted(int listen_fd, int fd) {
  FdEntry* listener = fd_entry(listen_fd);
  if (fd < 0 || listener == nullptr || fd_entry(fd) == nullptr) return fd;
  if (listener->advert.load(std::memory_order_relaxed) < 0) return fd;
  const int saved = errno;
  Pending pending = Pending::kNone;
  auto c = agree_as_acceptor(fd, &pending);
  finish_agreement(fd, std::move(c), pending);
  errno = saved;
  return fd;
}

__attribute__((constructor)) void load() {
  (void)real();
  (void)settings();
}

}  // namespace
}  // namespace fjord::sockets

using namespace fjord::sockets;  // NOLINT: the exported C names below

extern "C" {

int listen(int fd, int backlog) {
  const int r = real().listen(fd, backlog);
  FdEntry* e = fd_entry(fd);
  if (r == 0 && e != nullptr && e->advert.load(std::memory_order_relaxed) < 0) {
    const int saved = errno;
    e->advert.store(advertise_listener(fd), std::memory_order_relaxed);
    errno = saved;
  }
  return r;
}

int connect(int fd, const sockaddr* address, socklen_t length) {
  const int r = real().connect(fd, address, length);
  FdEntry* e = fd_entry(fd);
  if (e == nullptr || address == nullptr || !settings().enabled) return r;
  if (address->sa_family != AF_INET && address->sa_family != AF_INET6) return r;
  if (r != 0 && errno == EINPROGRESS) {
    // Agreed at the first data call once connected (finish_connect).
    e->connecting_epoll_fd = -1;
    e->connecting_epoll_sets = 0;
    e->pending.store(Pending::kConnecting, std::memory_order_relaxed);
    return r;
  }
  if (r != 0) return r;
  const int saved = errno;
  Pending pending = Pending::kNone;
  auto c = agree_as_connector(fd, &pending);
  finish_agreement(fd, std::move(c), pending);
  errno = saved;
  return r;
}

int accept(int fd, sockaddr* address, socklen_t* length) { return accepted(fd, real().accept(fd, address, length)); }

int accept4(int fd, sockaddr* address, socklen_t* length, int flags) {
  return accepted(fd, real().accept4(fd, address, length, flags));
}

ssize_t read(int fd, void* buffer, size_t bytes) {
  const iovec iov{buffer, bytes};
  ssize_t r = 0;
  return receive_accelerated(fd, &iov, 1, 0, &r) ? r : real().read(fd, buffer, bytes);
}

ssize_t recv(int fd, void* buffer, size_t bytes, int flags) {
  const iovec iov{buffer, bytes};
  ssize_t r = 0;
  return receive_accelerated(fd, &iov, 1, flags, &r) ? r : real().recv(fd, buffer, bytes, flags);
}

ssize_t recvfrom(int fd, void* buffer, size_t bytes, int flags, sockaddr* address, socklen_t* length) {
  const iovec iov{buffer, bytes};
  ssize_t r = 0;
  if (!receive_accelerated(fd, &iov, 1, flags, &r)) return real().recvfrom(fd, buffer, bytes, flags, address, length);
  if (length != nullptr && accelerated(fd) != nullptr) *length = 0;  // a stream has no datagram source
  return r;
}

ssize_t readv(int fd, const iovec* iov, int count) {
  ssize_t r = 0;
  return receive_accelerated(fd, iov, count, 0, &r) ? r : real().readv(fd, iov, count);
}

ssize_t recvmsg(int fd, msghdr* message, int flags) {
  ssize_t r = 0;
  if (!receive_accelerated(fd, message->msg_iov, static_cast<int>(message->msg_iovlen), flags, &r))
    return real().recvmsg(fd, message, flags);
  if (accelerated(fd) != nullptr) {
    message->msg_namelen = 0;
    message->msg_controllen = 0;
    message->msg_flags = 0;
  }
  return r;
}

ssize_t __read_chk(int fd, void* buffer, size_t bytes, size_t buffer_bytes) {
  if (bytes > buffer_bytes) __builtin_trap();
  return read(fd, buffer, bytes);
}

ssize_t __recv_chk(int fd, void* buffer, size_t bytes, size_t buffer_bytes, int flags) {
  if (bytes > buffer_bytes) __builtin_trap();
  return recv(fd, buffer, bytes, flags);
}

ssize_t __recvfrom_chk(int fd, void* buffer, size_t bytes, size_t buffer_bytes, int flags, sockaddr* address,
                       socklen_t* length) {
  if (bytes > buffer_bytes) __builtin_trap();
  return recvfrom(fd, buffer, bytes, flags, address, length);
}

ssize_t write(int fd, const void* buffer, size_t bytes) {
  const iovec iov{const_cast<void*>(buffer), bytes};
  ssize_t r = 0;
  return send_accelerated(fd, &iov, 1, 0, &r) ? r : real().write(fd, buffer, bytes);
}

ssize_t send(int fd, const void* buffer, size_t bytes, int flags) {
  const iovec iov{const_cast<void*>(buffer), bytes};
  ssize_t r = 0;
  return send_accelerated(fd, &iov, 1, flags, &r) ? r : real().send(fd, buffer, bytes, flags);
}

ssize_t sendto(int fd, const void* buffer, size_t bytes, int flags, const sockaddr* address, socklen_t length) {
  const iovec iov{const_cast<void*>(buffer), bytes};
  ssize_t r = 0;
  return send_accelerated(fd, &iov, 1, flags, &r) ? r : real().sendto(fd, buffer, bytes, flags, address, length);
}

ssize_t writev(int fd, const iovec* iov, int count) {
  ssize_t r = 0;
  return send_accelerated(fd, iov, count, 0, &r) ? r : real().writev(fd, iov, count);
}

ssize_t sendmsg(int fd, const msghdr* message, int flags) {
  ssize_t r = 0;
  return send_accelerated(fd, message->msg_iov, static_cast<int>(message->msg_iovlen), flags, &r)
             ? r
             : real().sendmsg(fd, message, flags);
}

// One chunk per call (sendfile may move fewer bytes than asked).
ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  if (accelerated(out_fd) == nullptr) return real().sendfile(out_fd, in_fd, offset, count);
  static thread_local char chunk[64 * 1024];
  const size_t want = count < sizeof chunk ? count : sizeof chunk;
  const ssize_t got = offset != nullptr ? ::pread(in_fd, chunk, want, *offset) : real().read(in_fd, chunk, want);
  if (got <= 0) return got;
  const ssize_t sent = write(out_fd, chunk, static_cast<size_t>(got));
  if (sent > 0 && offset != nullptr) *offset += sent;
  if (sent > 0 && sent < got && offset == nullptr) (void)::lseek(in_fd, sent - got, SEEK_CUR);
  return sent;
}

ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  static_assert(sizeof(off64_t) == sizeof(off_t), "64-bit offsets on this platform");
  return sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
}

int close(int fd) {
  if (FdEntry* e = fd_entry(fd)) {
    const int saved = errno;
    // Loads first: closing a descriptor the library never saw writes nothing.
    if (e->connection.load(std::memory_order_relaxed) != nullptr) release_fd(fd);
    if (e->pending.load(std::memory_order_relaxed) != Pending::kNone)
      e->pending.store(Pending::kNone, std::memory_order_relaxed);
    if (e->advert.load(std::memory_order_relaxed) >= 0) {
      const int advert = e->advert.exchange(-1, std::memory_order_relaxed);
      if (advert >= 0) (void)real().close(advert);
    }
    forget_epoll_set(fd);
    errno = saved;
  }
  return real().close(fd);
}

// Passed to the kernel socket; the timeouts also bind the SHM path.
int setsockopt(int fd, int level, int option, const void* value, socklen_t length) {
  const int r = real().setsockopt(fd, level, option, value, length);
  Connection* c = accelerated(fd);
  if (r != 0 || c == nullptr || level != SOL_SOCKET || length < static_cast<socklen_t>(sizeof(timeval))) return r;
  if (option == SO_RCVTIMEO_OLD || option == SO_RCVTIMEO_NEW)
    c->receive_timeout_ns.store(timeval_ns(*static_cast<const timeval*>(value)), std::memory_order_relaxed);
  if (option == SO_SNDTIMEO_OLD || option == SO_SNDTIMEO_NEW)
    c->send_timeout_ns.store(timeval_ns(*static_cast<const timeval*>(value)), std::memory_order_relaxed);
  return r;
}

int shutdown(int fd, int how) {
  Connection* c = accelerated(fd);
  if (c == nullptr) return real().shutdown(fd, how);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    errno = EINVAL;
    return -1;
  }
  c->shutdown(how);
  return 0;
}

int dup(int fd) { return share_duplicate(fd, real().dup(fd)); }

int dup2(int old_fd, int new_fd) {
  before_replace(old_fd, new_fd);
  const int r = real().dup2(old_fd, new_fd);
  return old_fd == new_fd ? r : share_duplicate(old_fd, r);
}

int dup3(int old_fd, int new_fd, int flags) {
  before_replace(old_fd, new_fd);
  return share_duplicate(old_fd, real().dup3(old_fd, new_fd, flags));
}

int fcntl(int fd, int command, ...) {
  va_list args;
  va_start(args, command);
  void* argument = va_arg(args, void*);
  va_end(args);
  const int r = real().fcntl(fd, command, argument);
  Connection* c = accelerated(fd);
  if (c == nullptr || r < 0) return r;
  if (command == F_DUPFD || command == F_DUPFD_CLOEXEC) return share_duplicate(fd, r);
  if (command == F_SETFL)
    c->nonblocking.store((reinterpret_cast<uintptr_t>(argument) & O_NONBLOCK) != 0, std::memory_order_relaxed);
  return r;
}

int fcntl64(int fd, int command, ...) {
  va_list args;
  va_start(args, command);
  void* argument = va_arg(args, void*);
  va_end(args);
  return fcntl(fd, command, argument);
}

int ioctl(int fd, unsigned long request, ...) {
  va_list args;
  va_start(args, request);
  void* argument = va_arg(args, void*);
  va_end(args);
  Connection* c = accelerated(fd);
  if (c != nullptr && request == FIONREAD) {
    *static_cast<int*>(argument) = static_cast<int>(c->readable_bytes());
    return 0;
  }
  const int r = real().ioctl(fd, request, argument);
  if (c != nullptr && r == 0 && request == FIONBIO)
    c->nonblocking.store(*static_cast<const int*>(argument) != 0, std::memory_order_relaxed);
  return r;
}

pid_t fork() {
  // The child holds every connection's side too: the side ends when the
  // last process holding it closes it.
  for_each_connection([](Connection* c) { c->add_process(); });
  const pid_t pid = real().fork();
  if (pid < 0) for_each_connection([](Connection* c) { c->remove_process(); });
  return pid;
}

}  // extern "C"
