// The descriptor table of libfjord-sockets.
#include "fd_table.h"

#include <unordered_set>

#include "fjord/base/assert.h"

namespace fjord::sockets {
namespace {

// Static storage: zero pages until a descriptor number is used.
FdEntry g_table[kMaxFds];

}  // namespace

FdEntry* fd_entry(int fd) { return fd >= 0 && fd < kMaxFds ? &g_table[fd] : nullptr; }

void install(int fd, Connection* c) {
  FJORD_ASSERT(fd >= 0);
  FJORD_ASSERT(fd < kMaxFds);
  // Release: pairs with the acquire in accelerated().
  Connection* previous = g_table[fd].connection.exchange(c, std::memory_order_acq_rel);
  FJORD_ASSERT_MSG(previous == nullptr, "a descriptor number in use was handed out again");
}

void release_fd(int fd) {
  FdEntry* e = fd_entry(fd);
  if (e == nullptr) return;
  e->pending.store(Pending::kNone, std::memory_order_relaxed);
  Connection* c = e->connection.exchange(nullptr, std::memory_order_acq_rel);
  if (c == nullptr) return;
  if (c->descriptors.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    c->close_side();
    delete c;
    return;
  }
  if (c->tcp_fd() != fd) return;
  for (int other = 0; other < kMaxFds; ++other) {
    if (g_table[other].connection.load(std::memory_order_acquire) == c) {
      c->set_tcp_fd(other);
      return;
    }
  }
}

void for_each_connection(void (*f)(Connection*)) {
  std::unordered_set<Connection*> seen;
  for (FdEntry& e : g_table) {
    Connection* c = e.connection.load(std::memory_order_acquire);
    if (c != nullptr && seen.insert(c).second) f(c);
  }
}

}  // namespace fjord::sockets
