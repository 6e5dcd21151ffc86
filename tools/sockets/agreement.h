// The in-band agreement of libfjord-sockets (internal header): after
// connect()/accept() of a TCP stream socket, before any application byte,
// both ends decide over the kernel connection whether it moves to SHM.
//
//   connecting side                         accepting side
//   (only to a port a library listener
//    on this host advertises)
//   Hello  ---------------------------->    peeks; consumes it only when the
//                                           whole hello carries the magic;
//                                           checks the host identity, opens
//                                           the offered segment
//          <----------------------------    Answer: accept or decline
//   Confirm: commit or abort  --------->
//
// The connecting side always sends exactly one Confirm after its Hello:
// commit only after an accept, abort after a decline or when no answer
// came within FJORD_SOCKETS_CONNECT_WAIT_MS (then an answer that arrives
// later is dropped from the front of the stream). The accepting side waits
// FJORD_SOCKETS_ACCEPT_WAIT_MS for a hello in accept(); a hello that comes
// later is dropped from the front of the stream unanswered (and so is the
// abort after it). docs/sockets.md tells the whole protocol.
//
// Slow path: connection set-up only. Any thread.
#pragma once

#include <cstdint>
#include <memory>

#include "connection.h"

namespace fjord::sockets {

// What is still to be taken off the front of a kernel connection's incoming
// bytes (each only if its magic matches).
enum class Pending : uint8_t {
  kNone = 0,
  kMaybeHello = 1,    // accepting side: a hello may still come
  kStripAnswer = 2,   // connecting side: an answer may still come
  kStripConfirm = 3,  // accepting side: the connecting side's abort may still come
  kConnecting = 4,    // connecting side: a non-blocking connect; agreed once connected
  kAgreeing = 5,      // connecting side: one thread runs the agreement; the others wait
};

// Listening socket: makes this listener's port known to connecting
// processes of this network namespace (an abstract Unix socket). Returns
// the descriptor that holds the name, or -1.
int advertise_listener(int listen_fd);

// After a connect() that succeeded. Null: the connection stays on the kernel
// (`pending` says what may still arrive first).
std::unique_ptr<Connection> agree_as_connector(int fd, Pending* pending);
// After accept() on an advertised listener.
std::unique_ptr<Connection> agree_as_acceptor(int fd, Pending* pending);

// Takes pending agreement bytes off the front of a kernel connection before
// the application reads. Returns the new pending state; *would_block is set
// when a non-blocking socket must report EAGAIN.
Pending resolve_pending(int fd, Pending pending, bool nonblocking, bool* would_block);

}  // namespace fjord::sockets
