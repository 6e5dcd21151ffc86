// `latency_bench access --sweep PARAM=V1,V2,...`: one data-node parameter
// varied over a list of values, the node started afresh for each (with the
// generated config plus PARAM=V and any --node-param lines), the access
// table loaded, and serial pk read, insert and update measured over each
// transporter. Per value and transporter: p50, p99, p99.9 of each of those
// rows, the share of samples slower than --over, the node's CPU use while
// they ran (/proc/PID/task/*/schedstat), and the node's thread layout as it
// describes it (which shows the parameter's effect). A plot draws each
// value's latency distribution.
//
// Slow path; the main thread (pinned like the access command's).
#pragma once

#include <string>
#include <vector>

#include "access_run.h"
#include "machine.h"
#include "options.h"
#include "report.h"

namespace fjord::bench {

// The access table's rows a sweep measures (the writes and reads NDB users
// time when they tune a node for latency).
inline constexpr std::array<AccessMethod, 3> kSweepMethods = {AccessMethod::kSerialPk, AccessMethod::kSerialInsert,
                                                              AccessMethod::kSerialUpdate};
// Points of each distribution kept for the plot (quantiles 0..1).
inline constexpr uint32_t kSweepQuantiles = 200;

struct SweepMethod {
  AccessMethod method = AccessMethod::kSerialPk;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  LatencySummary latency;  // per sample (one row each)
  double over_share = 0;   // of samples slower than the report's over_ns
  // quantile_ns[i]: the latency at quantile i / (kSweepQuantiles - 1).
  std::vector<uint64_t> quantile_ns;
};

struct SweepRow {
  std::string value;  // of the swept parameter
  std::string transporter;
  Outcome outcome = Outcome::kMeasured;  // kFailed: the node or the connection did not come up
  std::string reason;
  std::vector<SweepMethod> methods;  // in kSweepMethods order
  ScheduleShare node_cpu;            // CPU-seconds the node ran (and waited) per second of the rows
  std::string node_layout;           // the node's own description of its threads
};

struct SweepReport {
  std::string param;
  std::vector<std::string> node_params;  // fixed for every value
  uint64_t over_ns = 0;
  uint64_t rows = 0;
  uint32_t row_bytes = 0;
  uint64_t iterations = 0;
  uint64_t warmup = 0;
  std::string poll;
  std::vector<int> cpus;
  MachineFacts machine;
  std::vector<SweepRow> rows_measured;  // value-major, then transporter
};

// Share of the histogram's samples above `ns` (to the histogram's bucket
// resolution, under 1%).
double share_above(const Histogram& histogram, uint64_t ns);

// A table, one line per value, transporter and method; then each value's
// node layout.
std::string format_sweep_table(const SweepReport& report);
// {"sweep":{"param","values","node_params","over_us"}, "conditions":{...},
//  "machine":{...}, "rows":[{"value","transporter","status","reason",
//  "node_cpu":{on_cpu,waiting}, "<method key>":{p50_us,p99_us,p999_us,
//  over_share,samples,status}...}]}: one row per value and transporter.
std::string format_sweep_json(const SweepReport& report);
// gnuplot: one panel per method and transporter, the latency (log scale)
// against the share of samples at or below it, one line per value.
std::string sweep_plot_script(const SweepReport& report, const std::string& output_path);

// Runs the sweep (Options::sweep_param set). Exit code as commands.h says.
int run_sweep_command(const Options& options);

}  // namespace fjord::bench
