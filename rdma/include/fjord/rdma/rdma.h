// The RDMA transporter: InfiniBand / RoCE / iWARP verbs, RC queue pairs set
// up with librdmacm by IP address and port, each message written straight
// into the peer's receive ring with RDMA WRITE. docs/rdma.md has the design,
// the ring protocol and the [rdma] parameters.
//
// Programs call register_rdma_transporter() once at start-up; everything else
// goes through the registry and the Transporter contract. The rest of this
// header is for tests and tools: per-link verbs counters, a fault injector
// that puts a link's queue pair into the error state, and a delay that makes
// listeners slow to answer (the seams where faults enter; production code
// never calls them).
//
// Threads: register_rdma_transporter() at start-up; link_info() from any
// thread (relaxed counters); inject_qp_error() and delay_handshake_replies()
// from any thread. Not hot path.
#pragma once

#include <cstdint>
#include <string>

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"
#include "fjord/transport/transporter.h"

namespace fjord::rdma {

Status register_rdma_transporter(transport::TransporterRegistry& registry);

// What one link's verbs resources look like and what its data path did.
struct LinkInfo {
  std::string device;       // "rxe0"
  uint8_t port = 0;         // device port the connection uses
  std::string where;        // "device rxe0 port 1 GID[1] ::ffff:10.11.12.1"
  bool iwarp = false;       // iWARP: no immediate data, so a wake-up is a SEND after the WRITE
  uint32_t ring_bytes = 0;  // receive ring per direction (the send ring mirrors the peer's)
  uint32_t queue_depth = 0;
  uint32_t max_inline_bytes = 0;  // what the queue pair granted
  uint64_t data_writes = 0;       // RDMA WRITE work requests carrying frames
  uint64_t inline_writes = 0;     // ... of which were posted IBV_SEND_INLINE
  uint64_t signaled = 0;          // work requests posted IBV_SEND_SIGNALED
  uint64_t posted = 0;            // all send work requests
  uint64_t credit_writes = 0;     // credit updates written to the peer
  uint64_t send_queue_full = 0;   // flushes that found no send-queue slot or no receive credit
  uint64_t wakeups = 0;           // records that also raised a completion to wake a sleeping peer
  uint32_t hello_repeats = 0;     // client, iWARP: hellos sent again at set-up (each took a peer receive)
};

// The link's info, or kInvalidArgument if `t` is not an RDMA transporter.
Result<LinkInfo> link_info(const transport::Transporter& t);

// Test seam: moves the link's queue pair to IBV_QPS_ERR, as a device or
// transport fault would. The link then goes down on its next poll.
Status inject_qp_error(transport::Transporter& t);

// Test seam: every rdma listener of this process waits `delay_ns` between a
// client's hello and its handshake reply, as a loaded server would (0, the
// default: no wait). On iWARP the client repeats its hello meanwhile.
void delay_handshake_replies(uint64_t delay_ns);

}  // namespace fjord::rdma
