// `latency_bench access --sweep`: the node started afresh for each value of
// one parameter, and the sweep's rows measured against it (sweep.h).
#include <cstdio>

#include "access_report.h"
#include "cluster_target.h"
#include "commands.h"
#include "fjord/base/clock.h"
#include "sweep.h"

namespace fjord::bench {
namespace {

constexpr int kQuantileSearchSteps = 40;

AccessPlan sweep_plan(const Options& o) {
  AccessPlan p;
  p.iterations = effective_iterations(o);
  p.warmup = effective_warmup(o);
  p.batch = o.batch;
  return p;
}

SweepMethod summarize(const MethodResult& m, uint64_t over_ns) {
  SweepMethod out;
  out.method = m.method;
  out.latency = LatencySummary::from(m.per_row_ns);
  out.over_share = share_above(m.per_row_ns, over_ns);
  if (m.per_row_ns.count() > 0)
    for (uint32_t i = 0; i < kSweepQuantiles; ++i)
      out.quantile_ns.push_back(m.per_row_ns.percentile(static_cast<double>(i) / (kSweepQuantiles - 1)));
  if (!m.status) {
    out.outcome = Outcome::kFailed;
    out.reason = m.status.message();
  }
  return out;
}

// The sweep's methods over one connection, with the node's CPU use while
// they ran.
void measure_row(api::Connection& conn, const AccessTable& table, const AccessPlan& plan, int node_pid,
                 uint64_t over_ns, SweepRow& row, Progress& progress) {
  const ProcessSchedule before = read_process_schedule(node_pid);
  const uint64_t start = monotonic_ns();
  for (AccessMethod method : kSweepMethods) {
    progress.begin(row.transporter + " " + row.value + ": " + access_method_label(method), plan.iterations);
    row.methods.push_back(summarize(measure_access_method(conn, table, method, plan, progress), over_ns));
  }
  row.node_cpu = schedule_share(before, read_process_schedule(node_pid), monotonic_ns() - start);
}

SweepRow failed_row(const std::string& value, const std::string& transporter, const Status& why) {
  SweepRow row;
  row.value = value;
  row.transporter = transporter;
  row.outcome = Outcome::kFailed;
  row.reason = why.message();
  return row;
}

// Connects as the endpoint's API node (the first endpoint reuses the
// loader's connection) and measures its row.
SweepRow measure_endpoint(const Options& o, const ClusterTarget& target, std::size_t i,
                          std::unique_ptr<api::Connection> conn, const AccessTable& loaded, const std::string& value,
                          Progress& progress) {
  const TargetEndpoint& e = target.endpoints[i];
  Result<AccessTable> table = loaded;
  if (!conn) {
    auto connected = connect_api(target, e.api_nodes.front(), o);
    if (!connected) return failed_row(value, e.transporter, connected.status());
    conn = std::move(connected).value();
    table = describe_access_table(*conn, loaded.spec);
  }
  if (!table) return failed_row(value, e.transporter, table.status());
  SweepRow row;
  row.value = value;
  row.transporter = e.transporter;
  measure_row(*conn, *table, sweep_plan(o), target.node ? target.node->pid() : -1, o.over_ns, row, progress);
  for (const SweepMethod& m : row.methods)
    if (m.outcome != Outcome::kMeasured) row.outcome = Outcome::kFailed;
  if (i + 1 == target.endpoints.size()) (void)conn->drop_table(kAccessTableName);
  return row;
}

// One value: the node started with PARAM=value, the table loaded, every
// transporter's row measured, the node stopped.
void sweep_value(const Options& o, const RunContext& ctx, const std::string& value, SweepReport& report,
                 Progress& progress) {
  Options with_value = o;
  with_value.node_params.push_back(o.sweep_param + "=" + value);
  auto target = prepare_cluster(with_value, ctx, 1, o.rows, o.row_bytes);
  if (!target) {
    report.rows_measured.push_back(failed_row(value, "-", target.status()));
    return;
  }
  auto loader = connect_api(*target, target->endpoints.front().api_nodes.front(), o);
  auto table = loader ? create_access_table(**loader, {kAccessTableName, o.rows, o.row_bytes})
                      : Result<AccessTable>(loader.status());
  if (table)
    if (auto loaded = load_access_table(**loader, *table, progress); !loaded) table = loaded.status();
  auto layout = node_layout(target->control_socket);
  std::unique_ptr<api::Connection> first = loader ? std::move(loader).value() : nullptr;
  for (std::size_t i = 0; i < target->endpoints.size(); ++i) {
    SweepRow row = table ? measure_endpoint(o, *target, i, i == 0 ? std::move(first) : nullptr, *table, value, progress)
                         : failed_row(value, target->endpoints[i].transporter, table.status());
    row.node_layout = layout ? *layout : "node layout not available: " + layout.status().message();
    report.rows_measured.push_back(std::move(row));
  }
  if (Status s = target->node ? target->node->stop() : Status::ok(); !s)
    report.rows_measured.push_back(failed_row(value, "-", s));
}

}  // namespace

double share_above(const Histogram& histogram, uint64_t ns) {
  if (histogram.count() == 0) return 0;
  if (histogram.max() <= ns) return 0;
  if (histogram.min() > ns) return 1;
  double at_or_below = 0;  // a quantile whose value is <= ns
  double above = 1;        // a quantile whose value is > ns
  for (int step = 0; step < kQuantileSearchSteps; ++step) {
    const double mid = (at_or_below + above) / 2;
    (histogram.percentile(mid) <= ns ? at_or_below : above) = mid;
  }
  return 1 - at_or_below;
}

int run_sweep_command(const Options& o) {
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  SweepReport report;
  report.param = o.sweep_param;
  report.node_params = o.node_params;
  report.over_ns = o.over_ns;
  report.rows = o.rows;
  report.row_bytes = o.row_bytes;
  report.iterations = effective_iterations(o);
  report.warmup = effective_warmup(o);
  report.poll = poll_mode_name(o.poll);
  report.cpus = ctx->cpus;
  report.machine = ctx->machine;
  Progress progress(true);
  for (const std::string& value : o.sweep_values) sweep_value(o, *ctx, value, report, progress);
  report.machine.load_end = load_average();
  const std::string text = o.json ? format_sweep_json(report) : format_sweep_table(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!o.plot_path.empty()) {
    if (Status s = run_gnuplot(sweep_plot_script(report, o.plot_path)); !s)
      std::fprintf(stderr, "latency_bench: --plot %s: %s\n", o.plot_path.c_str(), s.message().c_str());
    else if (!o.json)
      std::printf("plot: %s\n", o.plot_path.c_str());
  }
  bool failed = false;
  for (const SweepRow& r : report.rows_measured) failed = failed || r.outcome != Outcome::kMeasured;
  return failed ? 1 : 0;
}

}  // namespace fjord::bench
