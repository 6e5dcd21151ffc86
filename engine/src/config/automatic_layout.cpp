// automatic_layout_for: the layout used when neither ThreadConfig nor
// MaxNoOfExecutionThreads is given. It follows the starting point that
// "MySQL Cluster run-time environment, Part 3" (Mikael Ronström's blog,
// 2013) recommends: half the cores for LDM threads without hyper-threading,
// about a quarter of the LDM CPU resources for tc, about as much again for
// send and recv, the rest for main, rep, io, wd and the OS; cpubind for the
// LDM threads, which run near 100%, and one shared cpuset for the others so
// the OS can balance them.
#include <algorithm>
#include <string>
#include <vector>

#include "fjord/engine/thread_config.h"
#include "thread_types.h"

namespace fjord::engine {
namespace {

// The largest allowed LDM count not above `limit` (at least the smallest).
uint32_t ldm_count_at_most(uint32_t limit) {
  uint32_t best = kLdmCounts[0];
  for (uint32_t count : kLdmCounts) {
    if (count <= limit) best = count;
  }
  return best;
}

struct AutomaticCounts {
  uint32_t ldm = 1;
  uint32_t tc = 1;
  uint32_t recv = 1;
  uint32_t send = 0;
};

AutomaticCounts counts_for(uint32_t cores, uint32_t cpus_per_core) {
  AutomaticCounts counts;
  counts.ldm = ldm_count_at_most(std::max(1u, cores / 2));
  counts.tc = std::min(kTcThreadsMax, (counts.ldm * cpus_per_core + 3) / 4);
  counts.recv = std::min(kRecvThreadsMax, (counts.tc + 1) / 2);
  counts.send = std::min(kSendThreadsMax, counts.tc / 2);
  FJORD_ASSERT(counts.tc >= 1);
  FJORD_ASSERT(counts.recv >= 1);
  return counts;
}

// Binds LDM instance i to the first CPU of core i; every other thread gets
// the cpuset of all CPUs on the remaining cores. Returns that cpuset.
std::vector<int> place(ThreadLayout& layout, const MachineTopology& topology, uint32_t ldm) {
  FJORD_ASSERT(ldm < topology.cores.size());
  std::vector<int> shared;
  for (size_t core = ldm; core < topology.cores.size(); ++core) {
    shared.insert(shared.end(), topology.cores[core].cpus.begin(), topology.cores[core].cpus.end());
  }
  std::sort(shared.begin(), shared.end());
  for (ThreadSpec& thread : layout.threads) {
    if (thread.type == ThreadType::kLdm) {
      thread.binding = ThreadSpec::Binding::kBind;
      thread.cpus = {topology.cores[thread.instance].cpus.front()};
    } else {
      thread.binding = ThreadSpec::Binding::kSet;
      thread.cpus = shared;
    }
  }
  return shared;
}

std::string explain(const MachineTopology& topology, uint32_t cpus_per_core, const AutomaticCounts& counts) {
  const size_t cores = topology.cores.size();
  std::string text = "automatic: " + std::to_string(cores) + (cores == 1 ? " core" : " cores") + " x " +
                     std::to_string(cpus_per_core) + (cpus_per_core == 1 ? " CPU" : " CPUs") + " (" + topology.origin +
                     "); ldm=" + std::to_string(counts.ldm) +
                     " (half the cores, down to an allowed LDM count, at least 1); tc=" + std::to_string(counts.tc) +
                     " (a quarter of the LDM cores' CPUs, rounded up); recv=" + std::to_string(counts.recv) +
                     ", send=" + std::to_string(counts.send) + " (together as many as tc";
  text += counts.send == 0 ? "; no send threads: each thread sends its own)" : ")";
  return text + "; main, rep, io, wd: 1 each";
}

}  // namespace

Result<ThreadLayout> automatic_layout_for(const MachineTopology& topology) {
  if (topology.cores.empty()) {
    return Status(StatusCode::kInvalidArgument, "automatic thread layout: the machine topology has no cores");
  }
  const auto cores = static_cast<uint32_t>(topology.cores.size());
  const uint32_t cpus_per_core = std::max(1u, topology.cpu_count() / cores);
  const AutomaticCounts counts = counts_for(cores, cpus_per_core);
  ThreadLayout layout;
  detail::append_plain_threads(layout, ThreadType::kLdm, counts.ldm);
  detail::append_plain_threads(layout, ThreadType::kTc, counts.tc);
  detail::append_plain_threads(layout, ThreadType::kRecv, counts.recv);
  detail::append_plain_threads(layout, ThreadType::kSend, counts.send);
  for (ThreadType type : {ThreadType::kMain, ThreadType::kRep, ThreadType::kIo, ThreadType::kWatchdog}) {
    detail::append_plain_threads(layout, type, 1);
  }
  layout.source = explain(topology, cpus_per_core, counts);
  if (cores == 1) {
    layout.source += "; one core: nothing to keep apart, so no thread is placed";
    return layout;
  }
  std::vector<int> ldm_cpus;
  for (uint32_t i = 0; i < counts.ldm; ++i) ldm_cpus.push_back(topology.cores[i].cpus.front());
  std::sort(ldm_cpus.begin(), ldm_cpus.end());
  const std::vector<int> shared = place(layout, topology, counts.ldm);
  layout.source += std::string("; ldm bound one per core to ") + (counts.ldm == 1 ? "CPU " : "CPUs ") +
                   format_cpu_list(ldm_cpus) + " (their other hardware threads left idle); the rest share cpuset " +
                   format_cpu_list(shared) + " (the cores ldm does not use)";
  return layout;
}

Result<ThreadLayout> automatic_layout() {
  Result<MachineTopology> topology = detect_machine_topology();
  if (!topology) return topology.status();
  return automatic_layout_for(*topology);
}

}  // namespace fjord::engine
