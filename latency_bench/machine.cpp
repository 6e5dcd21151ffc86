#include "machine.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown";
}

// Median cost of one clock read, from batches of reads.
uint64_t clock_read_ns() {
  constexpr int kBatches = 31;
  constexpr int kReads = 2000;
  uint64_t costs[kBatches];
  for (uint64_t& cost : costs) {
    const uint64_t start = monotonic_ns();
    uint64_t sink = 0;
    for (int i = 0; i < kReads; ++i) sink += monotonic_ns();
    asm volatile("" : : "r"(sink));
    cost = (monotonic_ns() - start) / kReads;
  }
  std::nth_element(costs, costs + kBatches / 2, costs + kBatches);
  return costs[kBatches / 2];
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

struct RusageNow {
  uint64_t cpu_ns;
  uint64_t involuntary_switches;
};

// The measuring thread only (not an in-process peer). CPU time from the
// thread clock, which is exact; getrusage's times are tick-sampled.
RusageNow rusage_now() {
  timespec cpu{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return {static_cast<uint64_t>(cpu.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(cpu.tv_nsec),
          static_cast<uint64_t>(u.ru_nivcsw)};
}

}  // namespace

CpuMeter::CpuMeter() : wall_start_ns_(monotonic_ns()) {
  const RusageNow now = rusage_now();
  cpu_start_ns_ = now.cpu_ns;
  switches_start_ = now.involuntary_switches;
}

CpuUsage CpuMeter::read() const {
  const RusageNow now = rusage_now();
  return {monotonic_ns() - wall_start_ns_, now.cpu_ns - cpu_start_ns_, now.involuntary_switches - switches_start_};
}

MachineFacts read_machine_facts() {
  MachineFacts f;
  f.online_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  f.allowed_cpus = cpu_list_text(allowed_cpus());
  f.cpu_model = cpu_model();
  utsname u{};
  f.kernel = ::uname(&u) == 0 ? u.release : "unknown";
  f.clocksource = first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  if (f.clocksource.empty()) f.clocksource = "unknown";
  f.clock_read_ns = clock_read_ns();
  f.load_start = load_average();
  f.load_end = f.load_start;
  f.started_utc = utc_now();
  return f;
}

ProcessSchedule read_process_schedule(int pid) {
  ProcessSchedule out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = ::opendir(dir.c_str());
  if (!tasks) return out;
  while (const dirent* task = ::readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    unsigned long long cpu = 0, wait = 0;
    if (std::FILE* in = std::fopen((dir + "/" + task->d_name + "/schedstat").c_str(), "r")) {
      if (std::fscanf(in, "%llu %llu", &cpu, &wait) == 2) {
        out.cpu_ns += cpu;
        out.wait_ns += wait;
        out.known = true;
      }
      std::fclose(in);
    }
  }
  ::closedir(tasks);
  return out;
}

ScheduleShare schedule_share(const ProcessSchedule& before, const ProcessSchedule& after, uint64_t wall_ns) {
  ScheduleShare s;
  if (!before.known || !after.known || wall_ns == 0 || after.cpu_ns < before.cpu_ns) return s;
  s.known = true;
  s.on_cpu = static_cast<double>(after.cpu_ns - before.cpu_ns) / static_cast<double>(wall_ns);
  s.waiting = static_cast<double>(after.wait_ns - before.wait_ns) / static_cast<double>(wall_ns);
  return s;
}

double load_average() {
  double load = 0;
  if (std::FILE* in = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(in, "%lf", &load) != 1) load = 0;
    std::fclose(in);
  }
  return load;
}

bool measured_under_load(const MachineFacts& facts) {
  // Only the load before the run says something about neighbours: by the end
  // the average includes this program's own spinning processes.
  return facts.load_start > 0.5;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  return out;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

std::vector<int> default_cpus() {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.empty()) return {0, 0};
  return {allowed[0], allowed.size() > 1 ? allowed[1] : allowed[0]};
}

Status check_cpus(const std::vector<int>& cpus) {
  const std::vector<int> allowed = allowed_cpus();
  for (int cpu : cpus)
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
      return Status(StatusCode::kInvalidArgument,
                    "--cpus: CPU " + std::to_string(cpu) +
                        " is not available to this process (allowed: " + cpu_list_text(allowed) + ")");
  return Status::ok();
}

Status pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    return io_error("sched_setaffinity CPU " + std::to_string(cpu), errno);
  return Status::ok();
}

}  // namespace fjord::bench
