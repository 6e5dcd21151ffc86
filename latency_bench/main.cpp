// latency_bench: what each transporter buys, beside the floors of this
// machine (see --help and docs/latency_bench.md). Parses the options and runs
// one command; everything else lives in the fjord_latency_bench library so
// that tests link it.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "fjord/base/log.h"
#include "local_run.h"
#include "options.h"

namespace {

int run_main(int argc, char** argv) {
  using namespace fjord::bench;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<std::string> transporters = database_transporters();
  auto options = parse_options(args, transporters);
  if (!options) return usage_error(options.status().message());
  if (options->command == Command::kHelp) {
    std::fputs(help_text(transporters, options->help_for).c_str(), stdout);
    return 0;
  }
  // Transporters log connects and disconnects at info level; a benchmark
  // prints its own report and shows those only when asked.
  fjord::log_set_level(options->verbose ? fjord::LogLevel::kInfo : fjord::LogLevel::kWarn);
  switch (options->command) {
    case Command::kAccess: return run_access_command(*options);
    case Command::kThroughput: return run_throughput_command(*options);
    case Command::kPingAll: return run_all_command(*options);
    case Command::kPing: return run_ping_command(*options);
    case Command::kServer: return run_server_command(*options);
    case Command::kClient: return run_client_command(*options);
    case Command::kPeer: return run_peer_process(*options);
    case Command::kHelp: break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Expected failures are Status values; only running out of memory while
  // setting up can throw, and that is reported, not left to terminate().
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latency_bench: %s\n", e.what());
  }
  return 1;
}
