// What a run found, and how it is printed: a table for people, one JSON
// object for programs. Every row says what it measured (round trip or
// one-way doubled), under which conditions, or why it was not measured.
//
// Slow path; one thread; the formatters are pure functions of a Report (the
// tests feed them a fixed histogram).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fjord/base/histogram.h"
#include "machine.h"

namespace fjord::bench {

// printf into a std::string of whatever length it takes (report formatting).
__attribute__((format(printf, 1, 2))) std::string printf_string(const char* format, ...);

enum class Outcome : uint8_t {
  kMeasured,
  kNotInstalled,   // a peer tool is not on PATH
  kUnavailable,    // a transporter cannot run here (probe() says why)
  kFailed,         // it ran and failed; reason says how
  kNotApplicable,  // meaningless in this mode (reason says why)
};
const char* outcome_name(Outcome outcome) noexcept;

enum class RowKind : uint8_t { kFjord, kFloor, kPeer };
enum class Metric : uint8_t { kRoundTrip, kThroughput };

// Round-trip times in nanoseconds.
struct LatencySummary {
  uint64_t count = 0;
  uint64_t min_ns = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t p999_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns = 0;
  bool tail_known = true;  // false when a peer tool printed only a median and a mean

  static LatencySummary from(const Histogram& histogram);
};

struct Throughput {
  uint64_t messages = 0;
  uint64_t payload_bytes = 0;  // per message
  uint64_t elapsed_ns = 0;
  uint64_t full_waits = 0;  // times the sender found the link full
  double messages_per_s() const;
  double payload_gb_per_s() const;  // 1e9 bytes per second
};

struct Row {
  RowKind kind = RowKind::kFjord;
  Metric metric = Metric::kRoundTrip;
  std::string key;          // stable id: "fjord.tcp.busy", "fjord.shm.stream", "floor.mailbox", "peer.ucx_posix"
  std::string label;        // for people: "fjord tcp", "bare TCP ping-pong, non-blocking"
  std::string transporter;  // fjord rows only
  std::string poll;         // "busy", "sleep", or "" when it does not apply
  uint64_t size_bytes = 0;  // payload per message
  uint64_t wire_bytes = 0;  // bytes per message on the medium (our frame, or what the peer tool sent)
  uint64_t iterations = 0;  // measured round trips or messages
  uint64_t warmup = 0;
  Outcome outcome = Outcome::kMeasured;
  std::string reason;  // why it was not measured, or how it failed
  std::string note;    // how to read it: "ucx prints one-way: doubled"
  std::optional<LatencySummary> rtt;
  std::optional<Throughput> throughput;
  std::optional<CpuUsage> usage;  // of this process while it measured (not for peer tools)
};

// One target (compare.h), evaluated on this run's rows.
struct TargetCheck {
  std::string text;  // "shm RTT p50, busy-poll <= 1.5x the two-process mailbox"
  bool evaluated = false;
  std::string reason;  // when not evaluated
  double ours = 0;     // RTT p50 in ns, or GB/s
  double floor = 0;
  double ratio = 0;  // ours / floor
  double limit = 0;
  bool higher_is_better = false;
  bool strict = false;  // ours < limit x floor rather than <=
  bool met = false;
};

struct Conditions {
  std::string title;      // first line of the table: what ran
  std::string command;    // "ping", "stream", "all", "client"
  std::vector<int> cpus;  // {bench, peer}, or {self} for --client
  std::string where;      // "peer process started here" / "client of host:port"
  uint32_t batch = 0;     // streaming: frames per flush
};

struct Report {
  MachineFacts machine;
  Conditions conditions;
  std::vector<Row> rows;
  std::vector<TargetCheck> targets;
  std::vector<std::string> notes;
};

// The human table (ends with a newline).
std::string format_table(const Report& report);
// One JSON object (ends with a newline). A single run puts its fjord row's
// fields at the top level ("transporter", "size", "iterations", "poll",
// "cpus", "rtt_ns" or "stream"); "all" lists them under "runs". Floors and
// peers are under "compare", targets under "targets".
std::string format_json(const Report& report);

// "0.105", "14.210" (microseconds with three decimals) for tables.
std::string format_us(uint64_t ns);

// The machine's lines of a table (CPUs, kernel, clock, load) and its JSON
// object; shared by every command's report.
std::string format_machine_lines(const MachineFacts& machine);
class JsonWriter;
void write_machine_json(JsonWriter& w, const MachineFacts& machine);

}  // namespace fjord::bench
