// What a throughput run found, and how it is printed (a table, or one JSON
// object). Slow path; pure functions of the report.
#pragma once

#include <string>
#include <vector>

#include "access_report.h"
#include "redis_peer.h"
#include "throughput.h"

namespace fjord::bench {

struct ThroughputConditions {
  std::string title;
  std::string transporter;
  std::string link;  // "[tcp] link 1-50"
  ThroughputPlan plan;
  bool one_api_node = false;  // every executor a session of one API node's cluster connection
  std::string poll;
  std::vector<int> cpus;  // {our threads, the data node started here}
  std::string node;       // description
  std::string node_layout;
  std::string config;
  uint32_t ldm_threads = 0;     // 0: not known (the node's layout did not say)
  ScheduleShare node_schedule;  // the node started here, during the run
  bool short_slices = false;    // executors got short time slices from the kernel
};

struct ExecutorRow {
  NodeId api_node = kNoNode;
  uint64_t operations = 0;
  double operations_per_s = 0;
  LatencySummary latency_ns;
  CpuUsage usage;
};

struct ThroughputReport {
  MachineFacts machine;
  ThroughputConditions conditions;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  uint64_t window_ns = 0;
  uint64_t transactions = 0, operations = 0, reads = 0, updates = 0, failures = 0;
  std::string first_failure;
  double transactions_per_s = 0, operations_per_s = 0;
  LatencySummary latency_ns;
  std::string latency_basis;  // "from the scheduled send time" / "from execute_async() to completion"
  uint64_t definer_full_waits = 0;
  LatencySummary definer_late_ns;  // open loop: the generator's own lateness, part of every latency
  std::vector<ExecutorRow> executors;
  bool redis_measured = false;  // --compare
  RedisRate redis;
  std::vector<RunTarget> targets;
  std::vector<std::string> notes;
};

// Fills the figures from a finished run.
void set_result(ThroughputReport& report, const ThroughputResult& result);

std::string format_throughput_table(const ThroughputReport& report);
// {"mode":"throughput", "conditions":{...}, "machine":{...}, "status", "transactions_per_s",
//  "rows_per_s", "operations", "transactions", "reads", "updates", "failures",
//  "latency_us":{...}, "latency_basis", "executors":[...], "redis":{...}, "targets":[...], "notes":[...]}
std::string format_throughput_json(const ThroughputReport& report);

}  // namespace fjord::bench
