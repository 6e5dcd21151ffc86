// fjord-stats: reads statistics from a running data node over its control
// socket (per thread: loops, signals, mean signals per loop, busy/spin/sleep
// time, job-buffer fill; per link: bytes, mean send and receive size,
// slowdown and overload counts; DataMemory; per LDM and TC instance and in
// total, tables of the blocks' counters: key operations, lock waits,
// commits and aborts, scans and rows per round, records in use;
// transactions committed and aborted, and why).
//
//   fjord-stats --config cluster.ini --node 1          human-readable
//   fjord-stats --config cluster.ini --node 1 --json   one JSON object
//   fjord-stats --socket /data/fjord-control/node-1 --watch 2   every 2 seconds until interrupted
//   fjord-stats --config cluster.ini --node 1 --log-stats 10   the node logs statistics every 10 s (0 = off)
//   fjord-stats --config cluster.ini --node 1 --layout  the node's thread layout
//
// The node is found from the config (its ControlSocket, else
// DataDir/fjord-control/node-<id>), and a reply is printed only when the
// process answering runs as this user or root (engine::control_request).
//
// Exit codes: 0 ok, 1 the node did not answer (or is not this user's), 2
// bad usage.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "builtin_transporters.h"
#include "fjord/engine/data_node.h"

namespace {
const char kUsage[] =
    "usage: fjord-stats (--config FILE --node N | --socket NAME) [--json | --layout | --log-stats SECONDS]\n"
    "                   [--watch SECONDS]\n"
    "\n"
    "  --config FILE        the cluster configuration the node runs with\n"
    "  --node N             the data node's id: its socket is its ControlSocket, else\n"
    "                       DataDir/fjord-control/node-N (a relative DataDir is taken from here)\n"
    "  --socket NAME        the control socket itself ('@name' = abstract socket)\n"
    "  --json               statistics as one JSON object\n"
    "  --layout             the node's thread layout instead of statistics\n"
    "  --log-stats SECONDS  make the node log statistics every SECONDS (0 = stop)\n"
    "  --watch SECONDS      repeat every SECONDS until interrupted\n"
    "  --help               this text\n";

int usage_error(const std::string& m) {
  std::fprintf(stderr, "fjord-stats: %s\n\n%s", m.c_str(), kUsage);
  return 2;
}

bool parse_seconds(const char* v, unsigned long max, unsigned long& out) {
  if (!v) return false;
  char* end = nullptr;
  out = std::strtoul(v, &end, 10);
  return *v != '\0' && *end == '\0' && out <= max;
}
// Node `node`'s control socket by the config at `path`.
fjord::Result<std::string> socket_of(const std::string& path, fjord::NodeId node) {
  auto cluster = fjord::engine::load_cluster_config_file(path, fjord::tools::builtin_registry());
  if (!cluster) return cluster.status();
  const fjord::engine::NodeDef* def = cluster->node(node);
  if (def == nullptr || def->kind != fjord::engine::NodeKind::kData)
    return fjord::Status(fjord::StatusCode::kNotFound,
                         path + " has no data node ([ndbd]) with NodeId " + std::to_string(node));
  return fjord::engine::control_socket_of(*cluster, node);
}
}  // namespace

int main(int argc, char** argv) {
  std::string socket, config, command = "stats";
  unsigned long node = 0, watch = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--node") {
      if (!parse_seconds(v, 255, node) || node == 0) return usage_error("--node takes a node id in 1..255");
      ++i;
    } else if (arg == "--config") {
      if (!v) return usage_error("--config needs a file");
      config = v;
      ++i;
    } else if (arg == "--socket") {
      if (!v) return usage_error("--socket needs a name");
      socket = v;
      ++i;
    } else if (arg == "--json") {
      command = "stats json";
    } else if (arg == "--layout") {
      command = "layout";
    } else if (arg == "--log-stats") {
      unsigned long s;
      if (!parse_seconds(v, 86400, s)) return usage_error("--log-stats takes seconds in 0..86400");
      command = "log-stats " + std::to_string(s);
      ++i;
    } else if (arg == "--watch") {
      if (!parse_seconds(v, 3600, watch) || watch == 0) return usage_error("--watch takes seconds in 1..3600");
      ++i;
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  if (node != 0) {
    if (!socket.empty()) return usage_error("give --node (with --config) or --socket, not both");
    if (config.empty()) return usage_error("--node needs --config FILE: the node's socket is found from its config");
    auto found = socket_of(config, static_cast<fjord::NodeId>(node));
    if (!found) {
      std::fprintf(stderr, "fjord-stats: %s\n", found.status().message().c_str());
      return 2;
    }
    socket = *found;
  }
  if (socket.empty()) return usage_error("--config FILE --node N, or --socket NAME, is required");
  for (;;) {
    auto reply = fjord::engine::control_request(socket, command);
    if (!reply) {
      std::fprintf(stderr, "fjord-stats: %s\n", reply.status().message().c_str());
      return 1;
    }
    std::fputs(reply->c_str(), stdout);
    std::fflush(stdout);
    if (reply->rfind("error:", 0) == 0) return 2;
    if (watch == 0) return 0;
    std::this_thread::sleep_for(std::chrono::seconds(watch));
  }
}
