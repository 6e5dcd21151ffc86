// `latency_bench throughput`: flexAsynch-style definer and executor threads
// against a data node (started here, or --config's), over one transporter.
#include <algorithm>
#include <cstdio>

#include "access_table.h"
#include "cluster_target.h"
#include "commands.h"
#include "fjord/base/clock.h"
#include "redis_peer.h"
#include "throughput.h"
#include "throughput_report.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kNsPerMs = 1'000'000ULL;
constexpr uint32_t kRedisPipeline = 32;  // redis-benchmark -P 32: redis at its pipelined best
constexpr uint32_t kRedisClients = 4;
constexpr uint64_t kRedisMaxKeys = 1'000'000;
constexpr uint64_t kRedisRequests = 1'000'000;  // a second or so at redis's pipelined rate
constexpr double kTargetReadsPerS = 5e6;        // NDB's "> 5 million key lookups per second" per data node

ThroughputPlan plan_of(const Options& o, const RunContext& ctx) {
  ThroughputPlan p;
  p.definers = o.definers;
  p.executors = o.executors;
  p.in_flight = o.in_flight;
  p.batch = o.batch;
  p.read_percent = o.read_percent;
  p.rate_per_s = o.rate_per_s;
  p.duration_ns = o.duration_ms * kNsPerMs;
  p.warmup_ns = p.duration_ns / 10;
  p.rows = o.rows;
  p.row_bytes = o.row_bytes;
  p.cpu = ctx.cpus.empty() ? -1 : ctx.cpus[0];
  p.busy_poll = o.poll == PollMode::kBusy;
  return p;
}

// LDM blocks in the node's own description of its threads ("LDM(0)").
uint32_t ldm_count(const std::string& layout) {
  uint32_t n = 0;
  for (std::size_t at = layout.find("LDM("); at != std::string::npos; at = layout.find("LDM(", at + 1)) ++n;
  return n;
}

ThroughputConditions conditions(const Options& o, const RunContext& ctx, const ClusterTarget& t,
                                const ThroughputPlan& p) {
  ThroughputConditions c;
  const TargetEndpoint& e = t.endpoints.front();
  c.title = "latency_bench throughput: flexAsynch-style key operations over " + e.transporter +
            (o.config_path.empty() ? std::string() : " (" + o.config_path + ")");
  c.transporter = e.transporter;
  c.link = e.link;
  c.plan = p;
  c.poll = poll_mode_name(o.poll);
  c.cpus = ctx.cpus;
  c.node = t.description;
  c.config = t.config_label;
  auto layout = node_layout(t.control_socket);
  c.node_layout = layout ? *layout : "node layout not available: " + layout.status().message();
  c.ldm_threads = layout ? ldm_count(*layout) : 0;
  return c;
}

void add_targets(const Options& o, ThroughputReport& r) {
  const std::string rate = "asynchronous pk reads with one LDM thread: >= 5 M reads/s";
  const double reads_per_s =
      r.window_ns == 0 ? 0 : static_cast<double>(r.reads) * 1e9 / static_cast<double>(r.window_ns);
  if (o.read_percent != 100 || o.rate_per_s != 0)
    r.targets.push_back(unevaluated_target(rate, "needs a closed-loop run of reads only (--mix 100/0, no --rate)"));
  else if (r.conditions.ldm_threads != 1)
    r.targets.push_back(unevaluated_target(
        rate, "the node has " + std::to_string(r.conditions.ldm_threads) + " LDM threads (or did not say)"));
  else
    // flexAsynch, where the figure comes from, bundles many lookups per
    // round trip: say how many this run did.
    r.targets.push_back(evaluated_target(
        rate, reads_per_s / 1e6, kTargetReadsPerS / 1e6, "M reads/s",
        std::string(r.conditions.node_layout.find("single") != std::string::npos
                        ? "single-threaded node: its one thread is the LDM thread"
                        : "one ldm thread") +
            "; " + std::to_string(r.conditions.plan.batch) + " read" + (r.conditions.plan.batch == 1 ? "" : "s") +
            " per transaction" + (r.conditions.plan.batch == 1 ? ", --batch 20 bundles them as flexAsynch does" : ""),
        true));
  const std::string redis = "asynchronous pk reads: >= 2x redis-server's pipelined GET rate (-P 32)";
  if (!r.redis_measured)
    r.targets.push_back(unevaluated_target(redis, "needs --compare"));
  else if (r.redis.outcome != Outcome::kMeasured)
    r.targets.push_back(unevaluated_target(redis, r.redis.reason));
  else if (o.read_percent != 100 || o.rate_per_s != 0)
    r.targets.push_back(unevaluated_target(redis, "needs a closed-loop run of reads only"));
  else
    r.targets.push_back(evaluated_target(
        redis, reads_per_s / r.redis.requests_per_s, 2.0, "x redis",
        r.redis.command + ": " + std::to_string(static_cast<uint64_t>(r.redis.requests_per_s)) + " GET/s", true));
}

// Connects every executor and describes the table through each (the first
// creates it when `create`).
Status connect_executors(const Options& o, const ClusterTarget& t, const AccessTableSpec& spec,
                         std::vector<std::unique_ptr<api::Connection>>& connections, std::vector<AccessTable>& tables,
                         bool create = true) {
  for (NodeId api : t.endpoints.front().api_nodes) {
    auto conn = connect_api(t, api, o);
    if (!conn) return conn.status();
    connections.push_back(std::move(conn).value());
    auto table = connections.size() == 1 && create ? create_access_table(*connections.back(), spec)
                                                   : describe_access_table(*connections.back(), spec);
    if (!table) return table.status();
    tables.push_back(*table);
  }
  return Status::ok();
}

// The same plan with every executor on one API node: one ClusterConnection
// on the first API node id (its Connection closed before), a Session per
// executor.
Status run_on_one_api_node(const Options& o, const ClusterTarget& t, const AccessTableSpec& spec,
                           const ThroughputPlan& plan, Progress& progress, ThroughputReport& report) {
  const int node_pid = t.node ? t.node->pid() : -1;
  auto cluster = api::ClusterConnection::connect(api_options(t, t.endpoints.front().api_nodes.front(), o));
  if (!cluster) return cluster.status();
  std::vector<std::unique_ptr<api::Session>> owned;
  std::vector<api::Session*> sessions;
  std::vector<AccessTable> tables;
  for (uint32_t e = 0; e < plan.executors; ++e) {
    auto session = (*cluster)->new_session();
    if (!session) return session.status();
    auto table = describe_access_table(**session, spec);
    if (!table) return table.status();
    owned.push_back(std::move(session).value());
    sessions.push_back(owned.back().get());
    tables.push_back(*table);
  }
  report.conditions.title += ": one API node, " + std::to_string(plan.executors) + " executor threads";
  report.conditions.one_api_node = true;
  const ProcessSchedule node_before = read_process_schedule(node_pid);
  const uint64_t run_start = monotonic_ns();
  set_result(report, run_throughput(sessions, tables, plan, progress));
  report.conditions.node_schedule =
      schedule_share(node_before, read_process_schedule(node_pid), monotonic_ns() - run_start);
  return Status::ok();
}

std::string ratio_text(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", ratio);
  return text;
}

// rows/s of one more run of the plan: on separate API nodes, or on one.
Result<double> rerun(const Options& o, const ClusterTarget& t, const AccessTableSpec& spec, const ThroughputPlan& plan,
                     bool one_api_node) {
  Progress quiet(false);
  if (one_api_node) {
    ThroughputReport r;
    if (Status s = run_on_one_api_node(o, t, spec, plan, quiet, r); !s) return s;
    return r.operations_per_s;
  }
  std::vector<std::unique_ptr<api::Connection>> connections;
  std::vector<AccessTable> tables;
  if (Status s = connect_executors(o, t, spec, connections, tables, false); !s) return s;
  const ThroughputResult r = run_throughput(connections, tables, plan, quiet);
  if (!r.status) return r.status;
  return r.operations_per_s();
}

// --rounds N: N-1 more pairs after the first, in alternating order (shared
// first in odd rounds), so that a drift of the host over the run weighs on
// both sides. The target is judged on the median of the rounds' ratios.
Status add_sharing_target(const Options& o, const ClusterTarget& t, const AccessTableSpec& spec,
                          const ThroughputPlan& plan, double separate_ops_per_s, ThroughputReport& shared) {
  std::vector<double> ratios = {separate_ops_per_s == 0 ? 0 : shared.operations_per_s / separate_ops_per_s};
  for (uint32_t round = 1; round < o.rounds; ++round) {
    double rate[2] = {0, 0};  // [0] separate, [1] one API node
    for (int k = 0; k < 2; ++k) {
      const bool one = (k == 0) == (round % 2 == 1);
      auto r = rerun(o, t, spec, plan, one);
      if (!r) return r.status();
      rate[one ? 1 : 0] = *r;
    }
    ratios.push_back(rate[0] == 0 ? 0 : rate[1] / rate[0]);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  std::string basis = "rows/s of this run over the run before it on separate API nodes";
  if (n > 1) {
    basis = "median of " + std::to_string(n) + " rounds' ratios, alternating which runs first:";
    for (double r : ratios) basis += " " + ratio_text(r);
  }
  const std::string ratio = "one API node with " + std::to_string(plan.executors) + " executor threads: >= 0.9x " +
                            std::to_string(plan.executors) + " API nodes with one each";
  shared.targets.push_back(evaluated_target(ratio, median, 0.9, "x", basis, true));
  return Status::ok();
}

}  // namespace

int run_throughput_command(const Options& given) {
  Options o = given;
  if (o.threads_per_api_node != 0) o.executors = o.threads_per_api_node;
  if (o.rounds > 1 && o.threads_per_api_node == 0)
    return usage_error("--rounds " + std::to_string(o.rounds) +
                       " needs --threads-per-api-node: it repeats that comparison");
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  auto target = prepare_cluster(o, *ctx, o.executors, o.rows, o.row_bytes);
  if (!target)
    return target.status().code() == StatusCode::kInvalidArgument ? usage_error(target.status().message())
                                                                  : run_error(target.status().message());
  Progress progress(true);
  const ThroughputPlan plan = plan_of(o, *ctx);
  ThroughputReport report;
  report.machine = ctx->machine;
  report.conditions = conditions(o, *ctx, *target, plan);
  report.latency_basis = o.rate_per_s != 0 ? "from its scheduled send time to completion (open loop: queueing included)"
                                           : "from execute_async() to completion (closed loop)";
  const AccessTableSpec spec{kAccessTableName, o.rows, o.row_bytes};
  std::vector<std::unique_ptr<api::Connection>> connections;
  std::vector<AccessTable> tables;
  if (Status s = connect_executors(o, *target, spec, connections, tables); !s) return run_error(s.message());
  if (auto load = load_access_table(*connections.front(), tables.front(), progress); !load)
    return run_error(load.status().message());
  const int node_pid = target->node ? target->node->pid() : -1;
  const ProcessSchedule node_before = read_process_schedule(node_pid);
  const uint64_t run_start = monotonic_ns();
  set_result(report, run_throughput(connections, tables, plan, progress));
  report.conditions.node_schedule =
      schedule_share(node_before, read_process_schedule(node_pid), monotonic_ns() - run_start);
  if (o.threads_per_api_node == 0) (void)connections.front()->drop_table(kAccessTableName);
  connections.clear();
  ThroughputReport shared_report;
  if (o.threads_per_api_node != 0) {
    shared_report.machine = report.machine;
    shared_report.conditions = report.conditions;
    shared_report.latency_basis = report.latency_basis;
    Status s = run_on_one_api_node(o, *target, spec, plan, progress, shared_report);
    if (s) s = add_sharing_target(o, *target, spec, plan, report.operations_per_s, shared_report);
    if (!s) return run_error("one API node, " + std::to_string(o.executors) + " executor threads: " + s.message());
    if (auto conn = connect_api(*target, target->endpoints.front().api_nodes.front(), o))
      (void)(*conn)->drop_table(kAccessTableName);
  }
  if (o.compare) {
    report.redis_measured = true;
    report.redis = redis_pipelined_get_rate(std::min(o.rows, kRedisMaxKeys), o.row_bytes, kRedisPipeline, kRedisClients,
                                            kRedisRequests, ctx->cpus[1], ctx->cpus[0]);
  }
  add_targets(o, report);
  report.notes = {
      "rows/s counts key operations completed in the measured window; a transaction carries --batch of them.",
      "Executors busy-poll; definers sleep while their queue is full or until the next operation is due",
      "(open loop), and take the CPU from an executor they share it with when they wake.",
  };
  bool failed = report.outcome != Outcome::kMeasured || report.failures != 0;
  if (Status s = target->node ? target->node->stop() : Status::ok(); !s) {
    report.notes.push_back("the data node did not stop cleanly: " + s.message());
    failed = true;
  }
  report.machine.load_end = load_average();
  std::string text = o.json ? format_throughput_json(report) : format_throughput_table(report);
  if (o.threads_per_api_node != 0) {
    shared_report.notes = report.notes;
    shared_report.machine.load_end = report.machine.load_end;
    failed = failed || shared_report.outcome != Outcome::kMeasured || shared_report.failures != 0;
    text += "\n" + (o.json ? format_throughput_json(shared_report) : format_throughput_table(shared_report));
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return failed ? 1 : 0;
}

}  // namespace fjord::bench
