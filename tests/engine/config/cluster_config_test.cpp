// The cluster config's node sections as an NDB user writes them: NDB's
// parameters accepted with a warning, [ndb_mgmd] and API sections without
// NodeId, aliases sharing defaults, and every error of a file in one run.
#include "fjord/engine/cluster_config.h"

#include <gtest/gtest.h>

#include <set>

#include "builtin_transporters.h"

namespace fjord::engine {
namespace {

Result<ClusterConfig> load(const std::string& text) {
  return load_cluster_config_text(text, "cluster.ini", tools::builtin_registry());
}

std::string error_of(const std::string& text) {
  auto r = load(text);
  return r.is_ok() ? std::string("no error") : r.status().message();
}

std::vector<std::pair<NodeId, NodeKind>> ids_of(const ClusterConfig& c) {
  std::vector<std::pair<NodeId, NodeKind>> out;
  for (const NodeDef& n : c.nodes) out.emplace_back(n.id, n.kind);
  return out;
}

TEST(ClusterConfigTest, ApiSectionsWithoutNodeIdGetTheNextFreeId) {
  // NDB's rule: the id after the previous node section's, skipping ids in
  // use; an id given later in the file counts as in use.
  auto c = load("[ndbd]\nNodeId=1\n[api]\n[api]\nNodeId=2\n[mysqld]\n[api]\nNodeId=40\n[api]\n");
  ASSERT_TRUE(c) << c.status().to_string();
  using P = std::pair<NodeId, NodeKind>;
  EXPECT_EQ(ids_of(*c), (std::vector<P>{{1, NodeKind::kData},
                                        {3, NodeKind::kApi},
                                        {2, NodeKind::kApi},
                                        {4, NodeKind::kApi},
                                        {40, NodeKind::kApi},
                                        {41, NodeKind::kApi}}));
  EXPECT_EQ(c->node(3)->params.get_uint("NodeId"), 3u);
  // Every API node, assigned or not, has its default link to the data node.
  for (NodeId api : {2, 3, 4, 40, 41}) EXPECT_NE(c->links.find(1, api), nullptr) << "node " << api;
  EXPECT_TRUE(c->warnings.empty());
}

TEST(ClusterConfigTest, ManagementSectionsAreAcceptedAsInNdb) {
  auto c = load(
      "[ndb_mgmd default]\nDataDir=/var/lib/mysql-cluster\n[ndb_mgmd]\nHostName=mgm-host\n"
      "PortNumber=1186\n[mgm]\n[ndbd]\nNodeId=3\n[api]\n");
  ASSERT_TRUE(c) << c.status().to_string();
  using P = std::pair<NodeId, NodeKind>;
  EXPECT_EQ(ids_of(*c),
            (std::vector<P>{{1, NodeKind::kMgm}, {2, NodeKind::kMgm}, {3, NodeKind::kData}, {4, NodeKind::kApi}}));
  EXPECT_EQ(c->node(1)->host, "mgm-host");
  EXPECT_EQ(c->node(2)->host, "localhost");  // NDB's default for a management node
  EXPECT_EQ(c->links.find(1, 3), nullptr);   // management nodes carry no data traffic
  EXPECT_NE(c->links.find(3, 4), nullptr);
  EXPECT_EQ(c->warnings,
            (std::vector<std::string>{
                "cluster.ini:2: [ndb_mgmd default] DataDir: an NDB parameter Fjord does not implement; it has no "
                "effect here",
                "cluster.ini:5: [ndb_mgmd] PortNumber: an NDB parameter Fjord does not implement; it has no effect "
                "here"}));
}

TEST(ClusterConfigTest, AnAliasTakesTheDefaultsOfItsOtherName) {
  auto c = load(
      "[mysqld default]\nHostName=client-host\n[ndbd]\nNodeId=1\n[api]\nNodeId=5\n[mgm default]\n"
      "HostName=mgm-host\n[ndb_mgmd]\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->node(5)->host, "client-host");
  EXPECT_EQ(c->node(6)->host, "mgm-host");
}

TEST(ClusterConfigTest, AnApiWithoutNodeIdOrHostNameAdmitsAnyHost) {
  auto c = load("[ndbd]\nNodeId=1\nHostName=10.0.0.1\n[api]\n[api]\nHostName=10.0.0.9\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->node(2)->host, "");  // empty: any host may connect as node 2
  EXPECT_EQ(c->node(3)->host, "10.0.0.9");
  const transport::LinkConfig* link = c->links.find(1, 2);
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->server_node, 1);  // the API end only connects: its own host is never bound
  EXPECT_EQ(link->host_of(1), "10.0.0.1");
}

TEST(ClusterConfigTest, NdbDataNodeParametersAreAcceptedWithOneWarningEach) {
  auto c = load(
      "[ndbd default]\nNoOfReplicas=1\nDiskless=1\nLockPagesInMainMemory=1\n[ndbd]\nNodeId=1\n"
      "[ndbd]\nNodeId=2\n[api]\nBatchSize=64\n[system]\nName=cluster1\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->warnings,
            (std::vector<std::string>{
                "cluster.ini:3: [ndbd default] Diskless: an NDB parameter Fjord does not implement; it has no "
                "effect here",
                "cluster.ini:4: [ndbd default] LockPagesInMainMemory: an NDB parameter Fjord does not implement; it "
                "has no effect here",
                "cluster.ini:10: [api] BatchSize: an NDB parameter Fjord does not implement; it has no effect here",
                "cluster.ini:11: [system]: an NDB section Fjord does not use; it has no effect here"}));
}

TEST(ClusterConfigTest, AnUnknownNameIsRefusedWithTheClosestKnownKey) {
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nDataMemroy=1G\n"),
            "cluster.ini:3: [ndbd] DataMemroy: unknown key; did you mean DataMemory?");
  // An NDB name Fjord does not implement is a candidate too.
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nDiskPageBuferMemory=1G\n"),
            "cluster.ini:3: [ndbd] DiskPageBuferMemory: unknown key; did you mean DiskPageBufferMemory?");
  // NDB's old "Id" is refused rather than ignored: ignoring it would renumber the node.
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\n[api]\nId=7\n"), "cluster.ini:4: [api] Id: unknown key; did you mean NodeId?");
}

TEST(ClusterConfigTest, EveryErrorOfAFileIsReportedInOneRun) {
  EXPECT_EQ(error_of("[ndbd default]\nDataMemory=1X\nDataMemory=2M\n[ndbd]\nNodeId=1\nNodeId=2\nOops\n"
                     "[api]\nNodeId=7\n[mysqld]\nNodeId=7\n[tcp]\nNodeId1=1\nNodeId2=9\nChecksum=maybe\n[bogus]\n"),
            "cluster.ini:7: expected key=value, got 'Oops'\n"
            "cluster.ini:2: [ndbd default] DataMemory: '1X' is not a size (an integer with optional K, M or G); "
            "accepted 1M..1024G bytes\n"
            "cluster.ini:3: [ndbd default] DataMemory: given twice (first at line 2)\n"
            "cluster.ini:6: [ndbd] NodeId: given twice (first at line 5)\n"
            "cluster.ini:16: unknown section [bogus]; known: ndbd, api, mysqld, ndb_mgmd, mgm, and the transporters "
            "tcp, shm, sim" +
                std::string(tools::builtin_registry().find("rdma") ? ", rdma" : "") +
                std::string(tools::builtin_registry().find("dpdk") ? ", dpdk" : "") +
                " (each also as '<name> default')\n"
                "cluster.ini:10: [mysqld] NodeId=7 is already used at cluster.ini:8\n"
                "cluster.ini:15: [tcp] Checksum: 'maybe' is not a boolean (1/0, true/false, yes/no)");
}

TEST(ClusterConfigTest, AThreadConfigErrorNamesItsOwnLine) {
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nDataMemory=64M\nThreadConfig=ldm={count=3}\n"),
            "cluster.ini:4: [ndbd] ThreadConfig: at position 0 ('ldm={count=3}'): 3 ldm threads in total; expected "
            "one of 1, 2, 4, 6, 8, 12, 16, 24, 32 ldm threads");
  const std::string from_default = error_of("[ndbd default]\nThreadConfig=bogus\n[ndbd]\nNodeId=1\n");
  EXPECT_EQ(from_default.rfind("cluster.ini:2: [ndbd] ThreadConfig: ", 0), 0u) << from_default;
}

TEST(ClusterConfigTest, NdbsSchedulerAndCpuKnobsTakeNdbsRanges) {
  auto c = load(
      "[ndbd]\nNodeId=1\nSchedulerExecutionTimer=11000\nSchedulerResponsiveness=10\n"
      "LockExecuteThreadToCPU=0-3,8\nLockMaintThreadsToCPU=65535\n[ndbd]\nNodeId=2\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_TRUE(c->warnings.empty()) << c->warnings.front();
  const config::ParamSet& set = c->node(1)->params;
  EXPECT_EQ(set.get_uint("SchedulerExecutionTimer"), 11000u);
  EXPECT_EQ(set.get_uint("SchedulerResponsiveness"), 10u);
  EXPECT_EQ(set.get_string("LockExecuteThreadToCPU"), "0-3,8");
  EXPECT_EQ(set.get_uint("LockMaintThreadsToCPU"), 65535u);
  // Defaults: send after every batch, NDB's middle responsiveness, nothing placed.
  const config::ParamSet& defaults = c->node(2)->params;
  EXPECT_EQ(defaults.get_uint("SchedulerExecutionTimer"), 0u);
  EXPECT_EQ(defaults.get_uint("SchedulerResponsiveness"), 5u);
  EXPECT_EQ(defaults.get_string("LockExecuteThreadToCPU"), "");
  EXPECT_FALSE(defaults.has("LockMaintThreadsToCPU"));
}

TEST(ClusterConfigTest, SchedulerAndCpuKnobsOutOfRangeNameTheirLine) {
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nSchedulerExecutionTimer=11001\n"),
            "cluster.ini:3: [ndbd] SchedulerExecutionTimer: value 11001 out of range; accepted 0..11000");
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nSchedulerResponsiveness=11\n"),
            "cluster.ini:3: [ndbd] SchedulerResponsiveness: value 11 out of range; accepted 0..10");
  EXPECT_EQ(error_of("[ndbd]\nNodeId=1\nLockMaintThreadsToCPU=65536\n"),
            "cluster.ini:3: [ndbd] LockMaintThreadsToCPU: value 65536 out of range; accepted 0..65535");
  EXPECT_EQ(error_of("[ndbd default]\nLockExecuteThreadToCPU=3-1\n[ndbd]\nNodeId=1\n"),
            "cluster.ini:2: [ndbd] LockExecuteThreadToCPU: '3-1' is a reversed range; expected CPU ids 0..65535 "
            "and ranges such as 0-3,8");
}

TEST(ClusterConfigTest, EveryPairOfDataNodesHasALinkOfTheTransporterItsSectionNames) {
  // Three data nodes of one node group: 1-2 over shared memory as written,
  // the other data node pairs and every data-API pair over default TCP, and
  // no link between the two API nodes.
  auto c = load(
      "[ndbd default]\nNoOfReplicas=3\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n"
      "[api]\nNodeId=50\n[api]\nNodeId=51\n[shm]\nNodeId1=2\nNodeId2=1\nShmKey=77\n");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->layout.node_groups, (std::vector<std::vector<NodeId>>{{1, 2, 3}}));
  const transport::LinkConfig* shm = c->links.find(1, 2);
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->type, "shm");
  for (auto [a, b] : std::vector<std::pair<NodeId, NodeId>>{{1, 3}, {2, 3}, {1, 50}, {2, 50}, {3, 51}}) {
    const transport::LinkConfig* link = c->links.find(a, b);
    ASSERT_NE(link, nullptr) << a << "-" << b;
    EXPECT_EQ(link->type, "tcp") << a << "-" << b;
    EXPECT_EQ(link->server_node, std::min(a, b)) << "the lower data node listens: " << a << "-" << b;
  }
  EXPECT_EQ(c->links.find(50, 51), nullptr);
  EXPECT_EQ(c->links.all().size(), 9u);  // 3 data-data + 3 x 2 data-API
}

// One cluster, written two ways: sections in another order, comments,
// spacing, the case of keys, a value spelled differently and a default
// written out. The checksum is SHA-256 in hex.
TEST(ClusterConfigTest, TheChecksumIgnoresOrderCommentsAndSpelling) {
  const std::string a =
      "[ndbd default]\nNoOfReplicas=2\nDataMemory=4M\n[ndbd]\nNodeId=1\nHostName=10.0.0.1\n[ndbd]\nNodeId=2\n"
      "HostName=10.0.0.2\n[api]\nNodeId=50\n[tcp]\nNodeId1=1\nNodeId2=2\nSendBufferMemory=4M\n";
  const std::string b =
      "# the same cluster\n[TCP]\nnodeid2 = 1\nNodeId1=2\nSendBufferMemory=4096K ; as 4M\n\n[api]\nNodeId=50\n"
      "[ndbd]\nNodeId=2\nHostName=10.0.0.2\nPartitionsPerTable=8\nServerPort=11862\nNodeGroup=0\n[ndbd]\n"
      "  NodeId = 1\nHostName=10.0.0.1\n"
      "[ndbd default]\nDataMemory=4096K\nnoofreplicas=2\n";
  auto ca = load(a);
  auto cb = load(b);
  ASSERT_TRUE(ca) << ca.status().to_string();
  ASSERT_TRUE(cb) << cb.status().to_string();
  EXPECT_EQ(ca->canonical_text, cb->canonical_text);
  // Defaults and derived values are written out: 4M as bytes, the port
  // and node group each node resolves to.
  EXPECT_NE(ca->canonical_text.find("[data] 2\n  NodeId=2\n  HostName=10.0.0.2\n"), std::string::npos);
  EXPECT_NE(ca->canonical_text.find("  DataMemory=4194304\n"), std::string::npos);
  EXPECT_NE(ca->canonical_text.find("  ServerPort=11862\n  NodeGroup=0\n"), std::string::npos);
  EXPECT_NE(ca->canonical_text.find("[tcp] 1-2\n  server=1\n  port=11861\n"), std::string::npos);
  const std::string sum = cluster_checksum(*ca);
  EXPECT_EQ(sum, cluster_checksum(*cb));
  EXPECT_EQ(sum.size(), 64u);
  EXPECT_EQ(sum.find_first_not_of("0123456789abcdef"), std::string::npos) << sum;
}

TEST(ClusterConfigTest, TheChecksumChangesWithAnyValue) {
  const std::string base =
      "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=1\n[ndbd]\nNodeId=2\n[api]\nNodeId=50\n[tcp]\nNodeId1=1\n"
      "NodeId2=2\n";
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"NoOfReplicas=1\n", "NoOfReplicas=2\n"},
      {"[ndbd]\nNodeId=1\n", "[ndbd]\nNodeId=1\nDataMemory=128M\n"},
      {"[ndbd]\nNodeId=2\n", "[ndbd]\nNodeId=2\nHostName=10.0.0.2\n"},
      {"NoOfReplicas=1\n", "NoOfReplicas=1\nPartitionsPerTable=16\n"},
      {"[ndbd]\nNodeId=2\n", "[ndbd]\nNodeId=2\nClusterKeyFile=/etc/fjord/key\n"},
      {"[ndbd]\nNodeId=2\n", "[ndbd]\nNodeId=2\nServerPort=3000\n"},
      {"[ndbd]\nNodeId=1\n", "[ndbd]\nNodeId=1\nNodeGroup=1\n"},  // node 2 in group 0, node 1 in group 1
      {"[api]\nNodeId=50\n", "[api]\nNodeId=51\n"},
      {"[api]\nNodeId=50\n", "[api]\nNodeId=50\n[api]\nNodeId=52\n"},
      {"NodeId2=2\n", "NodeId2=2\nSendBufferMemory=4M\n"},
      {"NodeId2=2\n", "NodeId2=2\nChecksum=1\n"},
      {"NodeId2=2\n", "NodeId2=2\nPortNumber=2000\n"},
      {"[tcp]\n", "[shm]\nShmKey=5\n"},
  };
  auto original = load(base);
  ASSERT_TRUE(original) << original.status().to_string();
  std::set<std::string> seen = {cluster_checksum(*original)};
  for (const auto& [from, to] : changes) {
    std::string text = base;
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto changed = load(text);
    ASSERT_TRUE(changed) << to << ": " << changed.status().to_string();
    EXPECT_TRUE(seen.insert(cluster_checksum(*changed)).second) << "same checksum after " << from << " -> " << to;
  }
}

}  // namespace
}  // namespace fjord::engine
