// Peer tools measured in the same run: sockperf (TCP ping-pong, blocking
// receive) and ucx_perftest (tag_lat over UCX_TLS=posix shared memory and
// over tcp). Each is started by this program, its server on the peer CPU and
// its client on ours, on a free port; its output is parsed.
//
// What they print, and what we report:
//   sockperf ping-pong --full-rtt   round-trip percentiles in usec  -> RTT as is
//   ucx_perftest -v                 one-way median and mean in usec -> doubled
//
// A tool not on PATH gives a row with outcome kNotInstalled, never nothing.
// Slow path; the calling thread should already be pinned to the bench CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fjord/base/status.h"
#include "report.h"

namespace fjord::bench {

struct PeerParams {
  std::size_t message_bytes = 104;  // the same bytes as our frame
  uint64_t iterations = 20'000;     // ucx_perftest -n
  uint64_t warmup = 2'000;          // ucx_perftest -w
  uint32_t sockperf_seconds = 2;    // sockperf runs for a time (the first 0.4 s are its warm-up)
  int cpu_self = -1;
  int cpu_peer = -1;
  uint64_t timeout_ns = 30'000'000'000ULL;  // plus kPerIterationAllowanceNs per iteration
};

// A tool may take this long per round trip on a loaded machine before we
// give up on it (the whole run, not each round trip, is timed out).
inline constexpr uint64_t kPerIterationAllowanceNs = 1'000'000;

Row sockperf_peer(const PeerParams& params);
// tls: "posix" or "tcp".
Row ucx_peer(const PeerParams& params, std::string_view tls);

// Parsers, public for the tests. Values in ns.
// sockperf ping-pong --full-rtt output: the percentile lines and avg-latency.
Result<LatencySummary> parse_sockperf(std::string_view output);
// ucx_perftest -v output: the CSV header line and the line after it; the
// one-way figures are doubled into round trips (tail_known = false).
Result<LatencySummary> parse_ucx_csv(std::string_view output);

}  // namespace fjord::bench
