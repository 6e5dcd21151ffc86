// The per-process table of libfjord-sockets (internal header): for each
// descriptor number below kMaxFds, its accelerated connection (if any), the
// agreement bytes still to take off its kernel stream, and the holder of its
// listener advertisement. Fixed size, indexed by descriptor; reads are one
// atomic load (the fast path of every interposed call for a descriptor the
// library does not accelerate). Any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "agreement.h"
#include "connection.h"

namespace fjord::sockets {

inline constexpr int kMaxFds = 65536;  // descriptors at or above it stay on the kernel

struct FdEntry {
  std::atomic<Connection*> connection{nullptr};
  std::atomic<Pending> pending{Pending::kNone};
  std::atomic<int> advert{-1};  // the listener's advertisement holder
  // While Pending::kConnecting: the epoll set the socket was added to, and
  // how many sets (the agreement moves one registration, and declines for
  // more). Under the connecting thread's calls only.
  int connecting_epoll_fd = -1;
  int connecting_epoll_sets = 0;
  uint32_t connecting_events = 0;
  uint64_t connecting_data = 0;
};

FdEntry* fd_entry(int fd);  // null for a number outside the table

// Acquire pairs with the release in install(): the connection is complete
// before another thread finds it.
inline Connection* accelerated(int fd) {
  if (fd < 0 || fd >= kMaxFds) return nullptr;
  return fd_entry(fd)->connection.load(std::memory_order_acquire);
}

void install(int fd, Connection* c);
// Drops fd's reference; the connection's side ends with its last descriptor.
void release_fd(int fd);
// Calls f once for each connection of the process (fork).
void for_each_connection(void (*f)(Connection*));

}  // namespace fjord::sockets
