// A sweep's report: the table, the JSON and the gnuplot script (sweep.h).
#include <algorithm>
#include <cstdio>

#include "json.h"
#include "sweep.h"

namespace fjord::bench {
namespace {

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f%%", share * 100);
  return text;
}

std::string load_text(double load) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", load);
  return text;
}

std::string padded(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

// Wide enough for "PARAM=VALUE" and two spaces.
std::size_t value_width(const SweepReport& r) {
  std::size_t widest = 0;
  for (const SweepRow& row : r.rows_measured) widest = std::max(widest, row.value.size());
  return r.param.size() + 1 + widest + 2;
}

std::string cpu_text(const ScheduleShare& s) {
  if (!s.known) return "?";
  char text[48];
  std::snprintf(text, sizeof text, "%.2f (waited %.2f)", s.on_cpu, s.waiting);
  return text;
}

std::string header(const SweepReport& r) {
  std::string out = "latency_bench access --sweep " + r.param +
                    ": serial pk read, insert and update, microseconds "
                    "per operation, the data node started afresh for each value\n";
  out += "rows " + std::to_string(r.rows) + " of " + std::to_string(r.row_bytes) + " B, " +
         std::to_string(r.iterations) + " samples per row after " + std::to_string(r.warmup) + " of warm-up, poll " +
         r.poll + ", cpus " + cpu_list_text(r.cpus) + ", load average " + load_text(r.machine.load_start) + " -> " +
         load_text(r.machine.load_end) + "\n";
  if (!r.node_params.empty()) {
    out += "fixed for every value:";
    for (const std::string& p : r.node_params) out += " " + p;
    out += "\n";
  }
  return out;
}

std::string row_lines(const SweepReport& r, const SweepRow& row) {
  std::string out;
  if (row.outcome == Outcome::kFailed && row.methods.empty())
    return padded(r.param + "=" + row.value, value_width(r)) + padded(row.transporter, 8) + "failed: " + row.reason +
           "\n";
  for (const SweepMethod& m : row.methods) {
    out += padded(r.param + "=" + row.value, value_width(r)) + padded(row.transporter, 8) +
           padded(access_method_label(m.method), 20) + padded(format_us(m.latency.p50_ns), 10) +
           padded(format_us(m.latency.p99_ns), 10) + padded(format_us(m.latency.p999_ns), 10) +
           padded(percent(m.over_share), 16) + cpu_text(row.node_cpu);
    if (m.outcome != Outcome::kMeasured) out += "  failed: " + m.reason;
    out += "\n";
  }
  return out;
}

void write_method(JsonWriter& w, const SweepMethod& m) {
  w.key(access_method_key(m.method));
  w.begin_object();
  w.field("status", m.outcome == Outcome::kMeasured ? "measured" : "failed");
  if (!m.reason.empty()) w.field("reason", m.reason);
  w.field("samples", m.latency.count);
  w.field("p50_us", static_cast<double>(m.latency.p50_ns) / 1000.0);
  w.field("p99_us", static_cast<double>(m.latency.p99_ns) / 1000.0);
  w.field("p999_us", static_cast<double>(m.latency.p999_ns) / 1000.0);
  w.field("max_us", static_cast<double>(m.latency.max_ns) / 1000.0);
  w.field("over_share", m.over_share);
  w.end_object();
}

void write_row(JsonWriter& w, const SweepRow& row) {
  w.begin_object();
  w.field("value", row.value);
  w.field("transporter", row.transporter);
  w.field("status", row.outcome == Outcome::kMeasured ? "measured" : "failed");
  if (!row.reason.empty()) w.field("reason", row.reason);
  w.key("node_cpu");
  w.begin_object();
  if (row.node_cpu.known) {
    w.field("on_cpu", row.node_cpu.on_cpu);
    w.field("waiting", row.node_cpu.waiting);
  }
  w.end_object();
  for (const SweepMethod& m : row.methods) write_method(w, m);
  w.field("node_layout", row.node_layout);
  w.end_object();
}

void write_conditions(JsonWriter& w, const SweepReport& r) {
  w.key("sweep");
  w.begin_object();
  w.field("param", r.param);
  w.key("node_params");
  w.begin_array();
  for (const std::string& p : r.node_params) w.value(p);
  w.end_array();
  w.field("over_us", static_cast<double>(r.over_ns) / 1000.0);
  w.end_object();
  w.key("conditions");
  w.begin_object();
  w.field("rows", r.rows);
  w.field("row_bytes", uint64_t{r.row_bytes});
  w.field("iterations", r.iterations);
  w.field("warmup", r.warmup);
  w.field("poll", r.poll);
  w.field("cpus", cpu_list_text(r.cpus));
  w.end_object();
}

// gnuplot's single-quoted strings: '' stands for one quote.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// One data block per row and method: "latency_us share" lines.
std::string data_blocks(const SweepReport& r) {
  std::string out;
  for (std::size_t i = 0; i < r.rows_measured.size(); ++i)
    for (std::size_t m = 0; m < r.rows_measured[i].methods.size(); ++m) {
      const std::vector<uint64_t>& q = r.rows_measured[i].methods[m].quantile_ns;
      out += "$d" + std::to_string(i) + "_" + std::to_string(m) + " << EOD\n";
      for (std::size_t k = 0; k < q.size(); ++k) {
        char line[64];
        std::snprintf(line, sizeof line, "%.3f %.4f\n", std::max(static_cast<double>(q[k]) / 1000.0, 0.001),
                      static_cast<double>(k) / static_cast<double>(q.size() - 1));
        out += line;
      }
      out += "EOD\n";
    }
  return out;
}

std::vector<std::string> transporters_of(const SweepReport& r) {
  std::vector<std::string> out;
  for (const SweepRow& row : r.rows_measured)
    if (!row.methods.empty() && std::find(out.begin(), out.end(), row.transporter) == out.end())
      out.push_back(row.transporter);
  return out;
}

// One panel: `method` over `transporter`, a line per value.
std::string panel(const SweepReport& r, std::size_t method, const std::string& transporter) {
  std::string s = "set title " +
                  quoted(std::string(access_method_label(kSweepMethods[method])) + " over " + transporter) + "\nplot ";
  bool first = true;
  for (std::size_t i = 0; i < r.rows_measured.size(); ++i) {
    const SweepRow& row = r.rows_measured[i];
    if (row.transporter != transporter || row.methods.size() <= method) continue;
    s += std::string(first ? "" : ", ") + "$d" + std::to_string(i) + "_" + std::to_string(method) +
         " using 1:2 with lines lw 2 title " + quoted(r.param + "=" + row.value);
    first = false;
  }
  return s + (first ? "NaN notitle" : "") + "\n";
}

}  // namespace

std::string format_sweep_table(const SweepReport& r) {
  std::string out = header(r) + "\n";
  out += padded("value", value_width(r)) + padded("link", 8) + padded("row", 20) + padded("p50", 10) +
         padded("p99", 10) + padded("p99.9", 10) + padded("over " + format_us(r.over_ns) + " us", 16) +
         "node CPU-s per s\n";
  for (const SweepRow& row : r.rows_measured) out += row_lines(r, row);
  out += "\nnode layout for each value (the node's own description):\n";
  std::string last;
  for (const SweepRow& row : r.rows_measured) {
    if (row.value == last || row.node_layout.empty()) continue;
    last = row.value;
    out += r.param + "=" + row.value + ":\n" + row.node_layout;
    if (!row.node_layout.empty() && row.node_layout.back() != '\n') out += "\n";
  }
  return out;
}

std::string format_sweep_json(const SweepReport& r) {
  JsonWriter w;
  w.begin_object();
  write_conditions(w, r);
  w.key("machine");
  write_machine_json(w, r.machine);
  w.key("rows");
  w.begin_array();
  for (const SweepRow& row : r.rows_measured) write_row(w, row);
  w.end_array();
  w.end_object();
  return w.text() + "\n";
}

std::string sweep_plot_script(const SweepReport& r, const std::string& output_path) {
  const std::vector<std::string> links = transporters_of(r);
  const std::size_t columns = kSweepMethods.size();
  const std::size_t panels_high = std::max<std::size_t>(links.size(), 1);
  const bool svg = output_path.size() > 4 && output_path.compare(output_path.size() - 4, 4, ".svg") == 0;
  const std::string size = std::to_string(420 * columns) + "," + std::to_string(360 * panels_high);
  std::string s = "# generated by latency_bench access --sweep --plot\n";
  s += svg ? "set terminal svg size " + size + " dynamic font 'sans,11'\n"
           : "set terminal pngcairo size " + size + " font 'sans,10'\n";
  s += "set output " + quoted(output_path) + "\n";
  s += data_blocks(r);
  s += "set multiplot layout " + std::to_string(panels_high) + "," + std::to_string(columns) + " title " +
       quoted("latency distribution per value of " + r.param + " (share of operations at or below)") + "\n";
  s += "set logscale x\nset grid\nset xlabel 'microseconds (log scale)'\nset ylabel 'share of operations'\n";
  s += "set yrange [0:1]\nset key bottom right\n";
  for (const std::string& link : links)
    for (std::size_t m = 0; m < columns; ++m) s += panel(r, m, link);
  return s + "unset multiplot\n";
}

}  // namespace fjord::bench
