#include "throughput_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "json.h"

namespace fjord::bench {
namespace {

std::string plan_text(const ThroughputConditions& c) {
  const ThroughputPlan& p = c.plan;
  std::string out = std::to_string(p.definers) + (p.definers == 1 ? " definer, " : " definers, ") +
                    std::to_string(p.executors) + (p.executors == 1 ? " executor" : " executors") +
                    (c.one_api_node ? " (one API node, a session each), " : " (one API node each), ") +
                    std::to_string(p.in_flight) + " transactions in flight per executor, " + std::to_string(p.batch) +
                    (p.batch == 1 ? " operation" : " operations") + " per transaction, " +
                    std::to_string(p.read_percent) + "% reads / " + std::to_string(100 - p.read_percent) +
                    "% updates, ";
  out += p.rate_per_s == 0 ? "closed loop" : "open loop at " + std::to_string(p.rate_per_s) + " operations/s";
  out += printf_string("; %.2f s measured after %.2f s discarded; %llu rows of %u bytes; API poll %s",
                       static_cast<double>(p.duration_ns) / 1e9, static_cast<double>(p.warmup_ns) / 1e9,
                       static_cast<unsigned long long>(p.rows), p.row_bytes, c.poll.c_str());
  return out;
}

void write_conditions(JsonWriter& w, const ThroughputConditions& c) {
  const ThroughputPlan& p = c.plan;
  w.begin_object();
  w.field("title", c.title);
  w.field("transporter", c.transporter);
  w.field("link", c.link);
  w.field("definers", uint64_t{p.definers});
  w.field("executors", uint64_t{p.executors});
  w.key("one_api_node");
  w.value(c.one_api_node);
  w.field("in_flight", uint64_t{p.in_flight});
  w.field("batch", uint64_t{p.batch});
  w.field("read_percent", uint64_t{p.read_percent});
  w.field("rate_per_s", p.rate_per_s);
  w.key("open_loop");
  w.value(p.rate_per_s != 0);
  w.field("duration_s", static_cast<double>(p.duration_ns) / 1e9);
  w.field("warmup_s", static_cast<double>(p.warmup_ns) / 1e9);
  w.field("rows", p.rows);
  w.field("row_bytes", uint64_t{p.row_bytes});
  w.field("poll", c.poll);
  w.key("cpus");
  w.begin_array();
  for (int cpu : c.cpus) w.value(cpu);
  w.end_array();
  w.field("node", c.node);
  w.field("node_layout", c.node_layout);
  w.field("config", c.config);
  w.field("ldm_threads", uint64_t{c.ldm_threads});
  w.key("node_schedule");
  write_schedule_json(w, c.node_schedule);
  w.key("executor_short_slices");
  w.value(c.short_slices);
  w.end_object();
}

void write_executors(JsonWriter& w, const std::vector<ExecutorRow>& rows) {
  w.begin_array();
  for (const ExecutorRow& e : rows) {
    w.begin_object();
    w.field("api_node", uint64_t{e.api_node});
    w.field("operations", e.operations);
    w.field("rows_per_s", e.operations_per_s);
    w.key("latency_us");
    write_latency_us_json(w, e.latency_ns);
    w.field("on_cpu_share", e.usage.on_cpu_share());
    w.end_object();
  }
  w.end_array();
}

void write_redis(JsonWriter& w, const ThroughputReport& r) {
  if (!r.redis_measured) {
    w.null();
    return;
  }
  w.begin_object();
  w.field("status", outcome_name(r.redis.outcome));
  if (!r.redis.reason.empty()) w.field("reason", r.redis.reason);
  w.field("command", r.redis.command);
  w.field("requests_per_s", r.redis.requests_per_s);
  w.end_object();
}

}  // namespace

void set_result(ThroughputReport& r, const ThroughputResult& result) {
  r.window_ns = result.window_ns;
  r.transactions = result.transactions;
  r.operations = result.operations;
  r.reads = result.reads;
  r.updates = result.updates;
  r.failures = result.failures;
  r.transactions_per_s = result.transactions_per_s();
  r.operations_per_s = result.operations_per_s();
  r.latency_ns = LatencySummary::from(result.latency_ns);
  r.definer_full_waits = result.definer_full_waits;
  r.definer_late_ns = LatencySummary::from(result.definer_late_ns);
  for (const ExecutorResult& e : result.executors) {
    if (r.first_failure.empty()) r.first_failure = e.first_failure;
    ExecutorRow row;
    row.api_node = e.api_node;
    row.operations = e.operations;
    row.operations_per_s =
        result.window_ns == 0 ? 0.0 : static_cast<double>(e.operations) * 1e9 / static_cast<double>(result.window_ns);
    row.latency_ns = LatencySummary::from(e.latency_ns);
    row.usage = e.usage;
    r.executors.push_back(row);
    r.conditions.short_slices = e.short_slice;
  }
  if (!result.status) {
    r.outcome = Outcome::kFailed;
    r.reason = result.status.message();
  }
}

std::string format_throughput_table(const ThroughputReport& r) {
  const ThroughputConditions& c = r.conditions;
  std::string out = c.title + "\n";
  out += "data node: " + c.node + "\n";
  out += "conditions: " + plan_text(c) + "; ";
  out += c.cpus.size() == 2 ? "our threads on CPU " + std::to_string(c.cpus[0]) +
                                  ", the data node started here on CPU " + std::to_string(c.cpus[1]) + "\n"
                            : std::string("not pinned\n");
  out += format_machine_lines(r.machine);
  out += node_schedule_line(c.node_schedule);
  if (!c.node_layout.empty()) out += "\n" + c.node_layout + (c.node_layout.back() == '\n' ? "" : "\n");
  if (r.outcome != Outcome::kMeasured) return out + "\nthroughput: " + outcome_name(r.outcome) + ": " + r.reason + "\n";
  const std::string over = "over " + c.link;
  out += printf_string("\n%-22s %14s %14s %10s %10s %10s %11s\n", over.c_str(), "transactions/s", "rows/s", "p50 us",
                       "p99 us", "p99.9 us", "max us");
  out +=
      printf_string("%-22s %14.0f %14.0f %10s %10s %10s %11s\n", "all executors", r.transactions_per_s,
                    r.operations_per_s, format_us(r.latency_ns.p50_ns).c_str(), format_us(r.latency_ns.p99_ns).c_str(),
                    format_us(r.latency_ns.p999_ns).c_str(), format_us(r.latency_ns.max_ns).c_str());
  for (const ExecutorRow& e : r.executors)
    out += printf_string("  executor, API node %-3u %12s %14.0f %10s %10s %10s %11s  on-cpu %.0f%%\n", e.api_node, "",
                         e.operations_per_s, format_us(e.latency_ns.p50_ns).c_str(),
                         format_us(e.latency_ns.p99_ns).c_str(), format_us(e.latency_ns.p999_ns).c_str(),
                         format_us(e.latency_ns.max_ns).c_str(), 100.0 * e.usage.on_cpu_share());
  out += printf_string("latency: per operation, %s\n", r.latency_basis.c_str());
  if (c.node_schedule.known && c.node_schedule.on_cpu > 0)
    out += printf_string(
        "rows per CPU-second the node ran: %.0f (it ran %.2f CPU-s/s, spinning included: a lower bound on one such "
        "node with a CPU to itself)\n",
        r.operations_per_s / c.node_schedule.on_cpu, c.node_schedule.on_cpu);
  out += printf_string("counted: %llu transactions, %llu operations (%llu reads, %llu updates), %llu failed",
                       static_cast<unsigned long long>(r.transactions), static_cast<unsigned long long>(r.operations),
                       static_cast<unsigned long long>(r.reads), static_cast<unsigned long long>(r.updates),
                       static_cast<unsigned long long>(r.failures));
  out += r.first_failure.empty() ? "\n" : " (first: " + r.first_failure + ")\n";
  out += printf_string("definers found their queue full %llu times",
                       static_cast<unsigned long long>(r.definer_full_waits));
  out += c.plan.rate_per_s == 0
             ? "\n"
             : printf_string("; they queued operations behind schedule by p50 %s, p99 %s, max %s us\n",
                             format_us(r.definer_late_ns.p50_ns).c_str(), format_us(r.definer_late_ns.p99_ns).c_str(),
                             format_us(r.definer_late_ns.max_ns).c_str());
  if (r.redis_measured) {
    if (r.redis.outcome == Outcome::kMeasured)
      out += printf_string("\ncompare, measured in this run: %s: %.0f GET/s\n", r.redis.command.c_str(),
                           r.redis.requests_per_s);
    else
      out += "\ncompare: redis-benchmark: " + std::string(outcome_name(r.redis.outcome)) + ": " + r.redis.reason + "\n";
  }
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

std::string format_throughput_json(const ThroughputReport& r) {
  JsonWriter w;
  w.begin_object();
  w.field("mode", "throughput");
  w.key("conditions");
  write_conditions(w, r.conditions);
  w.key("machine");
  write_machine_json(w, r.machine);
  w.field("status", outcome_name(r.outcome));
  if (!r.reason.empty()) w.field("reason", r.reason);
  w.field("window_ns", r.window_ns);
  w.field("transactions", r.transactions);
  w.field("operations", r.operations);
  w.field("reads", r.reads);
  w.field("updates", r.updates);
  w.field("failures", r.failures);
  if (!r.first_failure.empty()) w.field("first_failure", r.first_failure);
  w.field("transactions_per_s", r.transactions_per_s);
  w.field("rows_per_s", r.operations_per_s);
  w.key("rows_per_node_cpu_s");
  if (r.conditions.node_schedule.known && r.conditions.node_schedule.on_cpu > 0)
    w.value(r.operations_per_s / r.conditions.node_schedule.on_cpu);
  else
    w.null();
  w.key("latency_us");
  write_latency_us_json(w, r.latency_ns);
  w.field("latency_basis", r.latency_basis);
  w.field("definer_full_waits", r.definer_full_waits);
  w.key("definer_late_us");
  if (r.conditions.plan.rate_per_s != 0)
    write_latency_us_json(w, r.definer_late_ns);
  else
    w.null();
  w.key("executors");
  write_executors(w, r.executors);
  w.key("redis");
  write_redis(w, r);
  write_targets_and_notes_json(w, r.targets, r.notes);
  w.end_object();
  return w.text() + "\n";
}

}  // namespace fjord::bench
