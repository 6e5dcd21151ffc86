// format_access_json(): the access report as one JSON object (schema in
// access_report.h and docs/benchmarks.md). Times in microseconds.
#include "access_report.h"
#include "json.h"

namespace fjord::bench {
namespace {

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

void field(JsonWriter& w, const char* name, const std::string& text) {
  w.key(name);
  w.value(text);
}

void field(JsonWriter& w, const char* name, uint64_t number) {
  w.key(name);
  w.value(number);
}

void write_usage(JsonWriter& w, const CpuUsage& u) {
  w.key("on_cpu");
  w.begin_object();
  w.key("share");
  w.value(u.on_cpu_share());
  field(w, "involuntary_switches", u.involuntary_switches);
  field(w, "wall_ns", u.wall_ns);
  field(w, "cpu_ns", u.cpu_ns);
  w.end_object();
}

void write_conditions(JsonWriter& w, const AccessConditions& c) {
  w.begin_object();
  field(w, "title", c.title);
  field(w, "rows", c.rows);
  field(w, "row_bytes", uint64_t{c.row_bytes});
  field(w, "batch", uint64_t{c.batch});
  field(w, "iterations", c.iterations);
  field(w, "warmup", c.warmup);
  field(w, "full_scans", c.full_scans);
  field(w, "poll", c.poll);
  w.key("cpus");
  w.begin_array();
  for (int cpu : c.cpus) w.value(cpu);
  w.end_array();
  field(w, "node", c.node);
  field(w, "node_layout", c.node_layout);
  field(w, "config", c.config);
  w.key("node_schedule");
  write_schedule_json(w, c.node_schedule);
  w.end_object();
}

void write_cell(JsonWriter& w, const AccessCell& c) {
  w.begin_object();
  field(w, "transporter", c.transporter);
  field(w, "access", access_method_key(c.method));
  field(w, "label", access_method_label(c.method));
  field(w, "batch", c.rows_per_sample);
  field(w, "rows_per_sample", c.rows_per_sample);
  field(w, "status", outcome_name(c.outcome));
  if (!c.reason.empty()) field(w, "reason", c.reason);
  field(w, "samples", c.samples);
  field(w, "rows", c.rows);
  if (c.outcome == Outcome::kMeasured) {
    w.key("us_per_row");
    write_latency_us_json(w, c.per_row_ns);
    write_usage(w, c.usage);
  }
  const SeedFigure seed = seed_figure(c.method);
  w.key("seed_us_per_row");
  if (seed.known) {
    w.begin_object();
    w.key("tcp");
    w.value(seed.tcp_us);
    w.key("sci");
    w.value(seed.sci_us);
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
    field(w, "transporter", t.name);
    field(w, "status", outcome_name(t.outcome));
    if (!t.reason.empty()) field(w, "reason", t.reason);
    if (t.api_node != kNoNode) field(w, "api_node", uint64_t{t.api_node});
    if (!t.link.empty()) field(w, "link", t.link);
    w.end_object();
  }
  w.end_array();
}

void write_comparisons(JsonWriter& w, const std::vector<ComparisonRow>& rows) {
  w.begin_array();
  for (const ComparisonRow& c : rows) {
    w.begin_object();
    field(w, "name", c.key);
    field(w, "label", c.label);
    field(w, "beside", c.beside);
    field(w, "unit", c.unit);
    field(w, "batch", c.rows_per_sample);
    field(w, "status", outcome_name(c.outcome));
    if (!c.reason.empty()) field(w, "reason", c.reason);
    field(w, "samples", c.samples);
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
    field(w, "reason", m.reason);
  } else {
    field(w, "rows", m.rows);
    field(w, "row_bytes", uint64_t{m.row_bytes});
    field(w, "pages_before", m.pages_before);
    field(w, "pages_after", m.pages_after);
    field(w, "page_bytes", m.page_bytes);
    field(w, "bytes_used", m.bytes_used());
    field(w, "payload_bytes", m.payload_bytes());
    w.key("ratio");
    w.value(m.ratio());
  }
  w.end_object();
}

void write_load(JsonWriter& w, const LoadFigure& l) {
  w.begin_object();
  field(w, "rows", l.rows);
  field(w, "elapsed_ns", l.elapsed_ns);
  field(w, "rows_per_transaction", uint64_t{l.rows_per_transaction});
  field(w, "transporter", l.transporter);
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
  field(w, "target", t.text);
  w.key("evaluated");
  w.value(t.evaluated);
  if (!t.evaluated) {
    field(w, "reason", t.reason);
  } else {
    w.key("ours");
    w.value(t.ours);
    w.key("limit");
    w.value(t.limit);
    field(w, "unit", t.unit);
    field(w, "basis", t.basis);
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
  field(w, "mode", "access");
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
