// The test peer of libfjord-sockets (tests/tools/sockets_test.cpp): a small
// TCP client and server whose byte streams are checked exactly. The same
// program runs with and without the library, so the two paths must agree.
//
//   sockets_peer server [blocking|poll|epoll|fork] [banner]
//       listens on 127.0.0.1 (port 0), prints the port, accepts one
//       connection, optionally writes a banner first, then echoes every
//       byte back until end of file, then closes (fork: a child process
//       echoes while the parent closes its copy and waits).
//   sockets_peer client PORT BYTES SEED [banner] [nonblocking-connect] [rcvtimeo] [shutdown-wakes]
//       connects (non-blocking, completed through epoll, if asked); reads
//       the banner if asked; checks SO_RCVTIMEO on the silent server if
//       asked; with shutdown-wakes only checks that shutdown() from another
//       thread ends a blocked recv; one thread writes BYTES
//       pseudo-random bytes in random pieces (write, send, writev) and then
//       shuts its sending side; the other reads the echo in random pieces
//       (read, recv, readv, MSG_PEEK, MSG_WAITALL) and checks every byte
//       and the end of file. Exit 0 and "ok" when all is exact.
//   sockets_peer self [nonblocking-connect]
//       one thread connects to its own listener, then accepts, then sends
//       one message each way (the agreement cannot finish in time).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr char kBanner[] = "220 fjord sockets peer\r\n";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "sockets_peer: %s: %s\n", what, std::strerror(errno));
  std::exit(2);
}

// The stream's byte at offset i for a seed: both ends compute it.
uint8_t stream_byte(uint64_t seed, uint64_t i) {
  uint64_t x = (i / 8 + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return static_cast<uint8_t>(x >> (8 * (i % 8)));
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void echo_blocking(int fd) {
  std::vector<char> buffer(70000);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("server read");
    if (n == 0) return;
    if (!write_all(fd, buffer.data(), static_cast<std::size_t>(n))) fail("server write");
  }
}

// Non-blocking echo: reads what is there into `pending`, writes what fits.
// Returns false at end of file with nothing left to write.
bool echo_step(int fd, std::string& pending, bool& eof) {
  char buffer[65536];
  while (!eof && pending.size() < (1u << 20)) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      pending.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0)
      eof = true;
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
      fail("server recv");
    break;
  }
  while (!pending.empty()) {
    const ssize_t w = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (w < 0) fail("server send");
    pending.erase(0, static_cast<std::size_t>(w));
  }
  return !(eof && pending.empty());
}

void echo_poll(int fd) {
  std::string pending;
  bool eof = false;
  while (echo_step(fd, pending, eof)) {
    pollfd p{fd, static_cast<short>((eof ? 0 : POLLIN) | (pending.empty() ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, 10'000) <= 0) fail("server poll");
  }
}

void echo_epoll(int fd) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event e{EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, {}};
  e.data.u64 = 42;
  if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) fail("epoll_ctl");
  std::string pending;
  bool eof = false;
  while (echo_step(fd, pending, eof)) {
    epoll_event got{};
    const int n = ::epoll_wait(ep, &got, 1, 10'000);
    if (n != 1 || got.data.u64 != 42) fail("server epoll_wait");
  }
  ::close(ep);
}

int server(const std::string& mode, bool banner) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 4) != 0) fail("listen");
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &length) != 0) fail("getsockname");
  std::printf("%u\n", ntohs(a.sin_port));
  std::fflush(stdout);
  const bool blocking = mode == "blocking" || mode == "fork";
  const int fd = ::accept4(listener, nullptr, nullptr, blocking ? 0 : SOCK_NONBLOCK);
  if (fd < 0) fail("accept");
  if (banner) {
    int off = 0;
    ::ioctl(fd, FIONBIO, &off);
    if (!write_all(fd, kBanner, sizeof kBanner - 1)) fail("banner");
    int nonblocking = blocking ? 0 : 1;
    ::ioctl(fd, FIONBIO, &nonblocking);
  }
  if (mode == "fork") {
    // The forking server: the child serves the connection, the parent
    // closes its copy at once (the connection must stay up) and waits.
    const pid_t child = ::fork();
    if (child < 0) fail("fork");
    if (child == 0) {
      ::close(listener);
      echo_blocking(fd);
      ::close(fd);
      std::fflush(stderr);
      std::_Exit(0);
    }
    ::close(fd);
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("child");
  } else if (mode == "poll") {
    echo_poll(fd);
    ::close(fd);
  } else if (mode == "epoll") {
    echo_epoll(fd);
    ::close(fd);
  } else {
    echo_blocking(fd);
    ::close(fd);
  }
  ::close(listener);
  std::fprintf(stderr, "sockets_peer: server done\n");
  return 0;
}

void send_stream(int fd, uint64_t bytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<char> piece(200'000);
  uint64_t sent = 0;
  while (sent < bytes) {
    const std::size_t n = std::min<uint64_t>(bytes - sent, 1 + random() % (random() % 4 == 0 ? 150'000 : 3000));
    for (std::size_t i = 0; i < n; ++i) piece[i] = static_cast<char>(stream_byte(seed, sent + i));
    ssize_t w = 0;
    switch (random() % 3) {
      case 0: w = ::write(fd, piece.data(), n); break;
      case 1: w = ::send(fd, piece.data(), n, MSG_NOSIGNAL); break;
      default: {
        const std::size_t half = n / 2;
        iovec iov[2] = {{piece.data(), half}, {piece.data() + half, n - half}};
        w = ::writev(fd, iov, 2);
      }
    }
    if (w <= 0) fail("client write");
    sent += static_cast<uint64_t>(w);  // a blocking write may still be partial; the rest goes next
    if (static_cast<std::size_t>(w) < n) continue;
  }
  if (::shutdown(fd, SHUT_WR) != 0) fail("shutdown");
}

// One read of a random size and kind; checks MSG_PEEK against the read after.
ssize_t read_piece(int fd, std::mt19937_64& random, std::vector<char>& buffer) {
  const std::size_t n = 1 + random() % (random() % 4 == 0 ? buffer.size() - 1 : 2000);
  switch (random() % 5) {
    case 0: return ::read(fd, buffer.data(), n);
    case 1: return ::recv(fd, buffer.data(), n, 0);
    case 2: return ::recv(fd, buffer.data(), std::min<std::size_t>(n, 64), MSG_WAITALL);
    case 3: {
      char peeked[32];
      const ssize_t p = ::recv(fd, peeked, sizeof peeked, MSG_PEEK);
      if (p <= 0) return p;
      const ssize_t r = ::recv(fd, buffer.data(), static_cast<std::size_t>(p), 0);
      if (r != p || std::memcmp(peeked, buffer.data(), static_cast<std::size_t>(p)) != 0) {
        std::fprintf(stderr, "sockets_peer: MSG_PEEK showed other bytes than the read after it\n");
        std::exit(3);
      }
      return r;
    }
    default: {
      const std::size_t half = n / 2;
      iovec iov[2] = {{buffer.data(), half}, {buffer.data() + half, n - half}};
      return ::readv(fd, iov, 2);
    }
  }
}

// A non-blocking connect completed through epoll (as event loops do), then
// the socket made blocking again.
void connect_nonblocking(int fd, const sockaddr_in& a) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return;
  if (errno != EINPROGRESS) fail("connect");
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event e{EPOLLOUT, {}};
  if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) fail("epoll_ctl");
  if (::epoll_wait(ep, &e, 1, 10'000) != 1) fail("epoll_wait for the connect");
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) fail("connect completion");
  ::close(ep);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
}

// SO_RCVTIMEO of 100 ms while the server says nothing: recv fails with
// EAGAIN after about that long, as on the kernel's TCP. Then no timeout.
bool check_receive_timeout(int fd) {
  timeval t{0, 100'000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t) != 0) fail("setsockopt SO_RCVTIMEO");
  const auto start = std::chrono::steady_clock::now();
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, 0);
  const auto waited = std::chrono::steady_clock::now() - start;
  if (n != -1 || (errno != EAGAIN && errno != EWOULDBLOCK) || waited < std::chrono::milliseconds(90)) {
    std::fprintf(stderr, "sockets_peer: recv with SO_RCVTIMEO returned %zd (%s) after %lld ms\n", n,
                 std::strerror(errno),
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
    return false;
  }
  t = {0, 0};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t) != 0) fail("setsockopt SO_RCVTIMEO");
  return true;
}

// shutdown(SHUT_RDWR) from another thread ends a recv blocked on the silent
// server with end of file, as on the kernel's TCP.
int check_shutdown_wakes_reader(int fd) {
  std::thread stopper([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (::shutdown(fd, SHUT_RDWR) != 0) fail("shutdown");
  });
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, 0);
  stopper.join();
  ::close(fd);
  if (n != 0) {
    std::fprintf(stderr, "sockets_peer: recv after shutdown returned %zd, not end of file\n", n);
    return 3;
  }
  std::printf("ok shutdown\n");
  return 0;
}

int client(int port, uint64_t bytes, uint64_t seed, bool banner, bool nonblocking_connect, bool receive_timeout,
           bool shutdown_wakes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking_connect ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (nonblocking_connect)
    connect_nonblocking(fd, a);
  else if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    fail("connect");
  if (banner) {
    char got[sizeof kBanner - 1];
    if (::recv(fd, got, sizeof got, MSG_WAITALL) != static_cast<ssize_t>(sizeof got) ||
        std::memcmp(got, kBanner, sizeof got) != 0) {
      std::fprintf(stderr, "sockets_peer: the banner is wrong\n");
      return 3;
    }
  }
  if (receive_timeout && !check_receive_timeout(fd)) return 3;
  if (shutdown_wakes) return check_shutdown_wakes_reader(fd);
  std::thread writer(send_stream, fd, bytes, seed);
  std::mt19937_64 random(seed + 1);
  std::vector<char> buffer(100'000);
  uint64_t received = 0;
  for (;;) {
    const ssize_t n = read_piece(fd, random, buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("client read");
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      const uint64_t offset = received + static_cast<uint64_t>(i);
      if (static_cast<uint8_t>(buffer[i]) != stream_byte(seed, offset)) {
        std::fprintf(stderr, "sockets_peer: byte %llu differs\n", static_cast<unsigned long long>(offset));
        std::exit(3);
      }
    }
    received += static_cast<uint64_t>(n);
  }
  writer.join();
  ::close(fd);
  if (received != bytes) {
    std::fprintf(stderr, "sockets_peer: %llu bytes came back, %llu sent\n", static_cast<unsigned long long>(received),
                 static_cast<unsigned long long>(bytes));
    return 3;
  }
  std::printf("ok %llu\n", static_cast<unsigned long long>(bytes));
  return 0;
}

// One thread connects to its own listener before it accepts: the connecting
// side cannot get an answer in time, so both ends must stay on the kernel
// with every agreement byte taken off the streams. Then one message each way.
int self_connect(bool nonblocking_connect) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 4) != 0) fail("listen");
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &length) != 0) fail("getsockname");
  const int client_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking_connect ? SOCK_NONBLOCK : 0), 0);
  if (nonblocking_connect)
    connect_nonblocking(client_fd, a);
  else if (::connect(client_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    fail("connect");
  const int server_fd = ::accept(listener, nullptr, nullptr);
  if (server_fd < 0) fail("accept");
  const char ping[] = "ping from the client";
  const char pong[] = "pong from the server";
  char got[sizeof ping] = {};
  if (!write_all(client_fd, ping, sizeof ping)) fail("client write");
  if (::recv(server_fd, got, sizeof got, MSG_WAITALL) != static_cast<ssize_t>(sizeof got) ||
      std::memcmp(got, ping, sizeof ping) != 0) {
    std::fprintf(stderr, "sockets_peer: the server read other bytes than the client wrote\n");
    return 3;
  }
  if (!write_all(server_fd, pong, sizeof pong)) fail("server write");
  if (::recv(client_fd, got, sizeof got, MSG_WAITALL) != static_cast<ssize_t>(sizeof got) ||
      std::memcmp(got, pong, sizeof pong) != 0) {
    std::fprintf(stderr, "sockets_peer: the client read other bytes than the server wrote\n");
    return 3;
  }
  std::printf("ok self\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool banner = std::find(args.begin(), args.end(), "banner") != args.end();
  const bool nonblocking_connect = std::find(args.begin(), args.end(), "nonblocking-connect") != args.end();
  const bool receive_timeout = std::find(args.begin(), args.end(), "rcvtimeo") != args.end();
  const bool shutdown_wakes = std::find(args.begin(), args.end(), "shutdown-wakes") != args.end();
  if (args.size() >= 2 && args[0] == "server") return server(args[1], banner);
  if (!args.empty() && args[0] == "self") return self_connect(nonblocking_connect);
  if (args.size() >= 4 && args[0] == "client")
    return client(std::atoi(args[1].c_str()), std::strtoull(args[2].c_str(), nullptr, 10),
                  std::strtoull(args[3].c_str(), nullptr, 10), banner, nonblocking_connect, receive_timeout,
                  shutdown_wakes);
  std::fprintf(stderr,
               "usage: sockets_peer server blocking|poll|epoll|fork [banner]\n"
               "       sockets_peer client PORT BYTES SEED [banner] [nonblocking-connect] [rcvtimeo] [shutdown-wakes]\n"
               "       sockets_peer self [nonblocking-connect]\n");
  return 1;
}
