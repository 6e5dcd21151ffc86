#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace fjord::bench {
namespace {

constexpr int kLabelWidth = 50;

std::string fit(const std::string& text, int width) {
  if (static_cast<int>(text.size()) <= width) return text;
  return text.substr(0, static_cast<std::size_t>(width - 1)) + "~";
}

std::string on_cpu(const Row& row) {
  if (!row.usage || row.usage->wall_ns == 0) return "-";
  return printf_string("%.0f%%", 100.0 * std::min(row.usage->on_cpu_share(), 1.0));
}

std::string row_start(const Row& row) {
  return printf_string("%-*s %-5s %6llu %6s", kLabelWidth, fit(row.label, kLabelWidth).c_str(),
                       row.poll.empty() ? "-" : row.poll.c_str(), static_cast<unsigned long long>(row.wire_bytes),
                       on_cpu(row).c_str());
}

std::string not_measured(const Row& row) {
  std::string text = std::string("   ") + outcome_name(row.outcome);
  if (!row.reason.empty()) text += ": " + row.reason;
  return text;
}

std::string latency_line(const Row& row) {
  std::string line = row_start(row);
  if (row.outcome != Outcome::kMeasured || !row.rtt) return line + not_measured(row) + "\n";
  const LatencySummary& r = *row.rtt;
  const auto tail = [&](uint64_t ns) { return r.tail_known ? format_us(ns) : std::string("-"); };
  line += printf_string(" %9s %9s %9s %10s %9s", format_us(r.p50_ns).c_str(), tail(r.p99_ns).c_str(),
                        tail(r.p999_ns).c_str(), tail(r.max_ns).c_str(),
                        format_us(static_cast<uint64_t>(std::llround(r.mean_ns))).c_str());
  if (!row.note.empty()) line += "  (" + row.note + ")";
  return line + "\n";
}

std::string throughput_line(const Row& row) {
  std::string line = row_start(row);
  if (row.outcome != Outcome::kMeasured || !row.throughput) return line + not_measured(row) + "\n";
  const Throughput& t = *row.throughput;
  line += printf_string(" %11.3f %12.2f %11llu", t.messages_per_s() / 1e6, t.payload_gb_per_s(),
                        static_cast<unsigned long long>(t.full_waits));
  if (!row.note.empty()) line += "  (" + row.note + ")";
  return line + "\n";
}

}  // namespace

std::string format_machine_lines(const MachineFacts& m) {
  std::string out;
  out += printf_string("machine: %d CPUs online (this process may use %s), %s, kernel %s\n", m.online_cpus,
                       m.allowed_cpus.c_str(), m.cpu_model.c_str(), m.kernel.c_str());
  out += printf_string("clock: CLOCK_MONOTONIC (clocksource %s), %llu ns per read, read twice per round trip\n",
                       m.clocksource.c_str(), static_cast<unsigned long long>(m.clock_read_ns));
  out += printf_string("load average %.2f before the run, %.2f after (includes this run's spinning); %s\n",
                       m.load_start, m.load_end,
                       measured_under_load(m) ? "MEASURED UNDER LOAD: other work shared the CPUs, read the ratios"
                                              : "the machine was otherwise quiet");
  return out;
}

namespace {

std::string conditions_line(const Conditions& c) {
  std::string out = "conditions: ";
  if (c.cpus.size() == 2)
    out += "this process on CPU " + std::to_string(c.cpus[0]) + ", peer process on CPU " + std::to_string(c.cpus[1]);
  else if (c.cpus.size() == 1)
    out += "this process on CPU " + std::to_string(c.cpus[0]);
  else
    out += "not pinned";
  if (!c.where.empty()) out += "; " + c.where;
  if (c.batch != 0) out += "; streaming packs up to " + std::to_string(c.batch) + " frames per flush";
  return out + "\n";
}

std::string target_line(const TargetCheck& t) {
  std::string line = printf_string("  %-58s", t.text.c_str());
  if (!t.evaluated) return line + " not evaluated: " + t.reason + "\n";
  if (t.higher_is_better)
    line += printf_string(" %.2f / %.2f GB/s = %.2f (limit >= %.2f)", t.ours, t.floor, t.ratio, t.limit);
  else
    line += printf_string(" %s / %s us = %.2fx (limit %s %.2fx)", format_us(static_cast<uint64_t>(t.ours)).c_str(),
                          format_us(static_cast<uint64_t>(t.floor)).c_str(), t.ratio, t.strict ? "<" : "<=", t.limit);
  return line + (t.met ? "  met\n" : "  MISSED\n");
}

bool any_row(const Report& report, Metric metric) {
  for (const Row& row : report.rows)
    if (row.metric == metric) return true;
  return false;
}

}  // namespace

const char* outcome_name(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::kMeasured: return "measured";
    case Outcome::kNotInstalled: return "not installed";
    case Outcome::kUnavailable: return "unavailable";
    case Outcome::kFailed: return "failed";
    case Outcome::kNotApplicable: return "not applicable";
  }
  return "?";
}

LatencySummary LatencySummary::from(const Histogram& h) {
  LatencySummary s;
  s.count = h.count();
  s.min_ns = h.min();
  s.p50_ns = h.percentile(0.50);
  s.p99_ns = h.percentile(0.99);
  s.p999_ns = h.percentile(0.999);
  s.max_ns = h.max();
  s.mean_ns = h.mean();
  return s;
}

double Throughput::messages_per_s() const {
  return elapsed_ns == 0 ? 0.0 : static_cast<double>(messages) * 1e9 / static_cast<double>(elapsed_ns);
}

double Throughput::payload_gb_per_s() const {
  return elapsed_ns == 0 ? 0.0 : static_cast<double>(messages * payload_bytes) / static_cast<double>(elapsed_ns);
}

std::string format_us(uint64_t ns) { return printf_string("%llu.%03llu", ns / 1000ULL, ns % 1000ULL); }

std::string format_table(const Report& report) {
  std::string out = report.conditions.title + "\n";
  out += conditions_line(report.conditions);
  out += format_machine_lines(report.machine);
  if (any_row(report, Metric::kRoundTrip)) {
    out += printf_string("\n%-*s %-5s %6s %6s %9s %9s %9s %10s %9s\n", kLabelWidth, "round trip (RTT), microseconds",
                         "poll", "bytes", "on-cpu", "p50", "p99", "p99.9", "max", "mean");
    for (const Row& row : report.rows)
      if (row.metric == Metric::kRoundTrip) out += latency_line(row);
  }
  if (any_row(report, Metric::kThroughput)) {
    out += printf_string("\n%-*s %-5s %6s %6s %11s %12s %11s\n", kLabelWidth, "streaming, one way", "poll", "bytes",
                         "on-cpu", "M msgs/s", "payload GB/s", "full waits");
    for (const Row& row : report.rows)
      if (row.metric == Metric::kThroughput) out += throughput_line(row);
  }
  if (!report.targets.empty()) {
    out += "\ntargets, each against a floor or peer tool of this run:\n";
    for (const TargetCheck& t : report.targets) out += target_line(t);
  }
  out +=
      "\non-cpu: share of the row's wall time this (measuring) process was on its CPU; well below 100% for a\n"
      "spinning process means other work took the CPU and the row measured the scheduler too.\n";
  if (!report.notes.empty()) {
    out += "\nnotes:\n";
    for (const std::string& note : report.notes) out += "  " + note + "\n";
  }
  return out;
}

std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int n = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

}  // namespace fjord::bench
