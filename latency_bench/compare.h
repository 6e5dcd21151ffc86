// --compare: which floors and peer tools a run is compared with, and the
// targets evaluated on the rows: each a limit on one of our rows relative to
// a floor or peer tool measured in the same run.
//
//   busy-poll round trips    mailbox, bare TCP (non-blocking), ucx posix, ucx tcp
//   sleeping round trips     bare TCP (blocking), sockperf ping-pong --tcp
//   streaming                one core's memcpy of the same message size
//
// Slow path; the calling thread is the (pinned) bench thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "floors.h"
#include "peers.h"
#include "progress.h"
#include "report.h"

namespace fjord::bench {

struct ComparePlan {
  bool busy_latency = false;
  bool sleep_latency = false;
  bool streaming = false;
  FloorParams latency;  // round trips, warm-up, wire bytes, peer CPU
  PeerParams peers;     // message bytes, CPUs
  std::size_t stream_payload_bytes = 4096;
  uint64_t stream_copies = 200'000;
};

// Every floor and peer of the plan, in display order.
std::vector<Row> measure_comparisons(const ComparePlan& plan, Progress& progress);

// The same one at a time, for runs that measure a floor right after the row
// it judges (a host's cross-core latency can drift between levels over
// seconds, so a ratio is only fair between neighbours in time).
std::vector<std::string> comparison_keys(const ComparePlan& plan);  // display order
Row measure_comparison(const std::string& key, const ComparePlan& plan, Progress& progress);
// The floors that targets compare with this fjord row ("fjord.shm.busy" ->
// mailbox, ucx posix), most important first.
std::vector<std::string> floors_judging(const std::string& fjord_key);

// The targets that concern the fjord rows present (every target when
// `every_target`, with the reason when one cannot be evaluated).
// `built_in` names the transporters of this program, for those reasons.
std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows, bool every_target,
                                          std::span<const std::string> built_in);

}  // namespace fjord::bench
