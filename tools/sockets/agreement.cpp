// The hello / answer / confirm exchange over the kernel connection.
#include "agreement.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "fjord/base/assert.h"
#include "real_calls.h"
#include "settings.h"

namespace fjord::sockets {
namespace {

constexpr char kHelloMagic[8] = {'F', 'J', 'S', 'K', 'H', 'E', 'L', 'O'};
constexpr char kAnswerMagic[8] = {'F', 'J', 'S', 'K', 'A', 'N', 'S', 'W'};
constexpr char kCommitMagic[8] = {'F', 'J', 'S', 'K', 'C', 'M', 'I', 'T'};
constexpr char kAbortMagic[8] = {'F', 'J', 'S', 'K', 'A', 'B', 'R', 'T'};
constexpr uint32_t kProtocolVersion = 1;

// Host identity: the same kernel boot, network, user and PID namespaces
// (the acceptor opens the segment through /proc/PID/fd of the connector).
struct Identity {
  char boot_id[40] = {};
  uint64_t net_ns = 0;
  uint64_t user_ns = 0;
  uint64_t pid_ns = 0;
  bool operator==(const Identity&) const = default;
};

// Same host only, so host byte order; every field fixed size.
struct Hello {
  char magic[8];
  uint32_t version;
  uint32_t pid;
  int32_t memfd;
  uint32_t ring_bytes;
  uint64_t token[2];
  Identity identity;
};
struct Answer {
  char magic[8];
  uint32_t accept;  // 1 accept, 0 decline
  uint32_t reason;  // a Decline value
};
enum Decline : uint32_t { kAccepted = 0, kOtherHost, kVersion, kNoSegment };

const char* decline_text(uint32_t reason) {
  switch (reason) {
    case kOtherHost: return "not the same host or namespaces";
    case kVersion: return "another protocol version";
    case kNoSegment: return "the shared memory could not be opened";
    default: return "declined";
  }
}

uint64_t namespace_inode(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? st.st_ino : 0;
}

Identity read_identity() {
  Identity id;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
    if (std::fgets(id.boot_id, sizeof id.boot_id, f) == nullptr) id.boot_id[0] = '\0';
    std::fclose(f);
  }
  id.net_ns = namespace_inode("/proc/self/ns/net");
  id.user_ns = namespace_inode("/proc/self/ns/user");
  id.pid_ns = namespace_inode("/proc/self/ns/pid");
  return id;
}

const Identity& identity() {
  static const Identity id = read_identity();
  return id;
}

sockaddr_un advert_address(uint16_t port, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "fjord-sockets/tcp/%u", port);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// The peer is on this host when it is a loopback address or this socket's own.
bool peer_on_this_host(int fd, uint16_t* port) {
  sockaddr_storage peer{};
  sockaddr_storage self{};
  socklen_t pl = sizeof peer;
  socklen_t sl = sizeof self;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) return false;
  if (peer.ss_family == AF_INET) {
    const auto& p = reinterpret_cast<const sockaddr_in&>(peer);
    const auto& s = reinterpret_cast<const sockaddr_in&>(self);
    *port = ntohs(p.sin_port);
    return (ntohl(p.sin_addr.s_addr) >> 24) == 127 || p.sin_addr.s_addr == s.sin_addr.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    const auto& p = reinterpret_cast<const sockaddr_in6&>(peer);
    const auto& s = reinterpret_cast<const sockaddr_in6&>(self);
    *port = ntohs(p.sin6_port);
    const bool mapped_loopback = IN6_IS_ADDR_V4MAPPED(&p.sin6_addr) && p.sin6_addr.s6_addr[12] == 127;
    return IN6_IS_ADDR_LOOPBACK(&p.sin6_addr) || mapped_loopback ||
           std::memcmp(&p.sin6_addr, &s.sin6_addr, sizeof p.sin6_addr) == 0;
  }
  return false;
}

bool is_tcp_stream(int fd) {
  int type = 0;
  int protocol = 0;
  socklen_t length = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) return false;
  length = sizeof protocol;
  return ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &length) == 0 && protocol == IPPROTO_TCP;
}

bool advertised(uint16_t port) {
  const int probe = real().socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  socklen_t length = 0;
  const sockaddr_un a = advert_address(port, &length);
  const bool found = real().connect(probe, reinterpret_cast<const sockaddr*>(&a), length) == 0;
  (void)real().close(probe);
  return found;
}

// Waits until fd is readable; false at the deadline.
bool wait_readable(int fd, uint64_t deadline_ns) {
  for (;;) {
    const uint64_t now = now_ns();
    if (now >= deadline_ns) return false;
    pollfd p{fd, POLLIN, 0};
    const int ms = static_cast<int>(std::min<uint64_t>((deadline_ns - now + 999'999) / 1'000'000, 1000));
    const int n = real().poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool send_all(int fd, const void* data, std::size_t bytes) {
  // A few dozen bytes into a socket that has sent nothing yet: the send
  // buffer takes them whole, blocking or not.
  return real().send(fd, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes);
}

enum class Peeked { kWhole, kOther, kTimeout, kClosed };

// Peeks until `bytes` bytes starting with `magic` are there (then consumes
// them), or the bytes there differ from the magic (nothing consumed).
Peeked take_message(int fd, const char (&magic)[8], void* out, std::size_t bytes, uint64_t deadline_ns) {
  for (;;) {
    const ssize_t n = real().recv(fd, out, bytes, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return Peeked::kClosed;
    if (n > 0) {
      if (std::memcmp(out, magic, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof magic)) != 0)
        return Peeked::kOther;
      if (static_cast<std::size_t>(n) == bytes)
        return real().recv(fd, out, bytes, MSG_DONTWAIT) == n ? Peeked::kWhole : Peeked::kClosed;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Peeked::kClosed;
    }
    if (!wait_readable(fd, deadline_ns)) return Peeked::kTimeout;
    if (n > 0 && now_ns() + 1'000'000 < deadline_ns) ::usleep(100);  // the rest of a message is on its way
  }
}

Peeked take_confirm(int fd, bool* commit, uint64_t deadline_ns) {
  char confirm[8];
  Peeked p = take_message(fd, kCommitMagic, confirm, sizeof confirm, deadline_ns);
  *commit = p == Peeked::kWhole;
  if (p == Peeked::kOther) p = take_message(fd, kAbortMagic, confirm, sizeof confirm, deadline_ns);
  return p;
}

Hello make_hello(const Connection& c, std::size_t ring_bytes, const uint64_t token[2]) {
  FJORD_ASSERT(ring_bytes <= UINT32_MAX);
  FJORD_ASSERT(c.memfd() >= 0);
  Hello h{};
  std::memcpy(h.magic, kHelloMagic, sizeof h.magic);
  h.version = kProtocolVersion;
  h.pid = static_cast<uint32_t>(::getpid());
  h.memfd = c.memfd();
  h.ring_bytes = static_cast<uint32_t>(ring_bytes);
  h.token[0] = token[0];
  h.token[1] = token[1];
  h.identity = identity();
  return h;
}

}  // namespace

int advertise_listener(int listen_fd) {
  sockaddr_storage self{};
  socklen_t sl = sizeof self;
  if (!settings().enabled || !is_tcp_stream(listen_fd)) return -1;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) return -1;
  const uint16_t port = ntohs(self.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(self).sin_port
                                                        : reinterpret_cast<const sockaddr_in6&>(self).sin6_port);
  const int holder = real().socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (holder < 0) return -1;
  socklen_t length = 0;
  const sockaddr_un a = advert_address(port, &length);
  // EADDRINUSE: another library listener of this port (a forked worker,
  // SO_REUSEPORT) holds the name already; the port is advertised.
  if (::bind(holder, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    (void)real().close(holder);
    return -1;
  }
  log_path("listening on port %u: advertised", port);
  return holder;
}

std::unique_ptr<Connection> agree_as_connector(int fd, Pending* pending) {
  *pending = Pending::kNone;
  uint16_t port = 0;
  if (!settings().enabled || !is_tcp_stream(fd)) return nullptr;
  if (!peer_on_this_host(fd, &port)) return log_path("fd %d: kernel (the peer is on another host)", fd), nullptr;
  if (!advertised(port)) return log_path("fd %d: kernel (no library listener on port %u)", fd, port), nullptr;
  uint64_t token[2] = {};
  if (::getrandom(token, sizeof token, 0) != sizeof token) return nullptr;
  auto created = Connection::create(fd, settings().ring_bytes, token);
  if (!created) return log_path("fd %d: kernel (%s)", fd, created.status().message().c_str()), nullptr;
  std::unique_ptr<Connection> c = std::move(created).value();
  const Hello hello = make_hello(*c, settings().ring_bytes, token);
  if (!send_all(fd, &hello, sizeof hello)) return log_path("fd %d: kernel (hello not sent)", fd), nullptr;
  Answer answer{};
  const Peeked got = take_message(fd, kAnswerMagic, &answer, sizeof answer, now_ns() + settings().connect_wait_ns);
  if (got == Peeked::kOther || got == Peeked::kClosed)
    return log_path("fd %d: kernel (the peer did not answer the hello)", fd), nullptr;
  const bool accepted = got == Peeked::kWhole && answer.accept == 1;
  if (!send_all(fd, accepted ? kCommitMagic : kAbortMagic, sizeof kCommitMagic)) return nullptr;
  if (got == Peeked::kTimeout) {
    *pending = Pending::kStripAnswer;
    return log_path("fd %d: kernel (no answer in time)", fd), nullptr;
  }
  if (!accepted) return log_path("fd %d: kernel (peer: %s)", fd, decline_text(answer.reason)), nullptr;
  c->drop_memfd();
  log_path("fd %d: shm (port %u)", fd, port);
  return c;
}

namespace {

// The accepting side's half after a whole hello: attach, answer, confirm.
std::unique_ptr<Connection> answer_hello(int fd, const Hello& hello, Pending* pending) {
  uint32_t reason = kAccepted;
  std::unique_ptr<Connection> c;
  if (hello.version != kProtocolVersion) {
    reason = kVersion;
  } else if (!(hello.identity == identity())) {
    reason = kOtherHost;
  } else {
    const std::string path = "/proc/" + std::to_string(hello.pid) + "/fd/" + std::to_string(hello.memfd);
    UniqueFd memfd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    auto attached = memfd.valid() ? Connection::attach(fd, std::move(memfd), hello.ring_bytes, hello.token)
                                  : Result<std::unique_ptr<Connection>>(io_error("open " + path, errno));
    if (attached)
      c = std::move(attached).value();
    else
      reason = kNoSegment;
  }
  Answer answer{};
  std::memcpy(answer.magic, kAnswerMagic, sizeof answer.magic);
  answer.accept = c ? 1 : 0;
  answer.reason = reason;
  if (!send_all(fd, &answer, sizeof answer)) return nullptr;
  bool commit = false;
  const Peeked got = take_confirm(fd, &commit, now_ns() + settings().connect_wait_ns + 1'000'000'000);
  if (got == Peeked::kTimeout && c) {
    // We said accept and cannot tell what the peer chose: end the connection
    // rather than let the two ends read different streams.
    (void)real().shutdown(fd, SHUT_RDWR);
    return log_path("fd %d: shut down (no confirm after accept)", fd), nullptr;
  }
  if (got == Peeked::kTimeout) *pending = Pending::kStripConfirm;
  if (!commit || !c) return log_path("fd %d: kernel (%s)", fd, c ? "the peer aborted" : decline_text(reason)), nullptr;
  log_path("fd %d: shm (accepted)", fd);
  return c;
}

}  // namespace

std::unique_ptr<Connection> agree_as_acceptor(int fd, Pending* pending) {
  *pending = Pending::kNone;
  uint16_t port = 0;
  if (!peer_on_this_host(fd, &port)) return nullptr;  // no hello comes from another host
  Hello hello{};
  const Peeked got = take_message(fd, kHelloMagic, &hello, sizeof hello, now_ns() + settings().accept_wait_ns);
  if (got == Peeked::kTimeout) *pending = Pending::kMaybeHello;
  if (got != Peeked::kWhole) return log_path("fd %d: kernel (no hello from the peer)", fd), nullptr;
  return answer_hello(fd, hello, pending);
}

Pending resolve_pending(int fd, Pending pending, bool nonblocking, bool* would_block) {
  *would_block = false;
  // A blocking socket waits for the bytes; a non-blocking one looks once.
  const uint64_t deadline = nonblocking ? now_ns() : UINT64_MAX;
  Peeked got = Peeked::kOther;
  if (pending == Pending::kMaybeHello) {
    Hello hello{};
    got = take_message(fd, kHelloMagic, &hello, sizeof hello, deadline);
    // A late hello goes unanswered: the application may have written
    // already. The connector gives up waiting and sends its abort.
    if (got == Peeked::kWhole) return resolve_pending(fd, Pending::kStripConfirm, nonblocking, would_block);
  } else if (pending == Pending::kStripAnswer) {
    Answer answer{};
    got = take_message(fd, kAnswerMagic, &answer, sizeof answer, deadline);
  } else if (pending == Pending::kStripConfirm) {
    bool commit = false;
    got = take_confirm(fd, &commit, deadline);
  }
  if (got == Peeked::kTimeout) {
    *would_block = true;
    return pending;
  }
  return Pending::kNone;
}

}  // namespace fjord::sockets
