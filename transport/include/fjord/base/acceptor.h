// Acceptor: takes waiting connections off a non-blocking listen socket, and
// keeps a spare file descriptor for when the process has run out of them.
//
// Out of descriptors (EMFILE, or ENFILE for the whole system), accept()
// fails and the connection stays in the listen queue, so the socket stays
// readable: a poller that waits on it (the data node's connection thread
// waits on every listener and its control socket) wakes at once, fails
// again, and spins, logging each time, while the peer waits for nothing.
// The Acceptor instead closes its spare, accepts the connection on the
// freed descriptor and closes it at once (the peer sees its connection
// closed and can retry), and opens the spare again: the queue drains and
// the socket goes quiet. (The same idea as libev's and libuv's reserve
// descriptor.)
//
// Thread: whoever owns the listen socket. Slow path.
#pragma once

#include <sys/socket.h>

#include <string>

#include "fjord/base/fd.h"

namespace fjord {

class Acceptor {
 public:
  // `what` names the socket in the log ("tcp listener on 127.0.0.1:11860").
  explicit Acceptor(std::string what);

  // The next waiting connection, made non-blocking and close-on-exec, or
  // an invalid fd when none is waiting or accept() failed (logged; the
  // caller looks again at its next wake-up). Out of descriptors, waiting
  // connections are shed (each logged) until none is left. `from` and
  // `from_len` as for accept4(), or null.
  UniqueFd take(int listen_fd, sockaddr* from = nullptr, socklen_t* from_len = nullptr);

 private:
  std::string what_;
  UniqueFd spare_;
};

}  // namespace fjord
