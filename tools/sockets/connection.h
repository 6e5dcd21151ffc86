// One accelerated TCP connection: the byte stream in each direction on an
// SHM ring (the SHM transporter's segment and rings), the kernel socket kept
// as the life line and the doorbell (internal header of libfjord-sockets).
//
// The connecting side creates the segment and writes ring 0; the accepting
// side attaches and writes ring 1. Once both ends agreed, no application
// byte crosses the kernel connection: a byte arriving there is a doorbell
// (the peer woke a poll/epoll sleeper), and end of file or a reset there
// means the peer process is gone.
//
// Wake-ups: a reader with an empty ring and a writer with a full one spin
// (FJORD_SOCKETS_SPIN_US), then announce a sleep on their wake-up word
// (fjord/shm/wakeup.h): kFutex inside a blocking call (the peer calls
// futex_wake), kEventFd inside poll/select/epoll (the peer sends a doorbell
// byte on the kernel socket, which is in the caller's poll set).
//
// Threads: any number; a read mutex and a write mutex serialise each
// direction (a ring has one producer and one consumer at a time). Hot path:
// receive() and send() make no system call while the peer keeps up.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "fjord/base/status.h"
#include "fjord/shm/spsc_ring.h"
#include "fjord/shm/wakeup.h"
#include "shm_segment.h"

namespace fjord::sockets {

// The library's own shared words, in the segment's first page after the
// SHM transporter's SegmentHeader (which holds the rings' read indices, the
// readers' wake-up words and each side's "closed" word: no more bytes will
// be written, the reader's end of file).
struct SocketShared {
  uint64_t token[2] = {};            // from the hello: the acceptor checks it opened the right segment
  shm::WakeupWord writer_wakeup[2];  // the writer of ring i waits for space
  // Side i will read no more (closed): the other side's writes fail with EPIPE.
  alignas(kCacheLineBytes) std::atomic<uint32_t> reader_gone[2] = {};
  // Processes holding side i (fork adds one); the last close ends the side.
  alignas(kCacheLineBytes) std::atomic<uint32_t> processes[2] = {};
};
inline constexpr std::size_t kSocketSharedOffset = 2048;
static_assert(sizeof(shm::SegmentHeader) <= kSocketSharedOffset);
static_assert(kSocketSharedOffset + sizeof(SocketShared) <= 4096, "must fit the header page");

// What readiness a poll/epoll caller may see (POLLIN/POLLOUT/... bits).
struct Readiness {
  bool readable = false;     // data, end of file or an error: a read will not block
  bool writable = false;     // space, or an error: a write will not block
  bool peer_closed = false;  // the peer will write no more (POLLRDHUP)
  bool error = false;        // the peer process is gone (POLLERR/POLLHUP)
};

class Connection {
 public:
  // Connecting side: a fresh segment whose memfd stays open until the
  // acceptor has attached (drop_memfd()).
  static Result<std::unique_ptr<Connection>> create(int tcp_fd, std::size_t ring_bytes, const uint64_t token[2]);
  // Accepting side: attaches to the connecting process's segment.
  static Result<std::unique_ptr<Connection>> attach(int tcp_fd, UniqueFd memfd, std::size_t ring_bytes,
                                                    const uint64_t token[2]);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  int memfd() const { return segment_.memfd(); }
  void drop_memfd() { segment_.close_memfd(); }
  uint64_t id() const { return id_; }
  int tcp_fd() const { return tcp_fd_.load(std::memory_order_relaxed); }
  // The descriptor used for doorbells was closed; another one of the
  // process's descriptors for this connection takes over.
  void set_tcp_fd(int fd) { tcp_fd_.store(fd, std::memory_order_relaxed); }

  // Both return bytes moved, or -errno (EAGAIN, EPIPE, ECONNRESET); receive
  // returns 0 at end of file. Flags: MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL,
  // MSG_NOSIGNAL. `descriptor_nonblocking` is the descriptor's O_NONBLOCK.
  ssize_t receive(const iovec* iov, int iov_count, int flags, bool descriptor_nonblocking);
  ssize_t send(const iovec* iov, int iov_count, int flags, bool descriptor_nonblocking);

  // shutdown(): SHUT_RD, SHUT_WR or SHUT_RDWR.
  void shutdown(int how);
  // The last descriptor of this process is closing: ends this side if no
  // other process holds it. The caller then closes the kernel socket.
  void close_side();
  // fork(): the child holds this side too.
  void add_process() { shared_->processes[side_].fetch_add(1, std::memory_order_relaxed); }
  void remove_process() { shared_->processes[side_].fetch_sub(1, std::memory_order_relaxed); }

  // Bytes a read would return at once (at least; FIONREAD).
  std::size_t readable_bytes();
  Readiness readiness();
  // Asks the peer for a doorbell on the next byte (read) or space (write),
  // for a poll/epoll sleep; cancel after waking. Re-check readiness() after
  // arming: the Dekker protocol of fjord/shm/wakeup.h.
  void arm_doorbells(bool read, bool write);
  void disarm_doorbells(bool read, bool write);
  // Reads and drops doorbell bytes; notes end of file or a reset.
  void drain_doorbells();

  // The descriptor's O_NONBLOCK (shared by its dups, as the kernel's is).
  std::atomic<bool> nonblocking{false};
  // SO_RCVTIMEO / SO_SNDTIMEO of the socket (0: wait forever); a blocking
  // call that waited this long returns what it moved, or EAGAIN.
  std::atomic<uint64_t> receive_timeout_ns{0};
  std::atomic<uint64_t> send_timeout_ns{0};
  // This process's descriptors for the connection (dup adds one).
  std::atomic<int> descriptors{1};
  // Edge-triggered epoll: set when a call returned EAGAIN, cleared when
  // epoll reported the edge.
  std::atomic<bool> read_edge{true};
  std::atomic<bool> write_edge{true};

 private:
  Connection(int tcp_fd, shm::Side side, shm::Segment segment);
  ssize_t receive_now(const iovec* iov, int iov_count, int flags);
  ssize_t send_now(const iovec* iov, int iov_count);
  ssize_t empty_ring_result();
  ssize_t write_refused(int flags);
  void wait(shm::WakeupWord& word, bool for_read, uint64_t spin_until_ns, uint64_t deadline_ns);
  void wake(shm::WakeupWord& word);
  void wake_local(shm::WakeupWord& word);
  void look_at_kernel_socket();
  bool peer_gone() const { return tcp_gone_.load(std::memory_order_acquire); }

  std::atomic<int> tcp_fd_;
  shm::Side side_;
  shm::Side peer_;
  uint64_t id_;
  shm::Segment segment_;
  SocketShared* shared_;
  std::mutex read_mutex_;
  std::mutex write_mutex_;
  shm::SpscRingProducer producer_;
  shm::SpscRingConsumer consumer_;
  std::atomic<bool> shut_read_{false};
  std::atomic<bool> shut_write_{false};
  std::atomic<bool> tcp_gone_{false};
  std::atomic<bool> doorbells_armed_{false};  // poll/epoll asked the peer for doorbells
  uint64_t last_look_ns_ = 0;                 // under read_mutex_
};

}  // namespace fjord::sockets
