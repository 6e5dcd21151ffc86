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
// A set-up with steps before its request (TCP's TLS handshake, then the
// request read through TLS) waits here the same way, through all of them:
// the listener gives its entry a PendingSetup, which moves it on without
// blocking whenever PendingHandshakes would look for a plain request, and
// it counts as silent (closed to make room at a bound) until its request is
// all there. One deadline covers the whole set-up.
//
// Thread: the listener's (whoever calls its accept()). Slow path: allocates
// (the entries, a count per source).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fjord/base/fd.h"
#include "fjord/transport/cluster_key.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

// The steps of a waiting connection's set-up that come before its request,
// run by the listener (TCP: the TLS handshake, then the request decrypted).
// PendingHandshakes calls advance() wherever it looks for a plain request,
// on the listener's thread; it takes only what the socket holds and never
// waits. Destroying it leaves the connection's descriptor to its Entry.
class PendingSetup {
 public:
  enum class Progress : uint8_t {
    kWantRead,   // waits for the peer's bytes; the socket is drained (an edge comes with more)
    kWantWrite,  // waits for room to send
    kReady,      // the request is all there, or the set-up failed: the listener takes it on (and says why)
  };
  virtual ~PendingSetup() = default;
  virtual Progress advance() = 0;
};

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
    // The steps before the request, or nullptr when the plain request is
    // all that is waited for.
    std::unique_ptr<PendingSetup> setup;
    bool watching_write = false;  // PendingHandshakes' own: the epoll set waits for room to send too
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
  // A connection whose whole handshake request is waiting (its setup
  // kReady), or whose peer failed or left, taken out of the set; nullopt if
  // none. Closes (and logs) those past their deadline first. Also takes
  // what the epoll set says is ready, so that the set is not left readable
  // with nothing to do; and leaves it readable while another connection is
  // ready (the caller takes one a call).
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
  std::size_t oldest_silent(const std::string& source);
  // Whether entry `e`'s request is all there (or its peer failed or left):
  // moves its setup on first, and has the epoll set watch for what it
  // waits for.
  bool request_waiting(Entry& e);
  void watch(Entry& e, bool write);
  // The source with the most waiting connections.
  std::string busiest_source() const;
  // Closes entry i to make room, counted in the flood log.
  void evict(std::size_t i, const std::string& why, DeadlineNs now);
  // Entry i out of the set (the last one moves into its slot).
  Entry take(std::size_t i);
  void expire(DeadlineNs now);
  // Sets the timer to the earliest deadline (off when none waits), or to
  // fire at once: `at_once` when a ready connection is left for the next
  // take_ready().
  void arm_timer(bool at_once = false);
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
