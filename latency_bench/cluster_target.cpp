#include "cluster_target.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "builtin_transporters.h"
#include "fjord/engine/cluster_config.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/thread_config.h"
#include "fjord/tcp/tls_credentials.h"
#include "fjord/transport/config_file.h"

namespace fjord::bench {
namespace {

Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// Media whose rendezvous lives inside one process cannot reach a data node
// in its own process; the access table skips them with this reason.
constexpr std::string_view kProcessLocal[] = {"sim"};
// Media the architecture names; when this build lacks one, the table says so
// rather than leaving the column out.
constexpr std::string_view kKnownElsewhere[] = {"rdma", "dpdk"};

// Why a transporter of the design is absent from this program.
std::string absent_reason(std::string_view name) {
  if (name == "dpdk" && tools::builtin_registry().find(name))
    return "latency_bench does not set up DPDK links (each end names a DPDK device of its own: docs/transport.md)";
  return "not built into this program (this build has no " + std::string(name) + " transporter)";
}

std::string link_text(const std::string& type, NodeId data_node, NodeId api_node) {
  if (type == kTcpTls) return "[tcp] link " + std::to_string(data_node) + "-" + std::to_string(api_node) + " with TLS";
  return "[" + type + "] link " + std::to_string(data_node) + "-" + std::to_string(api_node);
}

// The transporters to measure, and the ones skipped with their reasons.
Status choose_transporters(const Options& o, std::vector<std::string>& run, std::vector<TransporterColumn>& skipped) {
  auto& registry = tools::builtin_registry();
  const std::vector<std::string> wanted =
      o.transporter.empty() ? database_transporters() : std::vector<std::string>{o.transporter};
  for (const std::string& name : wanted) {
    TransporterColumn column;
    column.name = name;
    column.outcome = Outcome::kUnavailable;
    const std::string_view medium = name == kTcpTls ? std::string_view("tcp") : std::string_view(name);
    if (std::find(std::begin(kProcessLocal), std::end(kProcessLocal), name) != std::end(kProcessLocal)) {
      column.reason = std::string(registry.find(name)->description()) +
                      ": in-process only, and the data node runs in its own process";
    } else if (Status s = registry.find(medium)->probe(); !s) {
      column.reason = s.message();
    } else {
      run.push_back(name);
      continue;
    }
    if (!o.transporter.empty()) return Status(StatusCode::kUnavailable, "--transporter " + name + ": " + column.reason);
    skipped.push_back(column);
  }
  if (o.transporter.empty())
    for (std::string_view name : kKnownElsewhere)
      if (!registry.find(name) || !bench_sets_up(name))
        skipped.push_back({std::string(name), Outcome::kUnavailable, absent_reason(name), kNoNode, ""});
  if (run.empty()) return Status(StatusCode::kUnavailable, "no transporter can reach a data node here");
  return Status::ok();
}

// A cluster CA and certificates for the data node and every API node of
// the run, in the run's directory (removed with it).
Status write_run_credentials(EmbeddedConfig& c, const std::string& dir) {
  std::vector<NodeId> nodes{kEmbeddedDataNode};
  for (std::size_t i = 0; i < c.transporters.size(); ++i)
    for (uint32_t a = 0; a < c.api_nodes_per_transporter; ++a) nodes.push_back(embedded_api_node(i, a));
  c.tls_search_path = dir;
  if (Status s = tcp::write_tls_credentials(dir, nodes); !s)
    return Status(s.code(), "TLS credentials for the tcp-tls links: " + s.message());
  return Status::ok();
}

Status write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return io_error("creating " + path, errno);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) return io_error("writing " + path, errno);
  return Status::ok();
}

Result<ClusterTarget> embedded_cluster(const Options& o, const RunContext& ctx, uint32_t api_nodes, uint64_t rows,
                                       uint32_t row_bytes) {
  static std::atomic<uint32_t> counter{0};
  ClusterTarget t;
  std::vector<std::string> run;
  if (Status s = choose_transporters(o, run, t.skipped); !s) return s;
  auto program = find_datanode_program();
  if (!program) return program.status();
  auto port = free_tcp_port();
  if (!port) return port.status();
  auto dir = make_temp_dir();
  if (!dir) return dir.status();
  EmbeddedConfig c;
  c.transporters = run;
  c.port = *port;
  c.node_cpu = ctx.cpus.size() == 2 ? ctx.cpus[1] : -1;
  c.spintime_us = embedded_spintime_us(ctx);
  if (Status s = take_node_params(o.node_params, c); !s) return s;
  c.data_dir = *dir;
  const uint64_t unique = static_cast<uint64_t>(::getpid()) * 1000 + counter.fetch_add(1);
  c.control_socket = "@fjord-latency-bench-" + std::to_string(unique);
  c.data_memory_bytes = embedded_data_memory_bytes(rows, row_bytes);
  c.api_nodes_per_transporter = api_nodes;
  c.endpoint_base = unique << 8;
  if (std::find(run.begin(), run.end(), kTcpTls) != run.end()) {
    if (Status s = write_run_credentials(c, *dir); !s) {
      std::error_code ignored;
      std::filesystem::remove_all(*dir, ignored);
      return s;
    }
  }
  t.config_path = *dir + "/config.ini";
  t.temp_dir = *dir;
  t.data_node = kEmbeddedDataNode;
  t.control_socket = c.control_socket;
  t.config_label = "generated";
  NodeLaunch launch{*program,
                    t.config_path,
                    kEmbeddedDataNode,
                    c.node_cpu,
                    c.control_socket,
                    *dir + "/ndb_1_out.log",
                    *dir,
                    o.timeout_s * 1'000'000'000ULL};
  if (Status s = write_file(t.config_path, embedded_config_text(c, tools::builtin_registry())); !s) {
    std::error_code ignored;
    std::filesystem::remove_all(*dir, ignored);
    return s;
  }
  auto node = NodeProcess::start(launch);
  if (!node) return node.status();
  t.node = std::move(node).value();
  for (std::size_t i = 0; i < run.size(); ++i) {
    TargetEndpoint e;
    e.transporter = run[i];
    for (uint32_t a = 0; a < api_nodes; ++a) e.api_nodes.push_back(embedded_api_node(i, a));
    e.link = link_text(run[i], kEmbeddedDataNode, e.api_nodes.front());
    t.endpoints.push_back(e);
  }
  t.description = "fjord-datanode started here (" + *program + ", config and log in " + *dir +
                  ", removed afterwards), single-threaded, " +
                  (c.spintime_us ? "spinning " + std::to_string(c.spintime_us) + " us before it sleeps"
                                 : std::string("not spinning (it shares this program's only CPU)")) +
                  (c.node_cpu >= 0 ? ", on CPU " + std::to_string(c.node_cpu) : std::string()) + ", DataMemory " +
                  std::to_string(c.data_memory_bytes >> 20) + "M";
  return t;
}

// The [api] nodes from `first` on, in file order.
Result<std::vector<NodeId>> api_nodes_from(const engine::ClusterConfig& cluster, NodeId first, uint32_t count) {
  const auto apis = cluster.of_kind(engine::NodeKind::kApi);
  std::size_t at = 0;
  if (first != kNoNode) {
    while (at < apis.size() && apis[at]->id != first) ++at;
    if (at == apis.size())
      return invalid("--api-node " + std::to_string(first) + ": " + cluster.path +
                     " has no [api] section with NodeId=" + std::to_string(first));
  }
  if (apis.size() - at < count)
    return invalid(cluster.path + ": " + std::to_string(count) + " executors need " + std::to_string(count) +
                   " [api] sections from node " + (apis.empty() ? std::string("?") : std::to_string(apis[at]->id)) +
                   " on; it has " + std::to_string(apis.size() - at));
  std::vector<NodeId> ids;
  for (std::size_t i = at; i < at + count; ++i) ids.push_back(apis[i]->id);
  return ids;
}

Result<ClusterTarget> cluster_from_file(const Options& o, const RunContext& ctx, uint32_t api_count) {
  auto& registry = tools::builtin_registry();
  auto cluster = engine::load_cluster_config_file(o.config_path, registry);
  if (!cluster) return invalid(cluster.status().message());
  const auto data_nodes = cluster->of_kind(engine::NodeKind::kData);
  if (data_nodes.empty()) return invalid(o.config_path + ": no [ndbd] section (a data node to measure)");
  const NodeId data = data_nodes.front()->id;
  if (o.data_node != kNoNode && o.data_node != data)
    return invalid("--data-node " + std::to_string(o.data_node) + ": the API connects to the first [ndbd] section of " +
                   o.config_path + ", node " + std::to_string(data));
  auto apis = api_nodes_from(*cluster, o.api_node, api_count);
  if (!apis) return apis.status();
  const transport::LinkConfig* link = cluster->links.find(apis->front(), data);
  FJORD_ASSERT(link != nullptr);  // a data node and an API node always have a link (tcp by default)
  for (NodeId api : *apis)
    if (const transport::LinkConfig* other = cluster->links.find(api, data); other->type != link->type)
      return invalid(o.config_path + ": the executors' links differ (" + link->describe() + " and " +
                     other->describe() + "); give them one transporter");
  ClusterTarget t;
  t.config_path = o.config_path;
  t.config_label = o.config_path;
  t.data_node = data;
  t.control_socket = engine::control_socket_of(*cluster, data);
  t.endpoints.push_back({link->type, *apis, link_text(link->type, data, apis->front())});
  if (const transport::TransporterFactory* f = registry.find(link->type); f)
    if (Status s = f->probe(); !s) return Status(StatusCode::kUnavailable, link->describe() + ": " + s.message());
  t.description = "node " + std::to_string(data) + " of " + o.config_path;
  if (!o.start_node) {
    t.description += ", started by you";
    return t;
  }
  auto program = find_datanode_program();
  if (!program) return program.status();
  const int cpu = ctx.cpus.size() == 2 ? ctx.cpus[1] : -1;
  auto node = NodeProcess::start(
      NodeLaunch{*program, o.config_path, data, cpu, t.control_socket, "", "", o.timeout_s * 1'000'000'000ULL});
  if (!node) return node.status();
  t.node = std::move(node).value();
  t.description += ", started here (--start-node)" + (cpu >= 0 ? " on CPU " + std::to_string(cpu) : std::string()) +
                   " with the file's thread layout";
  return t;
}

}  // namespace

Status take_node_params(const std::vector<std::string>& params, EmbeddedConfig& c) {
  for (const std::string& p : params) {
    const std::string key = p.substr(0, p.find('='));
    if (key != "SchedulerSpinTimer") {
      c.node_params.push_back(p);
      continue;
    }
    auto spin = config::parse_uint(p.substr(key.size() + 1));
    if (!spin || *spin > engine::kSpintimeMaxUs)
      return Status(StatusCode::kInvalidArgument, "--node-param/--sweep " + p + ": SchedulerSpinTimer takes 0.." +
                                                      std::to_string(engine::kSpintimeMaxUs) + " microseconds");
    c.spintime_us = static_cast<uint32_t>(*spin);
  }
  return Status::ok();
}

uint32_t embedded_spintime_us(const RunContext& ctx) {
  return ctx.cpus.size() == 2 && ctx.cpus[0] == ctx.cpus[1] ? 0 : 500;
}

Result<ClusterTarget> prepare_cluster(const Options& o, const RunContext& ctx, uint32_t api_nodes_wanted, uint64_t rows,
                                      uint32_t row_bytes) {
  if (o.config_path.empty()) return embedded_cluster(o, ctx, api_nodes_wanted, rows, row_bytes);
  return cluster_from_file(o, ctx, api_nodes_wanted);
}

Result<std::unique_ptr<api::Connection>> connect_api(const ClusterTarget& t, NodeId api_node, const Options& o) {
  auto conn = api::Connection::connect(api_options(t, api_node, o));
  if (!conn)
    return Status(conn.status().code(), "API node " + std::to_string(api_node) + ": " + conn.status().message());
  return conn;
}

api::ConnectOptions api_options(const ClusterTarget& t, NodeId api_node, const Options& o) {
  api::ConnectOptions c;
  c.config_path = t.config_path;
  c.node_id = api_node;
  c.registry = &tools::builtin_registry();
  c.connect_timeout_ms = static_cast<uint32_t>(o.timeout_s * 1000);
  c.request_timeout_ms = static_cast<uint32_t>(std::max<uint64_t>(o.timeout_s, 30) * 1000);
  c.poll_mode = o.poll == PollMode::kBusy ? api::PollMode::kBusy : api::PollMode::kSleep;
  c.spin_us = 0;
  c.max_transactions = kMaxInFlight + 8;
  return c;
}

}  // namespace fjord::bench
