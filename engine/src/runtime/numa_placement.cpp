#include "fjord/engine/runtime/numa.h"

#ifdef FJORD_HAVE_NUMA
#include <numa.h>
#endif

namespace fjord::engine {

#ifdef FJORD_HAVE_NUMA
int numa_node_count() { return numa_available() < 0 ? 1 : numa_max_node() + 1; }

int numa_node_of(const std::vector<int>& cpus) {
  if (cpus.empty() || numa_node_count() < 2) return -1;
  return numa_node_of_cpu(cpus.front());
}

Status bind_to_numa_node(void* address, std::size_t bytes, int node) {
  if (numa_available() < 0) return Status(StatusCode::kUnavailable, "libnuma reports NUMA unavailable");
  if (node < 0 || node > numa_max_node())
    return Status(StatusCode::kInvalidArgument, "NUMA node " + std::to_string(node) + " does not exist");
  numa_tonode_memory(address, bytes, node);
  return Status::ok();
}
#else
int numa_node_count() { return 1; }
int numa_node_of(const std::vector<int>&) { return -1; }
Status bind_to_numa_node(void*, std::size_t, int) { return Status(StatusCode::kUnavailable, "built without libnuma"); }
#endif

}  // namespace fjord::engine
