#include "access_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace fjord::bench {
namespace {

constexpr int kMethodWidth = 32;
constexpr int kCellWidth = 21;

std::string method_row_label(AccessMethod method, uint64_t rows_per_sample) {
  std::string label = access_method_label(method);
  if (method != AccessMethod::kSerialPk && method != AccessMethod::kSerialUk)
    label += " (" + std::to_string(rows_per_sample) + (rows_per_sample == 1 ? " row)" : " rows)");
  return label;
}

std::string reference_text(double us) { return printf_string("%.0f", us); }
constexpr int kReferenceWidth = 12;  // "NDB 2004 TCP"

std::string cell_text(const AccessCell* cell) {
  if (!cell) return "-";
  if (cell->outcome != Outcome::kMeasured) return outcome_name(cell->outcome);
  return format_us(cell->per_row_ns.p50_ns) + " / " + format_us(cell->per_row_ns.p99_ns);
}

std::string header_lines(const AccessReport& r) {
  const AccessConditions& c = r.conditions;
  std::string out = c.title + "\n";
  out += "data node: " + c.node + "\n";
  out += "conditions: " + std::to_string(c.rows) + " rows of " + std::to_string(c.row_bytes) + " bytes; batches of " +
         std::to_string(c.batch) + "; " + std::to_string(c.iterations) + " samples per method after " +
         std::to_string(c.warmup) + " discarded (full scan: " + std::to_string(c.full_scans) + " after 1); API poll " +
         c.poll + "; ";
  if (c.cpus.size() == 2)
    out += "this program on CPU " + std::to_string(c.cpus[0]) + ", the data node started here on CPU " +
           std::to_string(c.cpus[1]) + "\n";
  else
    out += "this program not pinned\n";
  out += format_machine_lines(r.machine);
  out += node_schedule_line(c.node_schedule);
  if (!c.node_layout.empty()) {
    out += "\n";
    std::size_t start = 0;
    while (start < c.node_layout.size()) {
      const std::size_t end = c.node_layout.find('\n', start);
      out += "  " + c.node_layout.substr(start, end - start) + "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return out;
}

std::string main_table(const AccessReport& r) {
  std::vector<const TransporterColumn*> measured;
  for (const TransporterColumn& t : r.transporters)
    if (t.outcome == Outcome::kMeasured) measured.push_back(&t);
  std::string out = printf_string("\n%-*s", kMethodWidth, "us per row, p50 / p99");
  for (const TransporterColumn* t : measured) out += printf_string(" %*s", kCellWidth, t->name.c_str());
  out += printf_string(" %*s %*s\n", kReferenceWidth, "NDB 2004 TCP", kReferenceWidth, "NDB 2004 SCI");
  for (AccessMethod method : kAccessMethods) {
    uint64_t rows = rows_per_sample(method, r.conditions.batch, r.conditions.rows);
    std::string line = printf_string("%-*s", kMethodWidth, method_row_label(method, rows).c_str());
    for (const TransporterColumn* t : measured)
      line += printf_string(" %*s", kCellWidth, cell_text(r.cell(t->name, method)).c_str());
    const ReferenceFigure reference = reference_figure(method);
    line += printf_string(" %*s %*s", kReferenceWidth, reference.known ? reference_text(reference.tcp_us).c_str() : "-",
                          kReferenceWidth, reference.known ? reference_text(reference.sci_us).c_str() : "-");
    out += line + "\n";
  }
  std::string on_cpu = printf_string("%-*s", kMethodWidth, "lowest on-cpu share of a row");
  for (const TransporterColumn* t : measured) {
    double lowest = 1.0;
    for (const AccessCell& c : r.cells)
      if (c.transporter == t->name && c.outcome == Outcome::kMeasured)
        lowest = std::min(lowest, c.usage.on_cpu_share());
    on_cpu += printf_string(" %*s", kCellWidth, printf_string("%.0f%%", 100.0 * lowest).c_str());
  }
  return out + on_cpu + "\n";
}

std::string problems(const AccessReport& r) {
  std::string out;
  for (const TransporterColumn& t : r.transporters)
    if (t.outcome != Outcome::kMeasured) out += "  " + t.name + ": " + outcome_name(t.outcome) + ": " + t.reason + "\n";
  for (const AccessCell& c : r.cells)
    if (c.outcome != Outcome::kMeasured)
      out += "  " + c.transporter + " " + access_method_key(c.method) + ": " + outcome_name(c.outcome) + ": " +
             c.reason + "\n";
  return out.empty() ? out : "\nnot measured:\n" + out;
}

std::string beside_label(const std::string& key) {
  for (AccessMethod m : kAccessMethods)
    if (key == access_method_key(m)) return access_method_label(m);
  return "";
}

std::string comparisons(const AccessReport& r) {
  if (r.compare.empty()) return "";
  std::string out =
      printf_string("\n%-62s %9s %9s  %s\n", "compare, measured in this run (us per row)", "p50", "p99", "beside");
  for (const ComparisonRow& c : r.compare) {
    std::string label = c.label;
    if (label.size() > 62) label = label.substr(0, 61) + "~";
    std::string line = printf_string("  %-60s", label.c_str());
    if (c.outcome != Outcome::kMeasured) {
      out += line + "   " + outcome_name(c.outcome) + ": " + c.reason + "\n";
      continue;
    }
    std::string beside_text = beside_label(c.beside);
    if (c.unit == "rtt") beside_text += beside_text.empty() ? "round trip" : " (a round trip)";
    out += line + printf_string(" %9s %9s  %s\n", format_us(c.per_row_ns.p50_ns).c_str(),
                                format_us(c.per_row_ns.p99_ns).c_str(), beside_text.c_str());
  }
  return out;
}

std::string memory_and_load(const AccessReport& r) {
  std::string out = "\n";
  const MemoryFigure& m = r.memory;
  if (m.measured)
    out += printf_string(
        "memory: DataMemory pages in use %llu before the table, %llu after loading: %.1f MB for %llu rows of %u "
        "bytes (%.1f MB of row data) = %.2fx the payload, indexes included\n",
        static_cast<unsigned long long>(m.pages_before), static_cast<unsigned long long>(m.pages_after),
        static_cast<double>(m.bytes_used()) / 1e6, static_cast<unsigned long long>(m.rows), m.row_bytes,
        static_cast<double>(m.payload_bytes()) / 1e6, m.ratio());
  else
    out += "memory: not measured: " + m.reason + "\n";
  if (r.load.rows != 0)
    out += printf_string(
        "load: %llu rows in %.2f s (%.0f rows/s), %u inserts per transaction, over %s\n",
        static_cast<unsigned long long>(r.load.rows), static_cast<double>(r.load.elapsed_ns) / 1e9,
        static_cast<double>(r.load.rows) * 1e9 / static_cast<double>(std::max<uint64_t>(r.load.elapsed_ns, 1)),
        r.load.rows_per_transaction, r.load.transporter.c_str());
  return out;
}

}  // namespace

std::string node_schedule_line(const ScheduleShare& s) {
  if (!s.known) return "";
  return printf_string(
      "data node while measuring: its threads ran %.2f CPU-seconds per second and waited %.2f s/s for a CPU%s\n",
      s.on_cpu, s.waiting, s.waiting > 0.05 ? " (other work held its CPU: tails measure that too)" : "");
}

RunTarget evaluated_target(std::string text, double ours, double limit, std::string unit, std::string basis,
                           bool higher_is_better) {
  RunTarget t;
  t.text = std::move(text);
  t.evaluated = true;
  t.ours = ours;
  t.limit = limit;
  t.unit = std::move(unit);
  t.basis = std::move(basis);
  t.higher_is_better = higher_is_better;
  t.met = higher_is_better ? ours >= limit : ours <= limit;
  return t;
}

RunTarget unevaluated_target(std::string text, std::string reason) {
  RunTarget t;
  t.text = std::move(text);
  t.reason = std::move(reason);
  return t;
}

const AccessCell* AccessReport::cell(const std::string& transporter, AccessMethod method) const {
  for (const AccessCell& c : cells)
    if (c.transporter == transporter && c.method == method) return &c;
  return nullptr;
}

std::string format_target_line(const RunTarget& t) {
  std::string line = printf_string("  %-62s", t.text.c_str());
  if (!t.evaluated) return line + " not evaluated: " + t.reason + "\n";
  line += printf_string(" %.3f %s, limit %s %.3f", t.ours, t.unit.c_str(), t.higher_is_better ? ">=" : "<=", t.limit);
  if (!t.basis.empty()) line += " (" + t.basis + ")";
  line += t.met ? "  met\n" : "  MISSED\n";
  if (!t.host.empty()) line += printf_string("  %-62s host: %s\n", "", t.host.c_str());
  return line;
}

std::string format_access_table(const AccessReport& r) {
  std::string out = header_lines(r);
  out += main_table(r);
  out += problems(r);
  out += comparisons(r);
  out += memory_and_load(r);
  if (!r.targets.empty()) {
    out += "\ntargets, evaluated on this run:\n";
    for (const RunTarget& t : r.targets) out += format_target_line(t);
  }
  if (!r.notes.empty()) {
    out += "\nnotes:\n";
    for (const std::string& note : r.notes) out += "  " + note + "\n";
  }
  return out;
}

}  // namespace fjord::bench
