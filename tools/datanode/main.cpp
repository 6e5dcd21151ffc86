// fjord-datanode: runs one data node of a cluster (NDB's ndbmtd, or ndbd
// with --single-threaded).
//
//   fjord-datanode --config cluster.ini --node-id 1
//   fjord-datanode --config cluster.ini --node-id 1 --print-thread-config
//
// Logs to DataDir/ndb_<id>_out.log and stderr; stops cleanly on SIGTERM or
// SIGINT. Exit codes: 0 stopped cleanly, 1 could not start, 2 bad usage.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "builtin_transporters.h"
#include "fjord/base/log.h"
#include "fjord/engine/data_node.h"

namespace {

const char kUsage[] =
    "usage: fjord-datanode --config FILE --node-id N [options]\n"
    "\n"
    "Runs data node N of the cluster described by FILE (NDB config.ini style).\n"
    "\n"
    "  --config FILE            cluster configuration ([ndbd], [api], [tcp]/[shm]/... sections)\n"
    "  --node-id N              which [ndbd] section this process is (1..255)\n"
    "  --thread-config STRING   overrides ThreadConfig, e.g. 'ldm={count=2},tc={count=1},recv={count=1}'\n"
    "  --single-threaded        one thread receives, executes and sends (NDB's ndbd)\n"
    "  --multi-threaded         threads by type (NDB's ndbmtd; the default)\n"
    "  --print-thread-config    print the thread layout (type, blocks, CPUs, realtime, spintime) and exit\n"
    "  --log-file PATH          log here (default: DataDir/ndb_<id>_out.log); '-' = stderr only\n"
    "  --control-socket NAME    socket for fjord-stats (default @fjord-node-<id>, an abstract socket)\n"
    "  --quiet                  log to the file only\n"
    "  --help                   this text\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "fjord-datanode: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fjord;
  engine::DataNodeOptions options;
  bool print_layout = false, quiet = false;
  std::string log_file;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--config") {
      const char* v = value();
      if (!v) return usage_error("--config needs a file");
      options.config_path = v;
    } else if (arg == "--node-id" || arg == "--ndb-nodeid") {
      const char* v = value();
      char* end = nullptr;
      const long id = v ? std::strtol(v, &end, 10) : 0;
      if (!v || *end != '\0' || id < 1 || id > 255) return usage_error("--node-id takes a node id in 1..255");
      options.node_id = static_cast<NodeId>(id);
    } else if (arg == "--thread-config") {
      const char* v = value();
      if (!v) return usage_error("--thread-config needs a ThreadConfig string");
      options.thread_config = v;
    } else if (arg == "--single-threaded") {
      options.single_threaded = true;
    } else if (arg == "--multi-threaded") {
      options.single_threaded = false;
    } else if (arg == "--print-thread-config") {
      print_layout = true;
    } else if (arg == "--log-file") {
      const char* v = value();
      if (!v) return usage_error("--log-file needs a path");
      log_file = v;
    } else if (arg == "--control-socket") {
      const char* v = value();
      if (!v) return usage_error("--control-socket needs a name");
      options.control_socket = v;
    } else if (arg == "--quiet") {
      quiet = true;
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  if (options.config_path.empty()) return usage_error("--config is required");
  if (options.node_id == kNoNode) return usage_error("--node-id is required");
  options.registry = &tools::builtin_registry();
  log_set_tag("ndbd");

  // Signals go to the main thread only: block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto node = engine::DataNode::create(options);
  if (!node) {
    std::fprintf(stderr, "fjord-datanode: %s\n", node.status().message().c_str());
    return 1;
  }
  if (print_layout) {
    std::fputs((*node)->layout_text().c_str(), stdout);
    return 0;
  }
  if (log_file.empty()) {
    const engine::NodeDef* self = (*node)->config().node(options.node_id);
    log_file = self->params.get_string("DataDir") + "/ndb_" + std::to_string(options.node_id) + "_out.log";
  }
  if (log_file != "-" && !log_set_file(log_file)) {
    std::fprintf(stderr, "fjord-datanode: cannot open log file %s: %s\n", log_file.c_str(), std::strerror(errno));
    return 1;
  }
  if (quiet && log_file != "-") log_set_stderr(false);
  if (Status s = (*node)->start(); !s) {
    FJORD_LOG_ERROR("could not start: %s", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "fjord-datanode: node %u running; stats: fjord-stats --node %u; stop with SIGTERM\n",
               options.node_id, options.node_id);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  FJORD_LOG_INFO("received %s: shutting down", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*node)->stop();
  return 0;
}
