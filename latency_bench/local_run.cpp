#include "local_run.h"

#include <atomic>
#include <cstdio>
#include <thread>

#include "builtin_transporters.h"
#include "fjord/base/clock.h"
#include "fjord/base/histogram.h"
#include "fjord/base/log.h"
#include "machine.h"
#include "ping.h"
#include "process.h"
#include "stream.h"
#include "wire.h"

namespace fjord::bench {
namespace {

using transport::Transporter;

constexpr uint64_t kPeerExitTimeoutNs = 5'000'000'000ULL;
// The peer process's exit code when the transporter said kUnavailable to its
// connect: the medium is not reachable from another process (sim's
// rendezvous is process-local), so the run falls back to a peer thread.
constexpr int kPeerExitUnavailable = 4;

Row with_outcome(Row row, Outcome outcome, std::string reason) {
  row.outcome = outcome;
  row.reason = std::move(reason);
  return row;
}

Result<ChildProcess> start_peer(const LocalPlan& plan, const transport::Listener& listener) {
  const transport::LinkConfig& link = plan.link.link;
  SpawnSpec spec;
  spec.argv = {self_exe(),
               "--x-peer-node",
               std::to_string(link.client_node()),
               "--x-peer-port",
               std::to_string(listener.port()),
               "--x-peer-link-type",
               link.type,
               "--poll",
               poll_mode_name(plan.poll),
               "--timeout",
               std::to_string(plan.timeout_ns / 1'000'000'000ULL)};
  if (plan.link.config_path.empty()) {
    spec.argv.insert(spec.argv.end(), {"--x-peer-config-text", plan.link.config_text});
  } else {
    spec.argv.insert(spec.argv.end(), {"--x-peer-config-file", plan.link.config_path});
  }
  if (plan.verbose) spec.argv.emplace_back("--verbose");
  spec.cpu = plan.cpu_peer;
  // Quiet runs keep what the peer says for the row's reason; a memory file
  // never blocks it the way a full pipe would.
  spec.output = plan.verbose ? SpawnSpec::Output::kInherit : SpawnSpec::Output::kMemory;
  return spawn(spec);
}

// What the peer process printed (its last 400 bytes, one line).
std::string peer_said(ChildProcess& peer) {
  std::string said = peer.read_output(0);
  for (char& c : said)
    if (c == '\n') c = ' ';
  while (!said.empty() && said.back() == ' ') said.pop_back();
  return said.substr(said.size() > 400 ? said.size() - 400 : 0);
}

// Why the peer process is gone, with its own last words, for messages.
std::string peer_exit_text(ChildProcess& peer) {
  auto code = peer.wait_for(0);
  std::string text =
      code ? "the peer process exited with code " + std::to_string(*code) : "the peer process is still running";
  const std::string said = peer_said(peer);
  return said.empty() ? text : text + " (" + said + ")";
}

// Says bye, waits for the peer to exit, and folds its exit into the row.
Row finish(Row row, Transporter& t, ChildProcess& peer, const Status& measured) {
  if (t.is_up()) (void)send_control(t, kByeSignal, {}, monotonic_ns() + kPeerExitTimeoutNs);
  auto code = peer.wait_for(kPeerExitTimeoutNs);
  if (!measured) return with_outcome(std::move(row), Outcome::kFailed, measured.message());
  if (!code) return with_outcome(std::move(row), Outcome::kFailed, "the peer process did not exit after bye");
  if (*code != 0) return with_outcome(std::move(row), Outcome::kFailed, peer_exit_text(peer));
  return row;
}

// The echo side as a thread of this process, pinned to the peer CPU, for
// media that do not connect across processes. The row says so.
Row run_with_peer_thread(const LocalPlan& plan, transport::TransporterFactory& factory, transport::Listener& listener,
                         Row row, Progress& progress) {
  transport::LinkConfig link = plan.link.link;
  if (link.port == 0) link.port = listener.port();
  std::atomic<bool> peer_done{false};
  Status peer_status;  // written by the peer thread before peer_done (release)
  std::thread peer([&] {
    (void)pin_this_thread(plan.cpu_peer);
    auto t = factory.connect(link.client_node(), link, monotonic_ns() + plan.timeout_ns);
    if (!t) {
      peer_status = t.status();
    } else if (auto session = serve_session(**t, plan.poll); !session) {
      peer_status = session.status();
    }
    peer_done.store(true, std::memory_order_release);
  });
  auto t = accept_link(listener, monotonic_ns() + plan.timeout_ns, [&]() {
    // Acquire pairs with the thread's release: peer_status is complete.
    if (!peer_done.load(std::memory_order_acquire)) return Status::ok();
    return Status(StatusCode::kUnavailable, "the peer thread ended before connecting: " + peer_status.message());
  });
  Status measured = t ? measure_on_link(plan, **t, row, progress) : t.status();
  progress.clear();
  if (t && (*t)->is_up()) (void)send_control(**t, kByeSignal, {}, monotonic_ns() + kPeerExitTimeoutNs);
  peer.join();
  if (measured && !peer_status.is_ok()) measured = peer_status;
  if (!measured) return with_outcome(std::move(row), Outcome::kFailed, measured.message());
  return row;
}

}  // namespace

Row new_fjord_row(const LocalPlan& plan) {
  const transport::LinkConfig& link = plan.link.link;
  Row row;
  row.kind = RowKind::kFjord;
  row.metric = plan.stream ? Metric::kThroughput : Metric::kRoundTrip;
  row.transporter = link.type;
  row.key = fjord_row_key(link.type, plan.poll, plan.stream);
  row.label = "fjord " + link.type;
  if (!plan.link.config_path.empty()) row.label += " (" + link.origin + ")";
  row.poll = poll_mode_name(plan.poll);
  row.size_bytes = plan.payload_bytes;
  row.wire_bytes = message_frame_bytes(plan.payload_bytes, link.checksum);
  row.iterations = plan.iterations;
  row.warmup = plan.warmup;
  if (plan.stream) row.note = "the receiver copies each payload out and checks its number";
  return row;
}

Status measure_on_link(const LocalPlan& plan, Transporter& t, Row& row, Progress& progress) {
  const std::string label = row.transporter + " " + row.poll + (plan.stream ? " stream" : " ping");
  const CpuMeter meter;
  if (plan.stream) {
    progress.begin(label, plan.iterations);
    const StreamParams p{plan.payload_bytes, plan.iterations, plan.warmup, plan.batch, plan.poll, plan.timeout_ns};
    auto result = run_stream(t, p, progress);
    if (!result) return result.status();
    row.throughput = Throughput{result->messages, result->payload_bytes, result->elapsed_ns, result->full_waits};
    row.usage = meter.read();
    return Status::ok();
  }
  progress.begin(label, plan.warmup + plan.iterations);
  Histogram rtt;
  const PingParams p{plan.payload_bytes, plan.iterations, plan.warmup, plan.poll, plan.timeout_ns};
  if (Status s = run_ping(t, p, rtt, progress); !s) return s;
  row.rtt = LatencySummary::from(rtt);
  row.usage = meter.read();
  return Status::ok();
}

std::string fjord_row_key(const std::string& transporter, PollMode poll, bool stream) {
  return "fjord." + transporter + "." + (stream ? std::string("stream") : std::string(poll_mode_name(poll)));
}

Row run_local(const LocalPlan& plan, Progress& progress) {
  Row row = new_fjord_row(plan);
  transport::TransporterFactory* factory = tools::builtin_registry().find(plan.link.link.type);
  FJORD_ASSERT(factory != nullptr);
  if (Status s = factory->probe(); !s) return with_outcome(row, Outcome::kUnavailable, s.message());
  auto listener = factory->listen(plan.link.link.server_node, plan.link.table);
  if (!listener) return with_outcome(row, Outcome::kFailed, "listen: " + listener.status().message());
  auto peer = start_peer(plan, **listener);
  if (!peer) return with_outcome(row, Outcome::kFailed, "starting the peer process: " + peer.status().message());
  auto t = accept_link(**listener, monotonic_ns() + plan.timeout_ns, [&peer]() {
    return peer->running() ? Status::ok()
                           : Status(StatusCode::kUnavailable, peer_exit_text(*peer) + " before connecting");
  });
  if (!t) {
    auto code = peer->wait_for(0);
    if (!code || *code != kPeerExitUnavailable) return with_outcome(row, Outcome::kFailed, t.status().message());
    // The peer printed "latency_bench peer: connecting <link>: <why>"; keep <why>.
    std::string said = peer_said(*peer);
    const std::string prefix = "latency_bench peer: connecting " + plan.link.link.describe() + ": ";
    if (said.rfind(prefix, 0) == 0) said.erase(0, prefix.size());
    row.note = "peer is a thread of this process; from another process: " + said;
    return run_with_peer_thread(plan, *factory, **listener, std::move(row), progress);
  }
  const Status measured = measure_on_link(plan, **t, row, progress);
  progress.clear();
  return finish(std::move(row), **t, *peer, measured);
}

int run_peer_process(const Options& o) {
  log_set_tag("latency_bench peer");
  auto& registry = tools::builtin_registry();
  auto choice = o.peer.config_text.empty() ? link_from_file(registry, o.peer.config_path, o.peer.link_type)
                                           : link_from_text(registry, o.peer.config_text, o.peer.link_type);
  if (!choice) {
    std::fprintf(stderr, "latency_bench peer: %s\n", choice.status().message().c_str());
    return 1;
  }
  transport::LinkConfig link = choice->link;
  if (link.port == 0) link.port = o.peer.port;
  // One attempt: the parent listened before starting us, so a failure is
  // real (retrying would only hide it until the deadline).
  auto t = registry.find(link.type)->connect(o.peer.node, link, monotonic_ns() + o.timeout_s * 1'000'000'000ULL);
  if (!t) {
    std::fprintf(stderr, "latency_bench peer: connecting %s: %s\n", link.describe().c_str(),
                 t.status().message().c_str());
    return t.status().code() == StatusCode::kUnavailable ? kPeerExitUnavailable : 1;
  }
  auto session = serve_session(**t, o.poll);
  if (!session) {
    std::fprintf(stderr, "latency_bench peer: %s\n", session.status().message().c_str());
    return 1;
  }
  return session->said_bye ? 0 : 3;
}

}  // namespace fjord::bench
