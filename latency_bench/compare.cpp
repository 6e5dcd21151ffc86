#include "compare.h"

#include <algorithm>

#include "fjord/base/assert.h"

namespace fjord::bench {
namespace {

struct TargetSpec {
  const char* text;
  const char* transporter;
  const char* ours_key;
  const char* floor_key;
  double limit;
  bool higher_is_better;
  bool strict;
  uint64_t only_size;  // 0: any message size
};

// The targets, each relative to a floor or peer tool of the same run.
// Latency targets compare RTT medians; the streaming target compares
// payload GB/s.
constexpr TargetSpec kTargets[] = {
    {"shm RTT p50, busy-poll <= 1.5x the 2-process mailbox", "shm", "fjord.shm.busy", "floor.mailbox", 1.5, false,
     false, 0},
    {"shm RTT p50, busy-poll < UCX posix (one-way x2)", "shm", "fjord.shm.busy", "peer.ucx_posix", 1.0, false, true, 0},
    {"tcp RTT p50, busy-poll <= 1.1x bare non-blocking TCP", "tcp", "fjord.tcp.busy", "floor.bare_tcp_busy", 1.1, false,
     false, 0},
    {"tcp RTT p50, sleeping <= 1.1x sockperf ping-pong --tcp", "tcp", "fjord.tcp.sleep", "peer.sockperf_tcp", 1.1,
     false, false, 0},
    {"shm streaming 4096 B >= 50% of one core's memcpy", "shm", "fjord.shm.stream", "floor.memcpy", 0.5, true, false,
     4096},
};

const Row* find_row(const std::vector<Row>& rows, const char* key) {
  for (const Row& row : rows)
    if (row.key == key) return &row;
  return nullptr;
}

bool measured(const Row& row) { return row.outcome == Outcome::kMeasured && (row.rtt || row.throughput); }

std::string not_measured_reason(const Row& row) {
  std::string text = row.label + ": " + outcome_name(row.outcome);
  if (!row.reason.empty()) text += " (" + row.reason + ")";
  return text;
}

double figure(const Row& row, bool throughput) {
  return throughput ? row.throughput->payload_gb_per_s() : static_cast<double>(row.rtt->p50_ns);
}

// Fills evaluated/reason/figures of `check` from the rows.
void evaluate(const TargetSpec& spec, const std::vector<Row>& rows, std::span<const std::string> built_in,
              TargetCheck& check) {
  const Row* ours = find_row(rows, spec.ours_key);
  const Row* floor = find_row(rows, spec.floor_key);
  if (!ours) {
    const bool built = std::find(built_in.begin(), built_in.end(), spec.transporter) != built_in.end();
    check.reason = built ? std::string("this run has no ") + spec.ours_key + " row"
                         : std::string(spec.transporter) + " is not built into this program";
  } else if (!measured(*ours)) {
    check.reason = not_measured_reason(*ours);
  } else if (spec.only_size != 0 && ours->size_bytes != spec.only_size) {
    check.reason = "the target is for " + std::to_string(spec.only_size) + " B messages; this run used " +
                   std::to_string(ours->size_bytes) + " B";
  } else if (!floor) {
    check.reason = std::string(spec.floor_key) + " was not measured in this run (add --compare)";
  } else if (!measured(*floor)) {
    check.reason = not_measured_reason(*floor);
  } else {
    check.evaluated = true;
    check.ours = figure(*ours, spec.higher_is_better);
    check.floor = figure(*floor, spec.higher_is_better);
    check.ratio = check.floor > 0 ? check.ours / check.floor : 0;
    if (spec.higher_is_better)
      check.met = check.ratio >= spec.limit;
    else
      check.met = spec.strict ? check.ratio < spec.limit : check.ratio <= spec.limit;
  }
}

constexpr const char* kBusyFloors[] = {"floor.mailbox", "floor.bare_tcp_busy", "peer.ucx_posix", "peer.ucx_tcp"};
constexpr const char* kSleepFloors[] = {"floor.bare_tcp_sleep", "peer.sockperf_tcp"};

}  // namespace

std::vector<std::string> comparison_keys(const ComparePlan& plan) {
  std::vector<std::string> keys;
  if (plan.busy_latency) keys.insert(keys.end(), std::begin(kBusyFloors), std::end(kBusyFloors));
  if (plan.sleep_latency) keys.insert(keys.end(), std::begin(kSleepFloors), std::end(kSleepFloors));
  if (plan.streaming) keys.emplace_back("floor.memcpy");
  return keys;
}

std::vector<std::string> floors_judging(const std::string& fjord_key) {
  std::vector<std::string> keys;
  for (const TargetSpec& spec : kTargets)
    if (fjord_key == spec.ours_key) keys.emplace_back(spec.floor_key);
  return keys;
}

Row measure_comparison(const std::string& key, const ComparePlan& plan, Progress& progress) {
  Row row;
  if (key == "floor.mailbox") {
    row = mailbox_floor(plan.latency, progress);
  } else if (key == "floor.bare_tcp_busy") {
    row = bare_tcp_floor(plan.latency, PollMode::kBusy, progress);
  } else if (key == "floor.bare_tcp_sleep") {
    row = bare_tcp_floor(plan.latency, PollMode::kSleep, progress);
  } else if (key == "floor.memcpy") {
    row = memcpy_floor(plan.stream_payload_bytes, plan.stream_copies, progress);
  } else if (key == "peer.sockperf_tcp") {
    progress.begin("peer: sockperf", 1);
    row = sockperf_peer(plan.peers);
  } else {
    FJORD_ASSERT_MSG(key == "peer.ucx_posix" || key == "peer.ucx_tcp", "unknown comparison");
    progress.begin(key, 1);
    row = ucx_peer(plan.peers, key == "peer.ucx_posix" ? "posix" : "tcp");
  }
  progress.clear();
  return row;
}

std::vector<Row> measure_comparisons(const ComparePlan& plan, Progress& progress) {
  std::vector<Row> rows;
  for (const std::string& key : comparison_keys(plan)) rows.push_back(measure_comparison(key, plan, progress));
  return rows;
}

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows, bool every_target,
                                          std::span<const std::string> built_in) {
  std::vector<TargetCheck> checks;
  for (const TargetSpec& spec : kTargets) {
    if (!every_target && !find_row(rows, spec.ours_key)) continue;
    TargetCheck check;
    check.text = spec.text;
    check.limit = spec.limit;
    check.higher_is_better = spec.higher_is_better;
    check.strict = spec.strict;
    evaluate(spec, rows, built_in, check);
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace fjord::bench
