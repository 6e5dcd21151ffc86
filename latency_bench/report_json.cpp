// format_json(): the Report as one JSON object (schema in report.h and
// docs/latency_bench.md).
#include "json.h"
#include "report.h"

namespace fjord::bench {
namespace {

const char* kind_name(RowKind kind) {
  switch (kind) {
    case RowKind::kFjord: return "fjord";
    case RowKind::kFloor: return "floor";
    case RowKind::kPeer: return "peer";
  }
  return "?";
}

void write_rtt(JsonWriter& w, const LatencySummary& r) {
  w.begin_object();
  w.key("p50");
  w.value(r.p50_ns);
  for (const auto& [name, ns] : {std::pair{"p99", r.p99_ns}, std::pair{"p999", r.p999_ns}, std::pair{"max", r.max_ns},
                                 std::pair{"min", r.min_ns}}) {
    w.key(name);
    if (r.tail_known)
      w.value(ns);
    else
      w.null();  // the peer tool does not print it
  }
  w.key("mean");
  w.value(r.mean_ns);
  w.key("count");
  w.value(r.count);
  w.end_object();
}

void write_throughput(JsonWriter& w, const Throughput& t) {
  w.begin_object();
  w.key("messages");
  w.value(t.messages);
  w.key("elapsed_ns");
  w.value(t.elapsed_ns);
  w.key("messages_per_s");
  w.value(t.messages_per_s());
  w.key("gb_per_s");
  w.value(t.payload_gb_per_s());
  w.key("full_waits");
  w.value(t.full_waits);
  w.end_object();
}

void write_cpus(JsonWriter& w, const std::vector<int>& cpus) {
  w.begin_array();
  for (int cpu : cpus) w.value(cpu);
  w.end_array();
}

// The fields of one row, inside an object the caller opened.
void write_row_fields(JsonWriter& w, const Row& row) {
  w.field("name", row.key);
  w.field("kind", kind_name(row.kind));
  w.field("label", row.label);
  if (row.kind == RowKind::kFjord) w.field("transporter", row.transporter);
  w.field("metric", row.metric == Metric::kRoundTrip ? "rtt" : "stream");
  w.key("size");
  w.value(row.size_bytes);
  w.key("wire_bytes");
  w.value(row.wire_bytes);
  w.key("iterations");
  w.value(row.iterations);
  w.key("warmup");
  w.value(row.warmup);
  w.key("poll");
  if (row.poll.empty())
    w.null();
  else
    w.value(row.poll);
  w.field("status", outcome_name(row.outcome));
  if (!row.reason.empty()) w.field("reason", row.reason);
  if (!row.note.empty()) w.field("note", row.note);
  if (row.rtt) {
    w.key("rtt_ns");
    write_rtt(w, *row.rtt);
  }
  if (row.throughput) {
    w.key("stream");
    write_throughput(w, *row.throughput);
  }
  if (row.usage) {
    w.key("on_cpu");
    w.begin_object();
    w.key("share");
    w.value(row.usage->on_cpu_share());
    w.key("involuntary_switches");
    w.value(row.usage->involuntary_switches);
    w.key("wall_ns");
    w.value(row.usage->wall_ns);
    w.key("cpu_ns");
    w.value(row.usage->cpu_ns);
    w.end_object();
  }
}

}  // namespace

void write_machine_json(JsonWriter& w, const MachineFacts& m) {
  w.begin_object();
  w.key("online_cpus");
  w.value(m.online_cpus);
  w.field("allowed_cpus", m.allowed_cpus);
  w.field("cpu_model", m.cpu_model);
  w.field("kernel", m.kernel);
  w.field("clocksource", m.clocksource);
  w.key("clock_read_ns");
  w.value(m.clock_read_ns);
  w.key("load_before");
  w.value(m.load_start);
  w.key("load_after");
  w.value(m.load_end);
  w.key("under_load");
  w.value(measured_under_load(m));
  w.field("started_utc", m.started_utc);
  w.end_object();
}

namespace {

void write_target(JsonWriter& w, const TargetCheck& t) {
  w.begin_object();
  w.field("target", t.text);
  w.key("evaluated");
  w.value(t.evaluated);
  if (!t.evaluated) {
    w.field("reason", t.reason);
  } else {
    w.key("ours");
    w.value(t.ours);
    w.key("floor");
    w.value(t.floor);
    w.key("ratio");
    w.value(t.ratio);
    w.key("limit");
    w.value(t.limit);
    w.key("met");
    w.value(t.met);
  }
  w.end_object();
}

void write_rows(JsonWriter& w, const Report& report, bool fjord_rows) {
  w.begin_array();
  for (const Row& row : report.rows) {
    if ((row.kind == RowKind::kFjord) != fjord_rows) continue;
    w.begin_object();
    write_row_fields(w, row);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

std::string format_json(const Report& report) {
  JsonWriter w;
  w.begin_object();
  w.field("mode", report.conditions.command);
  const Row* single = nullptr;
  if (report.conditions.command != "all")
    for (const Row& row : report.rows)
      if (row.kind == RowKind::kFjord && !single) single = &row;
  if (single) write_row_fields(w, *single);
  w.key("cpus");
  write_cpus(w, report.conditions.cpus);
  if (report.conditions.batch != 0) {
    w.key("batch");
    w.value(static_cast<uint64_t>(report.conditions.batch));
  }
  w.field("where", report.conditions.where);
  w.key("machine");
  write_machine_json(w, report.machine);
  if (!single) {
    w.key("runs");
    write_rows(w, report, true);
  }
  w.key("compare");
  write_rows(w, report, false);
  w.key("targets");
  w.begin_array();
  for (const TargetCheck& t : report.targets) write_target(w, t);
  w.end_array();
  w.key("notes");
  w.begin_array();
  for (const std::string& note : report.notes) w.value(note);
  w.end_array();
  w.end_object();
  return w.text() + "\n";
}

}  // namespace fjord::bench
