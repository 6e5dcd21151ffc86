// Node groups from the cluster config (NoOfReplicas, NodeGroup, NDB's
// consecutive-id rule), the errors of impossible layouts naming file, line
// and key, and the partition rule of cluster_layout.h: every partition on
// NoOfReplicas distinct nodes of its group, primaries balanced over a
// group's nodes, primaries and backups spread over the LDM instances.
#include "fjord/engine/cluster_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "builtin_transporters.h"
#include "fjord/engine/cluster_config.h"

namespace fjord::engine {
namespace {

using Groups = std::vector<std::vector<NodeId>>;

Result<ClusterConfig> load(const std::string& text) {
  return load_cluster_config_text(text, "cluster.ini", tools::builtin_registry());
}

std::string error_of(const std::string& text) {
  auto r = load(text);
  return r.is_ok() ? std::string("no error") : r.status().message();
}

std::string data_nodes(std::initializer_list<NodeId> ids) {
  std::string text;
  for (NodeId id : ids) text += "[ndbd]\nNodeId=" + std::to_string(id) + "\n";
  return text;
}

TEST(ClusterLayoutTest, DataNodesWithoutNodeGroupFormGroupsOfConsecutiveIds) {
  // File order is not id order: groups follow the ids, as in NDB.
  auto c = load("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({4, 1, 3, 2}) + "[api]\nNodeId=50\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->layout.replicas, 2u);
  EXPECT_EQ(c->layout.node_groups, (Groups{{1, 2}, {3, 4}}));
  EXPECT_EQ(c->layout.group_of_node(3), 1);
  EXPECT_EQ(c->layout.group_of_node(50), -1);
  auto four = load("[ndbd default]\nNoOfReplicas=4\n" + data_nodes({1, 2, 3, 4}));
  ASSERT_TRUE(four) << four.status().to_string();
  EXPECT_EQ(four->layout.node_groups, (Groups{{1, 2, 3, 4}}));
  auto one = load("[ndbd default]\nNoOfReplicas=1\n" + data_nodes({2, 1, 3}));
  ASSERT_TRUE(one) << one.status().to_string();
  EXPECT_EQ(one->layout.node_groups, (Groups{{1}, {2}, {3}}));
}

TEST(ClusterLayoutTest, NodeGroupPlacesANodeAndTheOthersFillTheLowestGroupWithRoom) {
  auto c = load(
      "[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\nNodeGroup=1\n[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n"
      "[ndbd]\nNodeId=4\nNodeGroup=0\n[ndbd]\nNodeId=5\n[ndbd]\nNodeId=6\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->layout.node_groups, (Groups{{2, 4}, {1, 3}, {5, 6}}));
}

TEST(ClusterLayoutTest, EveryDataNodeHasTheSameNoOfReplicas) {
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({1, 2, 3}) + "NoOfReplicas=1\n" + data_nodes({4})),
            "cluster.ini:9: [ndbd] NoOfReplicas=1: data node 3 differs from NoOfReplicas=2 of data node 1 "
            "(cluster.ini:2: [ndbd default] NoOfReplicas); every data node has the same NoOfReplicas: set it once "
            "in [ndbd default]");
  // Set in one [ndbd] only: the others keep the default 1.
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nNoOfReplicas=2\n" + data_nodes({2})),
            "cluster.ini:4: [ndbd] NoOfReplicas=1: data node 2 differs from NoOfReplicas=2 of data node 1 "
            "(cluster.ini:3: [ndbd] NoOfReplicas); every data node has the same NoOfReplicas: set it once in "
            "[ndbd default]");
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=5\n" + data_nodes({1, 2, 3, 4, 5})),
            "cluster.ini:2: [ndbd default] NoOfReplicas: value 5 out of range; accepted 1..4");
}

// Every DICT gives a new table the same partition count, so the cluster
// has one PartitionsPerTable.
TEST(ClusterLayoutTest, EveryDataNodeHasTheSamePartitionsPerTable) {
  // Set in node 1's section only: node 2 keeps the default 8.
  EXPECT_EQ(
      error_of("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({1}) + "PartitionsPerTable=16\n" + data_nodes({2})),
      "cluster.ini:6: [ndbd] PartitionsPerTable=8: data node 2 differs from PartitionsPerTable=16 of data node 1 "
      "(cluster.ini:5: [ndbd] PartitionsPerTable); every data node has the same PartitionsPerTable: set it "
      "once in [ndbd default]");
  auto same = load("[ndbd default]\nNoOfReplicas=2\nPartitionsPerTable=16\n" + data_nodes({1, 2}));
  ASSERT_TRUE(same) << same.status().to_string();
}

TEST(ClusterLayoutTest, ImpossibleLayoutsNameTheirFileLineAndKey) {
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({1})),
            "cluster.ini:2: [ndbd default] NoOfReplicas=2 is more than the 1 data node (1) of cluster.ini: a node "
            "group holds NoOfReplicas data nodes");
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({1, 2, 3})),
            "cluster.ini:2: [ndbd default] NoOfReplicas=2 does not divide the 3 data nodes (1, 2, 3) of "
            "cluster.ini: every node group holds NoOfReplicas data nodes");
  // Too many in one group: the node past NoOfReplicas is named at its NodeGroup line.
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\nNodeGroup=0\n" + data_nodes({1, 2, 3, 4})),
            "cluster.ini:3: [ndbd default] NodeGroup=0: node group 0 would hold data nodes 1, 2, 3, more than "
            "NoOfReplicas=2 (cluster.ini:2: [ndbd default] NoOfReplicas)\n"
            "cluster.ini:3: [ndbd default] NodeGroup=0: node group 0 would hold data nodes 1, 2, 3, 4, more than "
            "NoOfReplicas=2 (cluster.ini:2: [ndbd default] NoOfReplicas)");
  // A group short of nodes.
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\nNodeGroup=0\n[ndbd]\nNodeId=2\nNodeGroup=1\n"
                     "[ndbd]\nNodeId=3\nNodeGroup=2\n[ndbd]\nNodeId=4\nNodeGroup=3\n"),
            "cluster.ini:5: [ndbd] NodeGroup=0: node group 0 holds only data node 1; NoOfReplicas=2 "
            "(cluster.ini:2: [ndbd default] NoOfReplicas) needs 2 in each node group\n"
            "cluster.ini:8: [ndbd] NodeGroup=1: node group 1 holds only data node 2; NoOfReplicas=2 "
            "(cluster.ini:2: [ndbd default] NoOfReplicas) needs 2 in each node group\n"
            "cluster.ini:11: [ndbd] NodeGroup=2: node group 2 holds only data node 3; NoOfReplicas=2 "
            "(cluster.ini:2: [ndbd default] NoOfReplicas) needs 2 in each node group\n"
            "cluster.ini:14: [ndbd] NodeGroup=3: node group 3 holds only data node 4; NoOfReplicas=2 "
            "(cluster.ini:2: [ndbd default] NoOfReplicas) needs 2 in each node group");
  // Node groups numbered with a gap.
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\nNodeGroup=2\n"),
            "cluster.ini:5: [ndbd] NodeGroup=2: node groups are numbered from 0 without gaps, and node group 1 has "
            "no data node");
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nNodeGroup=255\n"),
            "cluster.ini:3: [ndbd] NodeGroup: value 255 out of range; accepted 0..254");
  // Two data nodes with one id.
  EXPECT_EQ(error_of("[ndbd default]\nNoOfReplicas=2\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=1\n"),
            "cluster.ini:5: [ndbd] NodeId=1 is already used at cluster.ini:3");
}

TEST(ClusterLayoutTest, PartitionsPerTableNotAMultipleOfGroupsTimesReplicasIsWarnedAbout) {
  auto c = load("[ndbd default]\nNoOfReplicas=2\nPartitionsPerTable=6\n" + data_nodes({1, 2, 3, 4}));
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->warnings, (std::vector<std::string>{
                             "cluster.ini:3: [ndbd default] PartitionsPerTable=6 is not a multiple of 2 node groups x "
                             "2 replicas = 4: the primaries of a table are not balanced over the nodes of its node "
                             "groups"}));
  auto balanced = load("[ndbd default]\nNoOfReplicas=2\n" + data_nodes({1, 2, 3, 4}));  // 8 partitions
  ASSERT_TRUE(balanced) << balanced.status().to_string();
  EXPECT_TRUE(balanced->warnings.empty()) << balanced->warnings.front();
}

TEST(ClusterLayoutTest, OneNodeOneReplicaIsTheLdmInstanceRuleOfOneDataNode) {
  const ClusterLayout one{1, {{1}}};
  for (uint32_t ldm_count : {1u, 2u, 3u, 4u, 8u, 32u})
    for (uint32_t p = 0; p < 1024; ++p) {
      const PartitionReplicas r = replicas_of(one, p);
      ASSERT_EQ(r.count, 1u);
      ASSERT_EQ(r.primary(), 1);
      ASSERT_EQ(ldm_instance_of(one, p, ldm_count), p % ldm_count) << "partition " << p;
    }
}

TEST(ClusterLayoutTest, TwoGroupsOfTwoFollowTheRule) {
  const ClusterLayout layout{2, {{1, 2}, {3, 4}}};
  // p: group p % 2, q = p / 2, primary nodes_g[q % 2], LDM (q / 2) % 2.
  const std::vector<std::array<uint32_t, 4>> expected = {
      // group, primary, backup, ldm
      {0, 1, 2, 0}, {1, 3, 4, 0}, {0, 2, 1, 0}, {1, 4, 3, 0}, {0, 1, 2, 1}, {1, 3, 4, 1}, {0, 2, 1, 1}, {1, 4, 3, 1},
  };
  const std::vector<PartitionReplicas> map = partition_map(layout, 8);
  ASSERT_EQ(map.size(), expected.size());
  for (uint32_t p = 0; p < 8; ++p) {
    EXPECT_EQ(map[p].node_group, expected[p][0]) << "partition " << p;
    EXPECT_EQ(map[p].primary(), expected[p][1]) << "partition " << p;
    EXPECT_EQ(map[p].nodes[1], expected[p][2]) << "partition " << p;
    EXPECT_EQ(ldm_instance_of(layout, p, 2), expected[p][3]) << "partition " << p;
  }
}

// For every shape (G groups, R replicas, L LDM instances) and a partition
// count that is a multiple of G x R x L: R distinct nodes of the partition's
// group; each node the primary of as many partitions as every other; on
// each node, each LDM instance holds as many primaries and as many backups
// as every other.
TEST(ClusterLayoutTest, PrimariesAndBackupsAreBalancedOverNodesAndLdmInstances) {
  for (uint32_t groups = 1; groups <= 4; ++groups) {
    for (uint32_t r = 1; r <= kMaxReplicas; ++r) {
      for (uint32_t ldm_count : {1u, 2u, 4u, 6u}) {
        for (uint32_t rounds : {1u, 3u}) {
          ClusterLayout layout{r, {}};
          NodeId next = 1;
          for (uint32_t g = 0; g < groups; ++g) {
            layout.node_groups.emplace_back();
            for (uint32_t i = 0; i < r; ++i) layout.node_groups.back().push_back(next++);
          }
          const uint32_t partitions = groups * r * ldm_count * rounds;
          SCOPED_TRACE("G=" + std::to_string(groups) + " R=" + std::to_string(r) + " L=" + std::to_string(ldm_count) +
                       " P=" + std::to_string(partitions));
          std::map<NodeId, uint32_t> primaries;
          std::map<std::pair<NodeId, uint32_t>, uint32_t> primaries_on_ldm, backups_on_ldm;
          for (uint32_t p = 0; p < partitions; ++p) {
            const PartitionReplicas rep = replicas_of(layout, p);
            ASSERT_EQ(rep.count, r);
            ASSERT_EQ(rep.node_group, p % groups);
            const std::set<NodeId> distinct(rep.nodes.begin(), rep.nodes.begin() + r);
            ASSERT_EQ(distinct.size(), r) << "partition " << p;
            for (NodeId n : distinct) ASSERT_EQ(layout.group_of_node(n), static_cast<int>(p % groups));
            const uint32_t ldm = ldm_instance_of(layout, p, ldm_count);
            ASSERT_LT(ldm, ldm_count);
            ++primaries[rep.primary()];
            ++primaries_on_ldm[{rep.primary(), ldm}];
            for (uint32_t i = 1; i < r; ++i) ++backups_on_ldm[{rep.nodes[i], ldm}];
          }
          ASSERT_EQ(primaries.size(), groups * r) << "a node is the primary of no partition";
          for (const auto& [node, count] : primaries) EXPECT_EQ(count, partitions / (groups * r)) << "node " << node;
          ASSERT_EQ(primaries_on_ldm.size(), groups * r * ldm_count);
          for (const auto& [at, count] : primaries_on_ldm)
            EXPECT_EQ(count, rounds) << "primaries of node " << at.first << " on LDM " << at.second;
          if (r > 1) {
            ASSERT_EQ(backups_on_ldm.size(), groups * r * ldm_count);
          }
          for (const auto& [at, count] : backups_on_ldm)
            EXPECT_EQ(count, rounds * (r - 1)) << "backups of node " << at.first << " on LDM " << at.second;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fjord::engine
