// `latency_bench ping-all` (or `all`): ping-pong over every transporter
// built in (both poll modes unless --poll), 4096 B streaming over each, and
// every floor and peer tool, in one table. Sized to finish well under a
// minute on two cores.
#include <algorithm>
#include <map>

#include "builtin_transporters.h"
#include "commands.h"
#include "compare.h"
#include "local_run.h"
#include "wire.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;
constexpr std::size_t kStreamPayloadBytes = 4096;  // the streaming target is for 4 KB messages

// Two processes spinning on one CPU take turns by time slice, so with a
// single CPU only sleeping rows mean anything unless --poll busy insists.
bool one_cpu(const RunContext& ctx) { return ctx.cpus[0] == ctx.cpus[1]; }

std::vector<PollMode> poll_modes(const Options& o, const RunContext& ctx) {
  if (o.poll_given) return {o.poll};
  if (one_cpu(ctx)) return {PollMode::kSleep};
  return {PollMode::kBusy, PollMode::kSleep};
}

// Options for one row, as if the user had asked for that run alone.
Options row_options(const Options& o, PollMode poll, bool stream) {
  Options r = o;
  r.poll = poll;
  r.stream = stream;
  if (stream) r.size_bytes = kStreamPayloadBytes;
  return r;
}

Row one_row(const Options& o, const RunContext& ctx, const std::string& type, Progress& progress) {
  auto choice = generated_link(tools::builtin_registry(), type, LinkHosts{}, o.link_params);
  if (!choice) {
    Row row;
    row.key = fjord_row_key(type, o.poll, o.stream);
    row.label = "fjord " + type;
    row.transporter = type;
    row.outcome = Outcome::kFailed;
    row.reason = choice.status().message();
    return row;
  }
  const LocalPlan plan{std::move(choice).value(),
                       o.poll,
                       o.stream,
                       o.size_bytes,
                       effective_iterations(o),
                       effective_warmup(o),
                       o.batch,
                       ctx.cpus[1],
                       o.timeout_s * kNsPerSecond,
                       o.verbose};
  return run_local(plan, progress);
}

// A transporter that cannot run here gets one row saying why.
Row unavailable_row(const std::string& type, const Status& why) {
  Row row;
  row.key = "fjord." + type;
  row.label = "fjord " + type;
  row.transporter = type;
  row.outcome = Outcome::kUnavailable;
  row.reason = why.message();
  return row;
}

// Floors and peers measured so far, by key.
using Comparisons = std::map<std::string, Row>;

// Measures, right after `row`, the floors its targets compare it with (a
// ratio is only fair between neighbours in time on this machine).
void measure_judges(const Row& row, const ComparePlan& plan, Comparisons& done, Progress& progress) {
  const std::vector<std::string> planned = comparison_keys(plan);
  for (const std::string& key : floors_judging(row.key))
    if (std::find(planned.begin(), planned.end(), key) != planned.end() && done.count(key) == 0)
      done.emplace(key, measure_comparison(key, plan, progress));
}

// Ping rows by poll mode, then streaming rows, each followed by its judges.
void add_rows(const Options& o, const RunContext& ctx, const ComparePlan& plan, Report& report, Progress& progress) {
  std::vector<std::string> runnable;
  for (const std::string& type : ctx.built_in) {
    if (Status s = tools::builtin_registry().find(type)->probe(); !s)
      report.rows.push_back(unavailable_row(type, s));
    else
      runnable.push_back(type);
  }
  Comparisons done;
  const PollMode stream_poll = poll_modes(o, ctx).front();
  for (PollMode poll : poll_modes(o, ctx))
    for (const std::string& type : runnable) {
      report.rows.push_back(one_row(row_options(o, poll, false), ctx, type, progress));
      measure_judges(report.rows.back(), plan, done, progress);
    }
  for (const std::string& type : runnable) {
    report.rows.push_back(one_row(row_options(o, stream_poll, true), ctx, type, progress));
    measure_judges(report.rows.back(), plan, done, progress);
  }
  for (const std::string& key : comparison_keys(plan)) {  // the rest, then all in display order
    if (done.count(key) == 0) done.emplace(key, measure_comparison(key, plan, progress));
    report.rows.push_back(done.at(key));
  }
}

ComparePlan compare_plan(const Options& o, const RunContext& ctx) {
  const std::vector<PollMode> polls = poll_modes(o, ctx);
  ComparePlan c;
  c.busy_latency = std::find(polls.begin(), polls.end(), PollMode::kBusy) != polls.end();
  c.sleep_latency = std::find(polls.begin(), polls.end(), PollMode::kSleep) != polls.end();
  c.streaming = true;
  const std::size_t wire_bytes = message_frame_bytes(o.size_bytes, false);
  const Options busy = row_options(o, PollMode::kBusy, false);
  c.latency = FloorParams{effective_iterations(busy), effective_warmup(busy), wire_bytes, ctx.cpus[1],
                          o.timeout_s * kNsPerSecond};
  c.peers.message_bytes = wire_bytes;
  c.peers.iterations = effective_iterations(busy);
  c.peers.warmup = effective_warmup(busy);
  c.peers.cpu_self = ctx.cpus[0];
  c.peers.cpu_peer = ctx.cpus[1];
  c.stream_payload_bytes = kStreamPayloadBytes;
  c.stream_copies = effective_iterations(row_options(o, PollMode::kBusy, true));
  return c;
}

std::string title(const Options& o, const RunContext& ctx) {
  std::string names;
  for (const std::string& n : ctx.built_in) names += (names.empty() ? "" : ", ") + n;
  std::string rounds;
  for (PollMode poll : poll_modes(o, ctx))
    rounds += (rounds.empty() ? "" : " / ") + std::to_string(effective_iterations(row_options(o, poll, false))) +
              " round trips " + poll_mode_name(poll);
  return "latency_bench ping-all: every transporter built in (" + names + "); ping-pong " +
         std::to_string(o.size_bytes) + " B payload, " + rounds + "; streaming " + std::to_string(kStreamPayloadBytes) +
         " B, " + std::to_string(effective_iterations(row_options(o, PollMode::kBusy, true))) + " messages";
}

}  // namespace

int run_all_command(const Options& o) {
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  Progress progress(true);
  Report report;
  report.machine = ctx->machine;
  report.conditions.command = "all";  // the JSON "mode", kept for scripts
  report.conditions.title = title(o, *ctx);
  report.conditions.cpus = ctx->cpus;
  report.conditions.where = "each row starts its own peer process";
  report.conditions.batch = o.batch;
  add_rows(o, *ctx, compare_plan(o, *ctx), report, progress);
  report.targets = evaluate_targets(report.rows, true, ctx->built_in);
  report.notes.emplace_back("RTT rows: one frame to the peer and its echo back, timed here with two clock reads.");
  report.notes.emplace_back("Streaming: payload GB/s (1e9 B/s), first send to the receiver's report; the receiver");
  report.notes.emplace_back("copies every payload out. Floors and peer tools ran in this same invocation, each");
  report.notes.emplace_back("right after the row a target compares it with.");
  if (one_cpu(*ctx) && !o.poll_given)
    report.notes.emplace_back("one CPU: busy-poll rows skipped (two spinners on one CPU measure its time slice)");
  bool failed = false;
  for (const Row& row : report.rows)
    failed = failed || (row.kind == RowKind::kFjord && row.outcome == Outcome::kFailed);
  emit_report(report, o);
  return failed ? 1 : 0;
}

}  // namespace fjord::bench
