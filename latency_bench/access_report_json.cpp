// format_access_json(): the access report as one JSON object (schema in
// access_report.h and docs/latency_bench.md). Times in microseconds.
#include "access_report.h"
#include "json.h"

namespace fjord::bench {
namespace {

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

void write_usage(JsonWriter& w, const CpuUsage& u) {
  w.key("on_cpu");
  w.begin_object();
  w.key("share");
  w.value(u.on_cpu_share());
  w.field("involuntary_switches", u.involuntary_switches);
  w.field("wall_ns", u.wall_ns);
  w.field("cpu_ns", u.cpu_ns);
  w.end_object();
}

void write_conditions(JsonWriter& w, const AccessConditions& c) {
  w.begin_object();
  w.field("title", c.title);
  w.field("rows", c.rows);
  w.field("row_bytes", uint64_t{c.row_bytes});
  w.field("batch", uint64_t{c.batch});
  w.field("iterations", c.iterations);
  w.field("warmup", c.warmup);
  w.field("full_scans", c.full_scans);
  w.field("poll", c.poll);
  w.key("cpus");
  w.begin_array();
  for (int cpu : c.cpus) w.value(cpu);
  w.end_array();
  w.field("node", c.node);
  w.field("node_layout", c.node_layout);
  w.field("config", c.config);
  w.key("node_schedule");
  write_schedule_json(w, c.node_schedule);
  w.end_object();
}

void write_cell(JsonWriter& w, const AccessCell& c) {
  w.begin_object();
  w.field("transporter", c.transporter);
  w.field("access", access_method_key(c.method));
  w.field("label", access_method_label(c.method));
  w.field("batch", c.rows_per_sample);
  w.field("rows_per_sample", c.rows_per_sample);
  w.field("status", outcome_name(c.outcome));
  if (!c.reason.empty()) w.field("reason", c.reason);
  w.field("samples", c.samples);
  w.field("rows", c.rows);
  if (c.outcome == Outcome::kMeasured) {
    w.key("us_per_row");
    write_latency_us_json(w, c.per_row_ns);
    write_usage(w, c.usage);
  }
  const ReferenceFigure reference = reference_figure(c.method);
  w.key("reference_us_per_row");
  if (reference.known) {
    w.begin_object();
    w.field("source", kReferenceSource);
    w.key("tcp");
    w.value(reference.tcp_us);
    w.key("sci");
    w.value(reference.sci_us);
    w.end_object();
  } else {
    w.null();
  }
  w.end_object();
}

void write_transporters(JsonWriter& w, const std::vector<TransporterColumn>& columns) {
  w.begin_array();
  for (const TransporterColumn& t : columns) {
    w.begin_object();
    w.field("transporter", t.name);
    w.field("status", outcome_name(t.outcome));
    if (!t.reason.empty()) w.field("reason", t.reason);
    if (t.api_node != kNoNode) w.field("api_node", uint64_t{t.api_node});
    if (!t.link.empty()) w.field("link", t.link);
    w.end_object();
  }
  w.end_array();
}

void write_comparisons(JsonWriter& w, const std::vector<ComparisonRow>& rows) {
  w.begin_array();
  for (const ComparisonRow& c : rows) {
    w.begin_object();
    w.field("name", c.key);
    w.field("label", c.label);
    w.field("beside", c.beside);
    w.field("unit", c.unit);
    w.field("batch", c.rows_per_sample);
    w.field("status", outcome_name(c.outcome));
    if (!c.reason.empty()) w.field("reason", c.reason);
    w.field("samples", c.samples);
    if (c.outcome == Outcome::kMeasured) {
      w.key(c.unit == "rtt" ? "rtt_us" : "us_per_row");
      write_latency_us_json(w, c.per_row_ns);
    }
    w.end_object();
  }
  w.end_array();
}

void write_memory(JsonWriter& w, const MemoryFigure& m) {
  w.begin_object();
  w.key("measured");
  w.value(m.measured);
  if (!m.measured) {
    w.field("reason", m.reason);
  } else {
    w.field("rows", m.rows);
    w.field("row_bytes", uint64_t{m.row_bytes});
    w.field("pages_before", m.pages_before);
    w.field("pages_after", m.pages_after);
    w.field("page_bytes", m.page_bytes);
    w.field("bytes_used", m.bytes_used());
    w.field("payload_bytes", m.payload_bytes());
    w.key("ratio");
    w.value(m.ratio());
  }
  w.end_object();
}

void write_load(JsonWriter& w, const LoadFigure& l) {
  w.begin_object();
  w.field("rows", l.rows);
  w.field("elapsed_ns", l.elapsed_ns);
  w.field("rows_per_transaction", uint64_t{l.rows_per_transaction});
  w.field("transporter", l.transporter);
  w.end_object();
}

}  // namespace

void write_latency_us_json(JsonWriter& w, const LatencySummary& ns) {
  w.begin_object();
  w.key("p50");
  w.value(us(ns.p50_ns));
  w.key("p99");
  w.value(us(ns.p99_ns));
  w.key("p999");
  w.value(us(ns.p999_ns));
  w.key("max");
  w.value(us(ns.max_ns));
  w.key("min");
  w.value(us(ns.min_ns));
  w.key("mean");
  w.value(ns.mean_ns / 1000.0);
  w.key("count");
  w.value(ns.count);
  w.end_object();
}

void write_schedule_json(JsonWriter& w, const ScheduleShare& s) {
  if (!s.known) {
    w.null();
    return;
  }
  w.begin_object();
  w.key("on_cpu_per_s");
  w.value(s.on_cpu);
  w.key("waiting_per_s");
  w.value(s.waiting);
  w.end_object();
}

void write_run_target_json(JsonWriter& w, const RunTarget& t) {
  w.begin_object();
  w.field("target", t.text);
  w.key("evaluated");
  w.value(t.evaluated);
  if (!t.evaluated) {
    w.field("reason", t.reason);
  } else {
    w.key("ours");
    w.value(t.ours);
    w.key("limit");
    w.value(t.limit);
    w.field("unit", t.unit);
    w.field("basis", t.basis);
    if (!t.host.empty()) w.field("host", t.host);
    w.key("higher_is_better");
    w.value(t.higher_is_better);
    w.key("met");
    w.value(t.met);
  }
  w.end_object();
}

void write_targets_and_notes_json(JsonWriter& w, const std::vector<RunTarget>& targets,
                                  const std::vector<std::string>& notes) {
  w.key("targets");
  w.begin_array();
  for (const RunTarget& t : targets) write_run_target_json(w, t);
  w.end_array();
  w.key("notes");
  w.begin_array();
  for (const std::string& note : notes) w.value(note);
  w.end_array();
}

std::string format_access_json(const AccessReport& r) {
  JsonWriter w;
  w.begin_object();
  w.field("mode", "access");
  w.key("conditions");
  write_conditions(w, r.conditions);
  w.key("machine");
  write_machine_json(w, r.machine);
  w.key("transporters");
  write_transporters(w, r.transporters);
  w.key("results");
  w.begin_array();
  for (const AccessCell& c : r.cells) write_cell(w, c);
  w.end_array();
  w.key("compare");
  write_comparisons(w, r.compare);
  w.key("memory");
  write_memory(w, r.memory);
  w.key("load");
  write_load(w, r.load);
  write_targets_and_notes_json(w, r.targets, r.notes);
  w.end_object();
  return w.text() + "\n";
}

}  // namespace fjord::bench
