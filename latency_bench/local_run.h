// A run on this machine: listen on the link's server side, start our own
// peer process (this program again, with hidden --x-peer-* options, pinned to
// the peer CPU), accept it, ping or stream, say bye, reap it. Plus that peer
// process's own main.
//
// A medium the peer process cannot reach (its connect says kUnavailable, as
// sim's process-local rendezvous does) is measured with the peer as a thread
// of this process instead, pinned the same way; the row's note says so.
//
// Slow path around the hot loops of ping.h and stream.h; the caller's thread
// is the (pinned) measuring side.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench_link.h"
#include "options.h"
#include "progress.h"
#include "report.h"

namespace fjord::bench {

struct LocalPlan {
  LinkChoice link;
  PollMode poll = PollMode::kBusy;
  bool stream = false;
  std::size_t payload_bytes = 64;
  uint64_t iterations = 1000;
  uint64_t warmup = 100;
  uint32_t batch = 32;
  int cpu_peer = -1;
  uint64_t timeout_ns = 10'000'000'000ULL;
  bool verbose = false;  // the peer logs too
};

// The fjord row of one run: measured, or why not (kUnavailable when the
// transporter's probe() says it cannot run here, kFailed otherwise).
Row run_local(const LocalPlan& plan, Progress& progress);

// The parts run_local() is made of, for --client: the row's description,
// and the ping or stream over a connected link (fills row.rtt or
// row.throughput).
Row new_fjord_row(const LocalPlan& plan);
Status measure_on_link(const LocalPlan& plan, transport::Transporter& t, Row& row, Progress& progress);

// The key of a fjord row: "fjord.tcp.busy", "fjord.shm.stream".
std::string fjord_row_key(const std::string& transporter, PollMode poll, bool stream);

// main() of the peer process (Command::kPeer). Exit code.
int run_peer_process(const Options& options);

}  // namespace fjord::bench
