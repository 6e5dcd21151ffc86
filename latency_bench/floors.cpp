#include "floors.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "fjord/base/cache.h"
#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/histogram.h"
#include "process.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kStop = UINT64_MAX;
constexpr uint32_t kSpinsPerClockCheck = 4096;

Row failed(Row row, std::string reason) {
  row.outcome = Outcome::kFailed;
  row.reason = std::move(reason);
  return row;
}

// ---- mailbox -----------------------------------------------------------

// Each side writes its own line; the other side only reads it.
struct alignas(kCacheLineBytes) Line {
  std::atomic<uint64_t> value{0};
};
struct Mailbox {
  Line ping;
  Line pong;
};
static_assert(sizeof(Mailbox) == 2 * kCacheLineBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the mailbox is shared between processes");

int mailbox_echo(Mailbox& box) {
  uint64_t seen = 0;
  for (;;) {
    // Acquire pairs with the driver's release store of ping: nothing else
    // is shared, so this only orders the echo after the read.
    const uint64_t v = box.ping.value.load(std::memory_order_acquire);
    if (v == seen) continue;
    if (v == kStop) return 0;
    seen = v;
    box.pong.value.store(v, std::memory_order_release);
  }
}

Status mailbox_rounds(Mailbox& box, const FloorParams& p, Histogram& rtt, Progress& progress) {
  const uint64_t total = p.warmup + p.iterations;
  for (uint64_t i = 1; i <= total; ++i) {
    const uint64_t start_ns = monotonic_ns();
    box.ping.value.store(i, std::memory_order_release);
    for (uint32_t spins = 1; box.pong.value.load(std::memory_order_acquire) != i; ++spins)
      if (spins % kSpinsPerClockCheck == 0 && monotonic_ns() - start_ns > p.timeout_ns)
        return Status(StatusCode::kTimeout, "the mailbox echo process did not answer");
    const uint64_t end_ns = monotonic_ns();
    if (i > p.warmup) rtt.record(end_ns - start_ns);
    if ((i & 1023) == 0) progress.update(i);
  }
  return Status::ok();
}

// ---- bare TCP ----------------------------------------------------------

Status set_nodelay(int fd, bool nonblocking) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return io_error("TCP_NODELAY", errno);
  if (nonblocking && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) return io_error("O_NONBLOCK", errno);
  return Status::ok();
}

// Moves exactly buffer.size() bytes; a non-blocking socket is polled by
// retrying. False on EOF or error.
bool send_exactly(int fd, std::span<const std::byte> buffer) {
  while (!buffer.empty()) {
    const ssize_t n = ::send(fd, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (n > 0) {
      buffer = buffer.subspan(static_cast<std::size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
  }
  return true;
}

bool receive_exactly(int fd, std::span<std::byte> buffer) {
  while (!buffer.empty()) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      buffer = buffer.subspan(static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return false;
    }
  }
  return true;
}

int tcp_echo(uint16_t port, std::size_t bytes, bool nonblocking) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 1;
  if (!set_nodelay(fd.get(), nonblocking)) return 1;
  std::vector<std::byte> buffer(bytes);
  while (receive_exactly(fd.get(), buffer))
    if (!send_exactly(fd.get(), buffer)) return 1;
  return 0;  // the driver closed the connection
}

Result<UniqueFd> accept_with_timeout(int listener, uint64_t timeout_ns) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout_ns / 1'000'000)) != 1)
    return Status(StatusCode::kTimeout, "the TCP echo process did not connect");
  UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn.valid()) return io_error("accept", errno);
  return conn;
}

Status tcp_rounds(int fd, const FloorParams& p, Histogram& rtt, Progress& progress) {
  std::vector<std::byte> out(p.wire_bytes, std::byte{0x5A});
  std::vector<std::byte> in(p.wire_bytes);
  const uint64_t total = p.warmup + p.iterations;
  for (uint64_t i = 1; i <= total; ++i) {
    const uint64_t start_ns = monotonic_ns();
    if (!send_exactly(fd, out) || !receive_exactly(fd, in))
      return Status(StatusCode::kLinkDown, "the TCP echo process went away");
    const uint64_t end_ns = monotonic_ns();
    if (i > p.warmup) rtt.record(end_ns - start_ns);
    if ((i & 1023) == 0) progress.update(i);
  }
  return Status::ok();
}

Result<UniqueFd> loopback_listener(uint16_t& port) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!listener.valid() || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listener.get(), 1) != 0 || ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return io_error("loopback listener", errno);
  port = ntohs(addr.sin_port);
  return listener;
}

}  // namespace

Row mailbox_floor(const FloorParams& p, Progress& progress) {
  Row row;
  row.kind = RowKind::kFloor;
  row.key = "floor.mailbox";
  row.label = "floor: cache-line mailbox, 2 processes, shm";
  row.poll = "busy";
  row.size_bytes = row.wire_bytes = kCacheLineBytes;
  row.iterations = p.iterations;
  row.warmup = p.warmup;
  row.note = "one cache line each way, whatever --size";
  void* memory = ::mmap(nullptr, sizeof(Mailbox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return failed(row, "mmap: " + std::string(std::strerror(errno)));
  Mailbox* box = new (memory) Mailbox();
  Histogram rtt;
  progress.begin("floor: mailbox", p.warmup + p.iterations);
  auto child = fork_child(p.cpu_peer, [box] { return mailbox_echo(*box); });
  const CpuMeter meter;
  Status s = child ? mailbox_rounds(*box, p, rtt, progress) : child.status();
  row.usage = meter.read();
  box->ping.value.store(kStop, std::memory_order_release);
  if (child) (void)child->wait_for(2'000'000'000ULL);
  ::munmap(memory, sizeof(Mailbox));
  if (!s) return failed(row, s.message());
  row.rtt = LatencySummary::from(rtt);
  return row;
}

Status bare_tcp_samples(const FloorParams& p, PollMode poll, Histogram& rtt, CpuUsage* usage, Progress& progress) {
  const bool busy = poll == PollMode::kBusy;
  uint16_t port = 0;
  auto listener = loopback_listener(port);
  if (!listener) return listener.status();
  const std::size_t bytes = p.wire_bytes;
  auto child = fork_child(p.cpu_peer, [port, bytes, busy] { return tcp_echo(port, bytes, busy); });
  if (!child) return child.status();
  auto conn = accept_with_timeout(listener->get(), p.timeout_ns);
  if (!conn) return conn.status();
  if (Status s = set_nodelay(conn->get(), busy); !s) return s;
  progress.begin(std::string("floor: bare TCP ") + poll_mode_name(poll), p.warmup + p.iterations);
  const CpuMeter meter;
  Status s = tcp_rounds(conn->get(), p, rtt, progress);
  if (usage != nullptr) *usage = meter.read();
  conn->reset();
  (void)child->wait_for(2'000'000'000ULL);
  return s;
}

Row bare_tcp_floor(const FloorParams& p, PollMode poll, Progress& progress) {
  const bool busy = poll == PollMode::kBusy;
  Row row;
  row.kind = RowKind::kFloor;
  row.key = busy ? "floor.bare_tcp_busy" : "floor.bare_tcp_sleep";
  row.label = busy ? "floor: bare TCP, non-blocking recv loop, NODELAY" : "floor: bare TCP, blocking recv, NODELAY";
  row.poll = poll_mode_name(poll);
  row.size_bytes = row.wire_bytes = p.wire_bytes;
  row.iterations = p.iterations;
  row.warmup = p.warmup;
  row.note = "same bytes as our frame";
  Histogram rtt;
  CpuUsage usage;
  const Status s = bare_tcp_samples(p, poll, rtt, &usage, progress);
  row.usage = usage;
  if (!s) return failed(row, s.message());
  row.rtt = LatencySummary::from(rtt);
  return row;
}

Row memcpy_floor(std::size_t chunk_bytes, uint64_t copies, Progress& progress) {
  Row row;
  row.kind = RowKind::kFloor;
  row.metric = Metric::kThroughput;
  row.key = "floor.memcpy";
  row.label = "floor: memcpy, one core, into a 4 MiB ring";
  row.size_bytes = row.wire_bytes = chunk_bytes;
  row.iterations = copies;
  row.note = "the copy a sender makes; upper bound for streaming";
  if (chunk_bytes == 0) return failed(row, "nothing to copy with a 0-byte payload");
  const std::size_t slots = std::max<std::size_t>(kMemcpyRingBytes / chunk_bytes, 1);
  std::vector<std::byte> source(chunk_bytes, std::byte{0x3C});
  std::vector<std::byte> ring(slots * chunk_bytes, std::byte{0});  // touched: no page faults while timed
  progress.begin("floor: memcpy", copies);
  for (std::size_t i = 0; i < slots; ++i) std::memcpy(ring.data() + i * chunk_bytes, source.data(), chunk_bytes);
  const CpuMeter meter;
  const uint64_t start_ns = monotonic_ns();
  for (uint64_t i = 0; i < copies; ++i) {
    std::byte* slot = ring.data() + (i % slots) * chunk_bytes;
    std::memcpy(slot, source.data(), chunk_bytes);
    asm volatile("" : : "r"(slot) : "memory");  // the copy must happen
    if ((i & 4095) == 0) progress.update(i);
  }
  row.throughput = Throughput{copies, chunk_bytes, monotonic_ns() - start_ns, 0};
  row.usage = meter.read();
  return row;
}

}  // namespace fjord::bench
