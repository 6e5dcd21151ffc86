// The machine a run happened on (CPUs, kernel, clock, load), and CPU pinning.
//
// Every report prints these facts beside its figures: on a shared machine a
// number means little without them. Slow path; any thread (pin_this_thread
// pins the caller).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::bench {

struct MachineFacts {
  int online_cpus = 0;
  std::string allowed_cpus;  // this process's affinity, "0-1"
  std::string cpu_model;
  std::string kernel;          // uname -r
  std::string clocksource;     // /sys/.../current_clocksource
  uint64_t clock_read_ns = 0;  // cost of one monotonic_ns() here, measured
  double load_start = 0;       // 1-minute load average when the run began
  double load_end = 0;         // when it ended (includes this program's own spinning)
  std::string started_utc;     // "2025-01-31T12:00:00Z"
};

// Reads everything but load_end (set it with load_average() at the end).
MachineFacts read_machine_facts();
double load_average();
// True when the load average before the run says other work shared the CPUs.
bool measured_under_load(const MachineFacts& facts);

// How much of a measurement's wall time the measuring thread actually ran,
// and how often the kernel took the CPU away (other work on a shared machine).
// A CpuMeter is read by the thread that created it.
struct CpuUsage {
  uint64_t wall_ns = 0;
  uint64_t cpu_ns = 0;                // user + system time of the measuring thread
  uint64_t involuntary_switches = 0;  // preemptions
  double on_cpu_share() const {
    return wall_ns == 0 ? 0.0 : static_cast<double>(cpu_ns) / static_cast<double>(wall_ns);
  }
};

class CpuMeter {
 public:
  CpuMeter();  // starts measuring
  CpuUsage read() const;

 private:
  uint64_t wall_start_ns_;
  uint64_t cpu_start_ns_;
  uint64_t switches_start_;
};

// Another process's scheduling, from /proc/PID/task/*/schedstat summed over
// its threads: time on a CPU, and time runnable but waiting for one (other
// work held the CPU). Used for the data node a run started.
struct ProcessSchedule {
  bool known = false;
  uint64_t cpu_ns = 0;
  uint64_t wait_ns = 0;
};
ProcessSchedule read_process_schedule(int pid);
// Per second of `wall_ns` between two readings: CPU-seconds run and waited.
struct ScheduleShare {
  bool known = false;
  double on_cpu = 0;
  double waiting = 0;
};
ScheduleShare schedule_share(const ProcessSchedule& before, const ProcessSchedule& after, uint64_t wall_ns);

// CPUs this process may run on, ascending.
std::vector<int> allowed_cpus();
// "0-1", "0,2-3"
std::string cpu_list_text(const std::vector<int>& cpus);
// The first two allowed CPUs (the same one twice on a one-CPU machine).
std::vector<int> default_cpus();
// kInvalidArgument naming --cpus when a CPU is not allowed here.
Status check_cpus(const std::vector<int>& cpus);
Status pin_this_thread(int cpu);

}  // namespace fjord::bench
