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
// Bounded under a flood: at most kMaxPendingPerSource connections of one
// source (an IP address, a uid) and kMaxPending in all wait. A new
// connection past either bound closes the oldest waiting connection of its
// own source, or of the source holding the most, whose request has not
// arrived, so a peer that connects and sends its request at once always
// gets a slot, however many silent or trickling connections others keep
// opening; and the listener never holds more than kMaxPending descriptors
// for them. Closures are logged in one line a second under a flood
// (FloodLog).
//
// Thread: the listener's (whoever calls its accept()). Slow path: allocates
// (the entries, a count per source).
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
  // Waiting connections in all, and of one source. A source holds at most
  // an eighth of the slots, so at least eight sources always share them.
  static constexpr std::size_t kMaxPending = 256;
  static constexpr std::size_t kMaxPendingPerSource = 32;
  static_assert(kMaxPendingPerSource * 8 <= kMaxPending);

  struct Entry {
    UniqueFd conn;
    std::string peer;         // for log lines and errors: "10.0.0.7:40122", "pid 12 (uid 0) on @name"
    uint32_t endpoint = 0;    // which of the listener's sockets took it
    DeadlineNs deadline = 0;  // the set-up's own (setup_deadline)
    std::string source;       // what the bounds count by: "10.0.0.7", "uid 1000"
    AuthNonce greeting{};     // the nonce the listener's greeting sent (handshake.h)
  };

  // `epoll_fd`: the listener's epoll set, which it returns as fd().
  // `what`: how the log names the listener ("tcp listener on 127.0.0.1:11860").
  PendingHandshakes(int epoll_fd, std::string what);

  // Keeps an accepted connection until its request is in, first closing
  // those past their deadline and, at a bound, the oldest silent one of the
  // busiest source (see above). False (and the connection closed, the log
  // saying why) only when every waiting connection of the full bound has
  // its request in.
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
  // Waiting connections of `source`.
  std::size_t count_of(const std::string& source) const;

 private:
  // Rate-limited log of closed set-ups: the first closure of a quiet
  // second is logged in full at once; the others of that second are
  // counted and logged as one line ("N pending set-ups closed in the last
  // second, most from A") when it ends.
  class FloodLog {
   public:
    void closed(const std::string& what, const std::string& source, const std::string& line, DeadlineNs now);
    // Logs the count of the second that has ended, if any.
    void flush(const std::string& what, DeadlineNs now);
    // When the summary of the current second is due (UINT64_MAX if none).
    DeadlineNs due() const;

   private:
    DeadlineNs window_end_ = 0;                                 // the second that began with a closure logged in full
    std::size_t counted_ = 0;                                   // closures since then, not yet logged
    std::vector<std::pair<std::string, std::size_t>> sources_;  // of those, per source (at most 16 named)
  };

  // Makes a slot for a connection from `source` (the bounds above); false
  // when none can be made.
  bool make_room(const std::string& source, DeadlineNs now);
  // The oldest waiting connection of `source` ("" = any) whose request is
  // not all there; npos if none.
  std::size_t oldest_silent(const std::string& source) const;
  // The source with the most waiting connections.
  std::string busiest_source() const;
  // Closes entry i to make room, counted in the flood log.
  void evict(std::size_t i, const std::string& why, DeadlineNs now);
  // Entry i out of the set (the last one moves into its slot).
  Entry take(std::size_t i);
  void expire(DeadlineNs now);
  // Sets the timer to the earliest deadline (off when none waits).
  void arm_timer();
  int epoll_fd_;
  std::string what_;
  std::vector<Entry> pending_;
  std::vector<std::pair<std::string, std::size_t>> sources_;  // waiting connections per source, none at 0
  FloodLog flood_log_;
  UniqueFd timer_;  // a timerfd in the epoll set
};

// Whether a whole handshake message with `magic` (handshake.h) is waiting
// on `fd`, read without taking it (MSG_PEEK); also true when what is there
// cannot be one or the peer failed or left (the handshake says which).
bool handshake_message_waiting(int fd, uint32_t magic);

}  // namespace fjord::transport
