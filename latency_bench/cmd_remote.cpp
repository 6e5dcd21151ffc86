// --server / --client HOST (Dolphin's -server / -client HOST): the two sides
// of a run between two machines. The server is node 1 of the link and echoes
// whatever each client sends, one client after another, until interrupted;
// the client is node 2 and measures, as `ping` does locally.
#include <cstdio>

#include "builtin_transporters.h"
#include "commands.h"
#include "fjord/base/clock.h"
#include "local_run.h"
#include "wire.h"

namespace fjord::bench {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ULL;
constexpr uint64_t kAcceptWaitNs = 3600 * kNsPerSecond;

std::string type_of(const Options& o) { return o.transporter.empty() ? "tcp" : o.transporter; }

// This side's own address: --host, else every address ("0.0.0.0": the
// server listens on all of them, over rdma on every RDMA device; the client
// lets the route to the server choose).
std::string own_host(const Options& o) { return o.own_host.empty() ? "0.0.0.0" : o.own_host; }

// The server admits the client from --peer-host; a --config file says both
// itself, but --host replaces the server's own host there.
Result<LinkChoice> server_link(const Options& o) {
  auto& registry = tools::builtin_registry();
  if (o.config_path.empty())
    return generated_link(registry, type_of(o), LinkHosts{own_host(o), o.peer_host, o.port}, o.link_params);
  auto choice = link_from_file(registry, o.config_path, o.transporter);
  if (!choice || o.own_host.empty()) return choice;
  // The listener reads the table: the host changes there too.
  std::vector<transport::LinkConfig> links = choice->table.all();
  for (transport::LinkConfig& link : links)
    if (link.node1 == choice->link.node1 && link.node2 == choice->link.node2)
      (link.server_node == link.node1 ? link.host1 : link.host2) = o.own_host;
  choice->table = transport::LinkTable(std::move(links), choice->table.warnings());
  choice->link = *choice->table.find(choice->link.node1, choice->link.node2);
  return choice;
}

// The client connects to HOST (which replaces the server's host of a
// --config link) from --host (which replaces its own).
Result<LinkChoice> client_link(const Options& o) {
  auto& registry = tools::builtin_registry();
  auto choice = o.config_path.empty()
                    ? generated_link(registry, type_of(o), LinkHosts{o.host, own_host(o), o.port}, o.link_params)
                    : link_from_file(registry, o.config_path, o.transporter);
  if (!choice) return choice;
  transport::LinkConfig& link = choice->link;
  (link.server_node == link.node1 ? link.host1 : link.host2) = o.host;
  if (!o.own_host.empty()) (link.server_node == link.node1 ? link.host2 : link.host1) = o.own_host;
  return choice;
}

Status check_probe(const transport::LinkConfig& link) { return tools::builtin_registry().find(link.type)->probe(); }

void serve_forever(transport::Listener& listener, const Options& o) {
  for (;;) {
    auto t = listener.accept(monotonic_ns() + kAcceptWaitNs);
    if (!t) {
      if (t.status().code() != StatusCode::kTimeout)
        std::fprintf(stderr, "latency_bench server: %s\n", t.status().message().c_str());
      continue;
    }
    std::fprintf(stderr, "latency_bench server: client connected over %s\n", (*t)->config().describe().c_str());
    auto session = serve_session(**t, o.poll);
    if (!session)
      std::fprintf(stderr, "latency_bench server: session failed: %s\n", session.status().message().c_str());
    else
      std::fprintf(stderr, "latency_bench server: session ended (%s): %llu pings, %llu stream messages\n",
                   session->said_bye ? "bye" : "link down", static_cast<unsigned long long>(session->pings),
                   static_cast<unsigned long long>(session->stream_messages));
  }
}

}  // namespace

int run_server_command(const Options& o) {
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  auto choice = server_link(o);
  if (!choice) return usage_error(choice.status().message());
  const transport::LinkConfig& link = choice->link;
  if (Status s = check_probe(link); !s) return run_error(link.type + " cannot run here: " + s.message());
  auto listener = tools::builtin_registry().find(link.type)->listen(link.server_node, choice->table);
  if (!listener) return run_error("listen: " + listener.status().message());
  std::fprintf(stderr,
               "latency_bench server: %s listening on %s as node %u, admitting node %u from %s; poll %s; "
               "Ctrl-C stops it\n",
               link.type.c_str(), (*listener)->endpoint().c_str(), link.server_node, link.client_node(),
               link.host_of(link.client_node()).c_str(), poll_mode_name(o.poll));
  serve_forever(**listener, o);
  return 0;
}

int run_client_command(const Options& o) {
  auto ctx = prepare_run(o);
  if (!ctx) return usage_error(ctx.status().message());
  auto choice = client_link(o);
  if (!choice) return usage_error(choice.status().message());
  const transport::LinkConfig link = choice->link;
  if (Status s = check_probe(link); !s) return run_error(link.type + " cannot run here: " + s.message());
  if (message_frame_bytes(o.size_bytes, link.checksum) == 0)
    return usage_error("--size: " + std::to_string(o.size_bytes) + " does not fit one frame with Checksum=1");
  const uint64_t timeout_ns = o.timeout_s * kNsPerSecond;
  auto t =
      connect_link(*tools::builtin_registry().find(link.type), link.client_node(), link, monotonic_ns() + timeout_ns);
  if (!t) return run_error("connecting to " + o.host + ": " + t.status().message());
  const LocalPlan plan{std::move(choice).value(), o.poll,  o.stream, o.size_bytes, effective_iterations(o),
                       effective_warmup(o),       o.batch, -1,       timeout_ns,   o.verbose};
  Progress progress(true);
  Report report;
  report.machine = ctx->machine;
  report.conditions.command = o.stream ? "client-stream" : "client";
  report.conditions.cpus = ctx->cpus;
  report.conditions.where = "client of " + o.host + " (the server's CPU and load are not shown)";
  if (o.stream) report.conditions.batch = o.batch;
  Row row = new_fjord_row(plan);
  const Status measured = measure_on_link(plan, **t, row, progress);
  progress.clear();
  if ((*t)->is_up()) (void)send_control(**t, kByeSignal, {}, monotonic_ns() + timeout_ns);
  if (!measured) {
    row.outcome = Outcome::kFailed;
    row.reason = measured.message();
  }
  report.conditions.title = "latency_bench --client " + o.host + ": " + row.label + ", " +
                            std::to_string(row.size_bytes) + " B payload in " + std::to_string(row.wire_bytes) +
                            " B frames, " + std::to_string(plan.iterations) +
                            (o.stream ? " messages" : " round trips") + ", poll " + poll_mode_name(o.poll);
  report.rows.push_back(row);
  emit_report(report, o);
  return measured ? 0 : run_error(measured.message());
}

}  // namespace fjord::bench
