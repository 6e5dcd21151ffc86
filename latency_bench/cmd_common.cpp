// Helpers shared by the commands: CPUs and pinning, machine facts, errors,
// printing the report.
#include <cstdio>

#include "builtin_transporters.h"
#include "commands.h"

namespace fjord::bench {

std::vector<std::string> database_transporters() {
  std::vector<std::string> names;
  for (std::string& name : built_in_transporters()) {
    names.push_back(name);
    if (name == "tcp") names.emplace_back(kTcpTls);
  }
  return names;
}

std::vector<std::string> built_in_transporters() {
  std::vector<std::string> names;
  for (const transport::TransporterFactory* f : tools::builtin_registry().all())
    if (bench_sets_up(f->name())) names.emplace_back(f->name());
  return names;
}

bool bench_sets_up(std::string_view transporter) { return transporter != "dpdk"; }

Result<RunContext> prepare_run(const Options& o) {
  RunContext ctx;
  const bool remote = o.command == Command::kServer || o.command == Command::kClient;
  ctx.cpus = o.cpus.empty() && !remote ? default_cpus() : o.cpus;
  if (Status s = check_cpus(ctx.cpus); !s) return s;
  const std::string allowed = cpu_list_text(allowed_cpus());  // before pinning narrows it
  if (!ctx.cpus.empty()) {
    if (Status s = pin_this_thread(ctx.cpus[0]); !s) return s;
  }
  ctx.machine = read_machine_facts();  // after pinning: the clock cost is measured where we run
  ctx.machine.allowed_cpus = allowed;
  ctx.built_in = built_in_transporters();
  return ctx;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "latency_bench: %s\nTry 'latency_bench --help' for the options.\n", message.c_str());
  return 2;
}

int run_error(const std::string& message) {
  std::fprintf(stderr, "latency_bench: %s\n", message.c_str());
  return 1;
}

void emit_report(Report& report, const Options& o) {
  report.machine.load_end = load_average();
  if (report.conditions.cpus.size() == 2 && report.conditions.cpus[0] == report.conditions.cpus[1])
    report.notes.emplace_back(
        "both processes share one CPU: busy-poll round trips then measure the scheduler, not the link");
  const std::string text = o.json ? format_json(report) : format_table(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace fjord::bench
