// detect_machine_topology: the cores of this machine and their hardware
// threads, limited to the CPUs this process may run on (sched_getaffinity).
// First choice hwloc (when the build found it); then /sys, as NDB did
// (topology/core_id and physical_package_id per CPU); last, sysconf's CPU
// count with every CPU taken as its own core. The origin field says which
// one answered, and why an earlier one did not.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fjord/engine/thread_config.h"

#if FJORD_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace fjord::engine {
namespace {

// CPUs this process may run on, ascending; empty if neither call works.
std::vector<int> usable_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu <= kCpuIdMax; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < online && cpu <= kCpuIdMax; ++cpu) cpus.push_back(static_cast<int>(cpu));
  return cpus;
}

// Cores ordered by their first CPU.
void sort_cores(MachineTopology& topology) {
  for (MachineTopology::Core& core : topology.cores) std::sort(core.cpus.begin(), core.cpus.end());
  std::sort(
      topology.cores.begin(), topology.cores.end(),
      [](const MachineTopology::Core& a, const MachineTopology::Core& b) { return a.cpus.front() < b.cpus.front(); });
}

#if FJORD_HAVE_HWLOC
Result<MachineTopology> from_hwloc(const std::vector<int>& usable) {
  hwloc_topology_t handle = nullptr;
  if (hwloc_topology_init(&handle) != 0) return Status(StatusCode::kUnavailable, "hwloc_topology_init failed");
  struct Destroy {
    hwloc_topology_t handle;
    ~Destroy() { hwloc_topology_destroy(handle); }
  } destroy{handle};
  if (hwloc_topology_load(handle) != 0) return Status(StatusCode::kUnavailable, "hwloc_topology_load failed");
  const unsigned api = hwloc_get_api_version();
  MachineTopology topology;
  topology.origin = "hwloc API " + std::to_string(api >> 16) + "." + std::to_string((api >> 8) & 0xff);
  const int core_count = hwloc_get_nbobjs_by_type(handle, HWLOC_OBJ_CORE);
  for (int i = 0; i < core_count; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(handle, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    if (core == nullptr) continue;
    MachineTopology::Core entry;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(handle, HWLOC_OBJ_PACKAGE, core);
    entry.package = package != nullptr ? static_cast<int>(package->logical_index) : 0;
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(handle, core->cpuset, HWLOC_OBJ_PU, pu)) != nullptr) {
      const int cpu = static_cast<int>(pu->os_index);
      if (std::binary_search(usable.begin(), usable.end(), cpu)) entry.cpus.push_back(cpu);
    }
    if (!entry.cpus.empty()) topology.cores.push_back(std::move(entry));
  }
  if (topology.cores.empty()) return Status(StatusCode::kUnavailable, "hwloc found no core with a usable CPU");
  sort_cores(topology);
  return topology;
}
#endif

bool read_int(const std::string& path, int& value) {
  std::ifstream file(path);
  return static_cast<bool>(file >> value);
}

Result<MachineTopology> from_sys(const std::vector<int>& usable) {
  MachineTopology topology;
  topology.origin = "/sys/devices/system/cpu";
  std::map<std::pair<int, int>, size_t> core_of;  // (package, core_id) -> index in cores
  for (int cpu : usable) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = 0;
    int core_id = 0;
    if (!read_int(dir + "physical_package_id", package) || !read_int(dir + "core_id", core_id)) {
      return Status(StatusCode::kUnavailable, "no readable " + dir + "core_id");
    }
    auto [it, added] = core_of.try_emplace({package, core_id}, topology.cores.size());
    if (added) topology.cores.push_back({package, {}});
    topology.cores[it->second].cpus.push_back(cpu);
  }
  if (topology.cores.empty()) return Status(StatusCode::kUnavailable, "no usable CPU");
  sort_cores(topology);
  return topology;
}

MachineTopology one_core_per_cpu(const std::vector<int>& usable, const std::string& origin) {
  MachineTopology topology;
  topology.origin = origin;
  for (int cpu : usable) topology.cores.push_back({0, {cpu}});
  return topology;
}

}  // namespace

Result<MachineTopology> detect_machine_topology() {
  const std::vector<int> usable = usable_cpus();
  if (usable.empty()) {
    return Status(StatusCode::kUnavailable, "machine topology: sched_getaffinity and sysconf report no CPU");
  }
  std::string fallback_reason;
#if FJORD_HAVE_HWLOC
  Result<MachineTopology> hwloc = from_hwloc(usable);
  if (hwloc) return hwloc;
  fallback_reason = hwloc.status().message();
#else
  fallback_reason = "built without hwloc";
#endif
  Result<MachineTopology> sys = from_sys(usable);
  if (sys) {
    sys->origin += " (" + fallback_reason + ")";
    return sys;
  }
  return one_core_per_cpu(usable,
                          "sysconf, one core per CPU (" + fallback_reason + "; " + sys.status().message() + ")");
}

}  // namespace fjord::engine
