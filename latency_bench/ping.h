// Closed-loop ping-pong over one connected link: send one message, wait for
// its echo, record the round trip; a discarded warm-up first.
//
// The driver thread owns the transporter's send and receive sides while this
// runs. Hot path: the loop between warm-up and the last round trip reads the
// clock twice per round trip and allocates nothing (tests/latency_bench
// counts allocations).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fjord/base/histogram.h"
#include "fjord/base/status.h"
#include "fjord/transport/transporter.h"
#include "options.h"
#include "progress.h"

namespace fjord::bench {

struct PingParams {
  std::size_t payload_bytes = 64;
  uint64_t iterations = 1000;
  uint64_t warmup = 100;
  PollMode poll = PollMode::kBusy;
  uint64_t reply_timeout_ns = 10'000'000'000ULL;  // per round trip
};

// Records `iterations` round trips (ns) into `rtt` after `warmup` discarded
// ones. The peer must run serve_session(). Errors: the link went down, a
// reply did not come within reply_timeout_ns, or a reply was not the echo
// of what was sent.
Status run_ping(transport::Transporter& t, const PingParams& params, Histogram& rtt, Progress& progress);

}  // namespace fjord::bench
