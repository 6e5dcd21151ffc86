// `latency_bench ping`: one transporter, ping-pong or --stream, own peer
// process, optionally --compare.
#include "builtin_transporters.h"
#include "commands.h"
#include "compare.h"
#include "local_run.h"
#include "wire.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;

Result<LinkChoice> choose_link(const Options& o) {
  auto& registry = tools::builtin_registry();
  if (!o.config_path.empty()) return link_from_file(registry, o.config_path, o.transporter);
  return generated_link(registry, o.transporter.empty() ? "tcp" : o.transporter, LinkHosts{}, o.link_params);
}

std::string title(const Options& o, const Row& row, const LocalPlan& plan) {
  std::string text = std::string("latency_bench ping") + (o.stream ? " --stream" : "") + ": " + row.label + ", " +
                     std::to_string(row.size_bytes) + " B payload in " + std::to_string(row.wire_bytes) +
                     " B frames, " + std::to_string(plan.iterations) + (o.stream ? " messages" : " round trips") +
                     " after " + std::to_string(plan.warmup) + " discarded, poll " + poll_mode_name(plan.poll);
  return text;
}

ComparePlan compare_plan(const Options& o, const RunContext& ctx, const Row& row, const LocalPlan& plan) {
  ComparePlan c;
  c.busy_latency = !o.stream && o.poll == PollMode::kBusy;
  c.sleep_latency = !o.stream && o.poll == PollMode::kSleep;
  c.streaming = o.stream;
  c.latency = FloorParams{plan.iterations, plan.warmup, row.wire_bytes, ctx.cpus[1], plan.timeout_ns};
  c.peers.message_bytes = row.wire_bytes;
  c.peers.iterations = plan.iterations;
  c.peers.warmup = plan.warmup;
  c.peers.cpu_self = ctx.cpus[0];
  c.peers.cpu_peer = ctx.cpus[1];
  c.stream_payload_bytes = plan.payload_bytes;
  c.stream_copies = plan.iterations;
  return c;
}

void add_notes(const Options& o, Report& report) {
  if (o.stream) {
    report.notes.emplace_back("GB/s counts payload bytes (1e9 B/s) from the first send to the receiver's report;");
    report.notes.emplace_back("the receiver copies every payload out and checks its sequence number.");
  } else {
    report.notes.emplace_back("RTT: one frame to the peer and its echo back, timed here with two clock reads;");
    report.notes.emplace_back("the peer process echoes each frame unchanged (one copy into its send memory).");
  }
}

}  // namespace

int run_ping_command(const Options& o) {
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  auto choice = choose_link(o);
  if (!choice) return usage_error(choice.status().message());
  const bool checksum = choice->link.checksum;
  if (message_frame_bytes(o.size_bytes, checksum) == 0)
    return usage_error("--size: " + std::to_string(o.size_bytes) + " does not fit one frame with Checksum=1 (at most " +
                       std::to_string(max_payload_bytes(checksum)) + ")");
  LocalPlan plan{std::move(choice).value(),
                 o.poll,
                 o.stream,
                 o.size_bytes,
                 effective_iterations(o),
                 effective_warmup(o),
                 o.batch,
                 ctx->cpus[1],
                 o.timeout_s * kNsPerSecond,
                 o.verbose};
  Progress progress(true);
  Report report;
  report.machine = ctx->machine;
  report.conditions.command = o.stream ? "stream" : "ping";
  report.conditions.cpus = ctx->cpus;
  report.conditions.where = "peer process started here";
  if (o.stream) report.conditions.batch = o.batch;
  report.rows.push_back(run_local(plan, progress));
  const Row& ours = report.rows.front();
  report.conditions.title = title(o, ours, plan);
  if (o.compare) {
    std::vector<Row> floors = measure_comparisons(compare_plan(o, *ctx, ours, plan), progress);
    report.rows.insert(report.rows.end(), floors.begin(), floors.end());
  }
  report.targets = evaluate_targets(report.rows, false, ctx->built_in);
  add_notes(o, report);
  const Row first = report.rows.front();
  emit_report(report, o);
  if (first.outcome != Outcome::kMeasured)
    return run_error(first.label + ": " + outcome_name(first.outcome) + ": " + first.reason);
  return 0;
}

}  // namespace fjord::bench
