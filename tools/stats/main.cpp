// fjord-stats: reads statistics from a running data node over its control
// socket (per thread: loops, signals, mean signals per loop, busy/spin/sleep
// time, job-buffer fill; per link: bytes, mean send and receive size,
// slowdown and overload counts; DataMemory; per LDM and TC instance and in
// total, tables of the blocks' counters: key operations, lock waits,
// commits and aborts, scans and rows per round, records in use;
// transactions committed and aborted, and why).
//
//   fjord-stats --node 1               human-readable
//   fjord-stats --node 1 --json        one JSON object
//   fjord-stats --node 1 --watch 2     every 2 seconds until interrupted
//   fjord-stats --node 1 --log-stats 10   the node logs statistics every 10 s (0 = off)
//   fjord-stats --node 1 --layout      the node's thread layout
//
// Exit codes: 0 ok, 1 the node did not answer, 2 bad usage.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "fjord/engine/data_node.h"

namespace {
const char kUsage[] =
    "usage: fjord-stats (--node N | --socket NAME) [--json | --layout | --log-stats SECONDS] [--watch SECONDS]\n"
    "\n"
    "  --node N             the data node's id (its socket is @fjord-node-N unless ControlSocket says otherwise)\n"
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
}  // namespace

int main(int argc, char** argv) {
  std::string socket, command = "stats";
  unsigned long watch = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--node") {
      unsigned long id;
      if (!parse_seconds(v, 255, id) || id == 0) return usage_error("--node takes a node id in 1..255");
      socket = "@fjord-node-" + std::to_string(id);
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
  if (socket.empty()) return usage_error("--node or --socket is required");
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
