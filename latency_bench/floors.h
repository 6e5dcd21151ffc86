// Floors: the least any transporter could cost on this machine, measured the
// same way as our own rows (per-round-trip clock reads into a Histogram,
// warm-up discarded, the echo process forked and pinned to the peer CPU).
//
//   mailbox    two processes ping-pong one cache line in shared memory, busy-poll
//   bare TCP   two processes ping-pong the same bytes over loopback TCP with
//              TCP_NODELAY: non-blocking recv in a loop (busy) or blocking recv (sleep)
//   memcpy     one core copying messages of the stream's size into a ring
//
// Slow path around hot loops; the calling thread is the measuring side and
// should already be pinned. Each function returns a Row whose outcome says
// whether it was measured (kFailed with the reason otherwise).
#pragma once

#include <cstddef>
#include <cstdint>

#include "options.h"
#include "progress.h"
#include "report.h"

namespace fjord::bench {

struct FloorParams {
  uint64_t iterations = 20'000;
  uint64_t warmup = 2'000;
  std::size_t wire_bytes = 104;  // bytes each way per round trip (bare TCP)
  int cpu_peer = -1;             // where the echo process runs
  uint64_t timeout_ns = 10'000'000'000ULL;
};

inline constexpr std::size_t kMemcpyRingBytes = 4u << 20;

Row mailbox_floor(const FloorParams& params, Progress& progress);
Row bare_tcp_floor(const FloorParams& params, PollMode poll, Progress& progress);
// The same ping-pong, its round trips added to `rtt` (an echo process of its
// own per call); `usage`, if given, gets this thread's CPU use meanwhile.
Status bare_tcp_samples(const FloorParams& params, PollMode poll, Histogram& rtt, CpuUsage* usage, Progress& progress);
// Copies `copies` chunks of chunk_bytes from one hot buffer into successive
// slots of a kMemcpyRingBytes ring.
Row memcpy_floor(std::size_t chunk_bytes, uint64_t copies, Progress& progress);

}  // namespace fjord::bench
