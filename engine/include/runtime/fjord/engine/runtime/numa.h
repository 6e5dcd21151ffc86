// NUMA placement for runtime memory (job buffers), through libnuma when the
// build has it. On a machine with one NUMA node, or without libnuma, there
// is nothing to place: numa_node_of() returns -1 and callers skip binding.
// Slow path (start-up); any thread.
#pragma once

#include <cstddef>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::engine {

// The NUMA node the first of `cpus` belongs to, or -1 when placement does
// not apply (no CPUs given, one node, or no libnuma).
int numa_node_of(const std::vector<int>& cpus);
// Number of NUMA nodes libnuma sees (1 without libnuma).
int numa_node_count();
// Sets the memory policy of [address, address+bytes) to `node` before the
// pages are touched. kUnavailable without libnuma.
Status bind_to_numa_node(void* address, std::size_t bytes, int node);

}  // namespace fjord::engine
