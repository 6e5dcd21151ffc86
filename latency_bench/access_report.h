// What an access run found, and how it is printed: NDB's access-method table
// (access methods down, transporters across, µs per row p50 / p99, NDB
// 2004's TCP and SCI figures beside them), one JSON object, and a gnuplot
// script for --plot. Also the shared pieces of the throughput report:
// targets with absolute limits or limits derived from a comparison.
//
// Slow path; one thread; the formatters are pure functions of the report
// (tests feed them fixed figures).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "access_run.h"
#include "json.h"
#include "machine.h"
#include "report.h"

namespace fjord::bench {

// One (transporter, access method) figure.
struct AccessCell {
  std::string transporter;
  AccessMethod method = AccessMethod::kSerialPk;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  uint64_t rows_per_sample = 1;  // 1, K, or the table's rows (full scan)
  uint64_t samples = 0;
  uint64_t rows = 0;
  LatencySummary per_row_ns;  // of the per-row values, one per sample
  CpuUsage usage;
};

// A transporter column: measured, or why not.
struct TransporterColumn {
  std::string name;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  NodeId api_node = kNoNode;
  std::string link;  // "[shm] link 1-60"
};

// A comparison measured in the same run: redis-server, or a floor.
struct ComparisonRow {
  std::string key;                  // "redis.get.tcp", "redis.mget.unix", "floor.bare_tcp_busy"
  std::string label;                // "redis-server GET, TCP loopback, one client busy-polling"
  std::string beside;               // the access method key it compares with ("serial_pk"), or ""
  std::string unit = "us_per_row";  // or "rtt" for a floor's round trip
  uint64_t rows_per_sample = 1;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;
  uint64_t samples = 0;
  LatencySummary per_row_ns;  // per row, or per round trip for a floor
};

struct MemoryFigure {
  bool measured = false;
  std::string reason;
  uint64_t rows = 0;
  uint32_t row_bytes = 0;
  uint64_t pages_before = 0;  // DataMemory pages in use before the table was created
  uint64_t pages_after = 0;   // after it was loaded
  uint64_t page_bytes = 32768;
  uint64_t bytes_used() const { return (pages_after - pages_before) * page_bytes; }
  uint64_t payload_bytes() const { return rows * row_bytes; }
  double ratio() const {
    return payload_bytes() == 0 ? 0.0 : static_cast<double>(bytes_used()) / static_cast<double>(payload_bytes());
  }
};

struct LoadFigure {
  uint64_t rows = 0;
  uint64_t elapsed_ns = 0;
  uint32_t rows_per_transaction = 0;
  std::string transporter;
};

// A target, evaluated on this run: what ours measured against a limit that
// is absolute ("<= 2 us") or derived from a comparison ("bare TCP + 3 us").
struct RunTarget {
  std::string text;  // "serial pk read over shm, median round trip <= 2 us"
  bool evaluated = false;
  std::string reason;  // when not evaluated
  double ours = 0;
  double limit = 0;
  std::string unit;   // "us", "us/row", "M rows/s", "x payload"
  std::string basis;  // how the limit was derived: "bare TCP p50 13.204 us + 3 us"
  // The host's state while ours was measured, when this run measured it
  // ("cache-line mailbox p50 0.131 us before, 0.544 us after the shm rows").
  std::string host;
  bool higher_is_better = false;
  bool met = false;
};
// Sets met from ours, limit and the direction.
RunTarget evaluated_target(std::string text, double ours, double limit, std::string unit, std::string basis,
                           bool higher_is_better);
RunTarget unevaluated_target(std::string text, std::string reason);

struct AccessConditions {
  std::string title;
  uint64_t rows = 0;
  uint32_t row_bytes = 0;
  uint32_t batch = 0;
  uint64_t iterations = 0;
  uint64_t warmup = 0;
  uint64_t full_scans = 0;
  std::string poll;
  std::vector<int> cpus;        // {this program, the data node started here}
  std::string node;             // "fjord-datanode started here (generated config): single-threaded, ..."
  std::string node_layout;      // the node's own answer to "layout"
  std::string config;           // "generated" or the --config path
  ScheduleShare node_schedule;  // the node started here, while the methods ran
};

struct AccessReport {
  MachineFacts machine;
  AccessConditions conditions;
  std::vector<TransporterColumn> transporters;
  std::vector<AccessCell> cells;
  std::vector<ComparisonRow> compare;
  MemoryFigure memory;
  LoadFigure load;
  std::vector<RunTarget> targets;
  std::vector<std::string> notes;

  const AccessCell* cell(const std::string& transporter, AccessMethod method) const;
};

std::string format_access_table(const AccessReport& report);
// {"mode":"access", "conditions":{...}, "machine":{...}, "transporters":[...],
//  "results":[{"transporter","access","batch","rows_per_sample","samples","rows","status",
//              "us_per_row":{"p50","p99","p999","max","min","mean"},
//              "reference_us_per_row":{"source","tcp","sci"} or null}...],
//  "compare":[...], "memory":{...}, "load":{...}, "targets":[...], "notes":[...]}
std::string format_access_json(const AccessReport& report);

// A gnuplot script that draws µs per row (log scale) by access method:
// one bar per transporter at p50 with a whisker to p99, and NDB 2004's TCP
// and SCI figures as bars beside them; the data is inline. The terminal
// follows the file name (.png: pngcairo, .svg: svg).
std::string access_plot_script(const AccessReport& report, const std::string& output_path);
// Runs gnuplot on that script. kUnavailable when gnuplot is not installed.
Status write_access_plot(const AccessReport& report, const std::string& output_path);
// Runs gnuplot on `script` (which names its own output), within 30 s.
// kUnavailable when gnuplot is not installed.
Status run_gnuplot(const std::string& script);

// Shared with the throughput report.
std::string format_target_line(const RunTarget& target);
// "data node while measuring: ..." (empty when not known).
std::string node_schedule_line(const ScheduleShare& schedule);
void write_schedule_json(JsonWriter& w, const ScheduleShare& schedule);
void write_run_target_json(JsonWriter& w, const RunTarget& target);
// "targets": [...], "notes": [...] (the last two keys of both reports).
void write_targets_and_notes_json(JsonWriter& w, const std::vector<RunTarget>& targets,
                                  const std::vector<std::string>& notes);
// {"p50","p99","p999","max","min","mean"} in microseconds, from nanoseconds.
void write_latency_us_json(JsonWriter& w, const LatencySummary& ns);

}  // namespace fjord::bench
