// PendingHandshakes: the connections a stream listener (TCP, SHM's Unix
// socket) has accepted whose handshake request has not all arrived yet.
//
// A listener that read each request as it accepted the connection would
// wait on a peer that connects and says nothing (a port scan, a half-open
// connection, a stuck process) for the whole set-up budget, and every
// other node trying to connect would wait behind it. Instead the listener
// keeps accepted connections here, in its epoll set (edge-triggered, so a
// half-sent request does not keep the set readable), and runs the
// handshake on one only once its whole request is waiting (or its peer
// failed or left, which the handshake then reports), so reading it never
// blocks. A connection that sends no whole request within the set-up
// budget is closed when the listener next looks (any accept() call), and
// the log says from where. A timer in the same epoll set, armed for the
// earliest deadline, makes the set readable when one passes, so that a
// poller calls accept() then even if nothing else happens on the listener.
//
// Thread: the listener's (whoever calls its accept()). No allocation on
// the way through beyond the vector of at most kMaxPending entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fjord/base/fd.h"
#include "fjord/transport/cluster_key.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

class PendingHandshakes {
 public:
  // Connections waiting beyond this are refused (closed at once, logged).
  static constexpr std::size_t kMaxPending = 64;

  struct Entry {
    UniqueFd conn;
    std::string peer;         // for log lines and errors: "10.0.0.7:40122", "pid 12 (uid 0) on @name"
    uint32_t endpoint = 0;    // which of the listener's sockets took it
    DeadlineNs deadline = 0;  // the set-up's own (setup_deadline)
    AuthNonce greeting{};     // the nonce the listener's greeting sent (handshake.h)
  };

  // `epoll_fd`: the listener's epoll set, which it returns as fd().
  // `what`: how the log names the listener ("tcp listener on 127.0.0.1:11860").
  PendingHandshakes(int epoll_fd, std::string what);

  // Keeps an accepted connection until its request is in. False (and the
  // connection closed, the log saying why) when kMaxPending already wait
  // and none of them is past its deadline (those are closed first).
  bool add(Entry entry, DeadlineNs now);
  // A connection whose whole handshake request is waiting, or whose peer
  // failed or left, taken out of the set; nullopt if none. Closes (and logs)
  // those past their deadline first. Also takes what the epoll set says is
  // ready, so that the set is not left readable with nothing to do; and
  // re-arms the other connections that are ready, so that it is left
  // readable while one is (the caller takes one a call).
  std::optional<Entry> take_ready(DeadlineNs now);
  // The earliest deadline of a waiting connection (UINT64_MAX if none).
  DeadlineNs next_deadline() const;
  std::size_t size() const { return pending_.size(); }

 private:
  // Entry i out of the set (the last one moves into its slot).
  Entry take(std::size_t i);
  void expire(DeadlineNs now);
  // Sets the timer to the earliest deadline (off when none waits).
  void arm_timer();
  int epoll_fd_;
  std::string what_;
  std::vector<Entry> pending_;
  UniqueFd timer_;  // a timerfd in the epoll set
};

// Whether a whole handshake message with `magic` (handshake.h) is waiting
// on `fd`, read without taking it (MSG_PEEK); also true when what is there
// cannot be one or the peer failed or left (the handshake says which).
bool handshake_message_waiting(int fd, uint32_t magic);

}  // namespace fjord::transport
