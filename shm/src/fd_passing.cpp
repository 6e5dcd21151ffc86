// SCM_RIGHTS send and receive with deadlines. Slow path.
#include "fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/clock.h"

namespace fjord::shm {
namespace {

constexpr char kFdMessageByte = 'F';

// Waits for `events` on the socket until the deadline; false on timeout.
bool wait_for(int socket, short events, DeadlineNs deadline) {
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) return false;
    pollfd p{socket, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 1000)));
    if (rc > 0) return true;
  }
}

// A control buffer big enough for kMaxPassedFds descriptors, suitably aligned.
union ControlBuffer {
  char bytes[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  cmsghdr align;
};

}  // namespace

Status send_fds(int socket, std::span<const int> fds, DeadlineNs deadline) {
  FJORD_ASSERT(!fds.empty());
  FJORD_ASSERT(fds.size() <= kMaxPassedFds);
  char byte = kFdMessageByte;
  iovec iov{&byte, 1};
  ControlBuffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  for (;;) {
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == 1) return Status::ok();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET)
        return Status(StatusCode::kLinkDown, "peer closed before the shared memory was passed");
      return io_error("sendmsg SCM_RIGHTS", errno);
    }
    if (!wait_for(socket, POLLOUT, deadline)) return Status(StatusCode::kTimeout, "passing the shm fds timed out");
  }
}

Status receive_fds(int socket, std::span<UniqueFd> out, DeadlineNs deadline) {
  FJORD_ASSERT(!out.empty());
  FJORD_ASSERT(out.size() <= kMaxPassedFds);
  char byte = 0;
  iovec iov{&byte, 1};
  ControlBuffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
  ssize_t n = -1;
  for (;;) {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return io_error("recvmsg SCM_RIGHTS", errno);
    if (!wait_for(socket, POLLIN, deadline)) return Status(StatusCode::kTimeout, "waiting for the shm fds timed out");
  }
  if (n == 0) return Status(StatusCode::kLinkDown, "peer closed before passing the shared memory");
  // Take ownership of whatever arrived first, so nothing leaks on an error.
  UniqueFd received[kMaxPassedFds];
  std::size_t count = 0;
  bool extra = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t fds_here = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < fds_here; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count < kMaxPassedFds) {
        received[count++].reset(fd);
      } else {
        ::close(fd);
        extra = true;
      }
    }
  }
  if (byte != kFdMessageByte) return Status(StatusCode::kProtocolError, "unexpected byte instead of the shm fds");
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || extra || count != out.size())
    return Status(StatusCode::kProtocolError, "expected " + std::to_string(out.size()) + " fds from the peer, got " +
                                                  std::to_string(count) +
                                                  ((msg.msg_flags & MSG_CTRUNC) != 0 ? " (truncated)" : ""));
  for (std::size_t i = 0; i < count; ++i) out[i] = std::move(received[i]);
  return Status::ok();
}

}  // namespace fjord::shm
