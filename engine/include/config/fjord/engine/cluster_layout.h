// Where a table's partitions live in a cluster: node groups and the replicas
// of each partition, as computed from the cluster config (ClusterConfig::
// layout) and shared by everything that places or finds a partition (TC's
// routing, the API's transaction hint, DICT).
//
// The rule, with G node groups of R = NoOfReplicas nodes each (each group's
// nodes sorted by id):
//   partition p belongs to node group g = p % G; let q = p / G;
//   its primary is nodes_g[q % R], its backups nodes_g[(q+1) % R], ...,
//   nodes_g[(q+R-1) % R]: the order a write's prepare chain visits them;
//   on every node of the group it lives on LDM instance (q / R) % L, L being
//   that node's LDM instance count.
// With G = 1 and R = 1 a partition p lives on LDM instance p % L of the one
// data node. Primaries are balanced over a group's nodes when the partition
// count is a multiple of G x R; primaries and backups are spread over the
// LDM instances when it is a multiple of G x R x L.
//
// Plain values and inline functions, no dependency beyond the node id type.
// Any thread; immutable after loading. Not on the hot path as a whole: the
// per-partition functions are a few integer operations each.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

// NoOfReplicas' range, as in NDB.
inline constexpr uint32_t kMaxReplicas = 4;

struct ClusterLayout {
  uint32_t replicas = 1;  // NoOfReplicas: the nodes of each group
  // node_groups[g]: the data nodes of node group g, sorted by id; every
  // group has `replicas` nodes.
  std::vector<std::vector<NodeId>> node_groups;

  uint32_t group_count() const { return static_cast<uint32_t>(node_groups.size()); }
  // The node group of `node`, or -1 when it is no data node of the layout.
  int group_of_node(NodeId node) const {
    for (std::size_t g = 0; g < node_groups.size(); ++g)
      for (NodeId n : node_groups[g])
        if (n == node) return static_cast<int>(g);
    return -1;
  }
};

// One partition's replicas: nodes[0] is the primary, then the backups in the
// order a write's prepare chain visits them.
struct PartitionReplicas {
  uint32_t node_group = 0;
  uint32_t count = 0;  // = NoOfReplicas
  std::array<NodeId, kMaxReplicas> nodes{};

  NodeId primary() const { return nodes[0]; }
  bool holds(NodeId node) const {
    for (uint32_t i = 0; i < count; ++i)
      if (nodes[i] == node) return true;
    return false;
  }
};

// The replicas of partition `partition` (of a table of any partition count:
// the rule does not depend on it). Precondition: the layout has a group.
inline PartitionReplicas replicas_of(const ClusterLayout& layout, uint32_t partition) {
  FJORD_ASSERT(layout.group_count() > 0);
  FJORD_ASSERT(layout.replicas >= 1);
  FJORD_ASSERT(layout.replicas <= kMaxReplicas);
  const uint32_t groups = layout.group_count();
  const uint32_t r = layout.replicas;
  const uint32_t q = partition / groups;
  PartitionReplicas out;
  out.node_group = partition % groups;
  out.count = r;
  const std::vector<NodeId>& nodes = layout.node_groups[out.node_group];
  FJORD_ASSERT_MSG(nodes.size() == r, "a node group has NoOfReplicas nodes");
  for (uint32_t i = 0; i < r; ++i) out.nodes[i] = nodes[(q + i) % r];
  return out;
}

// The LDM instance that holds partition `partition` on every node of its
// group, for a node of `ldm_count` LDM instances.
inline uint32_t ldm_instance_of(const ClusterLayout& layout, uint32_t partition, uint32_t ldm_count) {
  FJORD_ASSERT(layout.group_count() > 0);
  FJORD_ASSERT(ldm_count > 0);
  const uint32_t q = partition / layout.group_count();
  return (q / layout.replicas) % ldm_count;
}

// replicas_of() for partitions 0..partitions-1 of one table.
inline std::vector<PartitionReplicas> partition_map(const ClusterLayout& layout, uint32_t partitions) {
  std::vector<PartitionReplicas> out;
  out.reserve(partitions);
  for (uint32_t p = 0; p < partitions; ++p) out.push_back(replicas_of(layout, p));
  return out;
}

}  // namespace fjord::engine
