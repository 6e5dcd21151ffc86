// latency_bench's commands, one function each, returning the exit code
// (0 done, 1 a run failed, 2 bad options or config). main() parses the
// options and calls one of them; each lives in a file of its own
// (cmd_access.cpp, cmd_throughput.cpp, cmd_ping.cpp, cmd_all.cpp, cmd_remote.cpp).
//
// Slow path; the main thread only (the measuring side is pinned here).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "machine.h"
#include "options.h"
#include "report.h"

namespace fjord::bench {

int run_access_command(const Options& options);
int run_throughput_command(const Options& options);
int run_ping_command(const Options& options);
int run_all_command(const Options& options);  // ping-all
int run_server_command(const Options& options);
int run_client_command(const Options& options);

// Shared by the commands (cmd_common.cpp).
struct RunContext {
  MachineFacts machine;
  std::vector<int> cpus;  // {bench, peer}; {self} or {} for --server/--client
  std::vector<std::string> built_in;
};
// Checks and applies --cpus (pins this thread to the first), reads the
// machine facts. kInvalidArgument naming --cpus when a CPU is not ours.
Result<RunContext> prepare_run(const Options& options);
// Prints a usage-level error ("latency_bench: ...") and returns 2.
int usage_error(const std::string& message);
// Prints a run error and returns 1.
int run_error(const std::string& message);
// Finishes the machine facts and prints the report as a table or JSON.
void emit_report(Report& report, const Options& options);
// The registered transporters.
// Whether latency_bench generates links of this transporter: not DPDK,
// each of whose ends names a device of its own (docs/transport.md).
bool bench_sets_up(std::string_view transporter);
std::vector<std::string> built_in_transporters();
// What access and throughput measure: the registered transporters with
// kTcpTls after tcp.
std::vector<std::string> database_transporters();

}  // namespace fjord::bench
