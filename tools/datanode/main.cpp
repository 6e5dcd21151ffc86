// fjord-datanode: runs one data node of a cluster (NDB's ndbmtd, or ndbd
// with --single-threaded).
//
//   fjord-datanode --config cluster.ini --node-id 1
//   fjord-datanode --config cluster.ini --node-id 1 --print-thread-config
//
// Logs to DataDir/ndb_<id>_out.log and stderr; stops cleanly on SIGTERM or
// SIGINT. Exit codes: 0 stopped cleanly, 1 could not start, 2 bad usage.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
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
    "  --control-socket NAME    socket for fjord-stats (default DataDir/fjord-control/node-<id>, in a directory\n"
    "                           private to this user; '@name' = an abstract socket)\n"
    "  --quiet                  log to the file only\n"
    "  --help                   this text\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "fjord-datanode: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

// What the command line asks for.
struct CommandLine {
  fjord::engine::DataNodeOptions options;
  bool print_layout = false;
  bool quiet = false;
  std::string log_file;  // empty: DataDir/ndb_<id>_out.log; "-": stderr only
};

// Fills `line` from argv. Returns the exit code when the program should stop
// here (0 after --help, 2 on bad usage), nothing when it should run.
std::optional<int> parse_command_line(int argc, char** argv, CommandLine& line) {
  fjord::engine::DataNodeOptions& options = line.options;
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
      options.node_id = static_cast<fjord::NodeId>(id);
    } else if (arg == "--thread-config") {
      const char* v = value();
      if (!v) return usage_error("--thread-config needs a ThreadConfig string");
      options.thread_config = v;
    } else if (arg == "--single-threaded" || arg == "--multi-threaded") {
      options.single_threaded = arg == "--single-threaded";
    } else if (arg == "--print-thread-config") {
      line.print_layout = true;
    } else if (arg == "--log-file") {
      const char* v = value();
      if (!v) return usage_error("--log-file needs a path");
      line.log_file = v;
    } else if (arg == "--control-socket") {
      const char* v = value();
      if (!v) return usage_error("--control-socket needs a name");
      options.control_socket = v;
    } else if (arg == "--quiet") {
      line.quiet = true;
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  if (options.config_path.empty()) return usage_error("--config is required");
  if (options.node_id == fjord::kNoNode) return usage_error("--node-id is required");
  return std::nullopt;
}

// SIGTERM and SIGINT go to the main thread only: blocked here, before any
// thread starts (threads inherit the mask), and taken with sigwait().
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// Sends the log where the command line or the node's DataDir says. False,
// with the reason on stderr, when the log file cannot be opened.
bool open_log(const fjord::engine::DataNode& node, const CommandLine& line) {
  const fjord::NodeId id = line.options.node_id;
  std::string path = line.log_file;
  if (path.empty())
    path = node.config().node(id)->params.get_string("DataDir") + "/ndb_" + std::to_string(id) + "_out.log";
  if (path == "-") return true;
  if (!fjord::log_set_file(path)) {
    std::fprintf(stderr, "fjord-datanode: cannot open log file %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  if (line.quiet) fjord::log_set_stderr(false);
  return true;
}

// Starts the node and runs it until SIGTERM or SIGINT. The exit code.
int run_until_stopped(fjord::engine::DataNode& node, fjord::NodeId id, const sigset_t& stop_signals) {
  if (fjord::Status s = node.start(); !s) {
    FJORD_LOG_ERROR("could not start: %s", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "fjord-datanode: node %u running; stats: fjord-stats --node %u; stop with SIGTERM\n", id, id);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  FJORD_LOG_INFO("received %s: shutting down", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  node.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fjord;
  CommandLine line;
  if (std::optional<int> exit_code = parse_command_line(argc, argv, line)) return *exit_code;
  line.options.registry = &tools::builtin_registry();
  log_set_tag("ndbd");
  const sigset_t stop_signals = block_stop_signals();

  auto node = engine::DataNode::create(line.options);
  if (!node) {
    std::fprintf(stderr, "fjord-datanode: %s\n", node.status().message().c_str());
    return 1;
  }
  if (line.print_layout) {
    std::fputs((*node)->layout_text().c_str(), stdout);
    return 0;
  }
  if (!open_log(**node, line)) return 1;
  return run_until_stopped(**node, line.options.node_id, stop_signals);
}
