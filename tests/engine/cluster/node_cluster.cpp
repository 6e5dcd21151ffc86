#include "node_cluster.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "builtin_transporters.h"

namespace fjord::test {

uint16_t free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  // Best effort: a failed bind leaves the port 0, and the node's start fails.
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string cluster_config_text(const ClusterOptions& o, uint16_t port) {
  static std::atomic<uint32_t> counter{0};
  const uint32_t unique = (static_cast<uint32_t>(::getpid()) % 100000) * 1000 + counter.fetch_add(1) % 1000;
  std::string text = "[ndbd default]\nDataMemory=" + o.data_memory +
                     "\nPartitionsPerTable=" + std::to_string(o.partitions) +
                     "\n[ndbd]\nNodeId=1\nHostName=127.0.0.1\nServerPort=" + std::to_string(port) +
                     "\nDataDir=/tmp\nSingleThreaded=" + (o.single_threaded ? "1" : "0") +
                     "\nTransactionDeadlockDetectionTimeout=" + std::to_string(o.deadlock_timeout_ms) +
                     "\nTransactionInactiveTimeout=" + std::to_string(o.inactive_timeout_ms) +
                     "\nControlSocket=@fjord-test-" + std::to_string(unique) + "\n";
  if (!o.thread_config.empty()) text += "ThreadConfig=" + o.thread_config + "\n";
  text += o.extra_ndbd;
  for (NodeId peer : o.peer_data_nodes) text += "[ndbd]\nNodeId=" + std::to_string(peer) + "\nHostName=127.0.0.1\n";
  for (int i = 0; i < o.api_nodes; ++i) text += "[api]\nNodeId=" + std::to_string(50 + i) + "\nHostName=127.0.0.1\n";
  if (o.medium != "tcp")
    for (int i = 0; i < o.api_nodes; ++i) {
      text += "[" + o.medium + "]\nNodeId1=1\nNodeId2=" + std::to_string(50 + i) + "\n" + o.extra_link;
      if (o.medium == "shm") text += "ShmKey=" + std::to_string(uint64_t{unique} * 100 + i) + "\n";
      if (o.medium == "sim") {
        text += "SimEndpoint=" + std::to_string(uint64_t{unique} * 100 + i) + "\n";
        if (o.sim_seed) text += "Seed=" + std::to_string(o.sim_seed + static_cast<uint64_t>(i)) + "\n";
        if (o.sim_faults) text += "DelayPolls=4\nShortWriteChance=25\n";
      }
    }
  if (o.medium != "tcp")
    for (NodeId peer : o.peer_data_nodes) {
      text += "[" + o.medium + "]\nNodeId1=1\nNodeId2=" + std::to_string(peer) + "\n";
      if (o.medium == "shm") text += "ShmKey=" + std::to_string(uint64_t{unique} * 100 + 90 + peer) + "\n";
      if (o.medium == "sim") text += "SimEndpoint=" + std::to_string(uint64_t{unique} * 100 + 90 + peer) + "\n";
    }
  return text;
}

Result<std::unique_ptr<TestCluster>> TestCluster::start(const ClusterOptions& o) {
  auto cluster = std::unique_ptr<TestCluster>(new TestCluster());
  cluster->port_ = free_tcp_port();
  cluster->config_ = cluster_config_text(o, cluster->port_);
  engine::DataNodeOptions d;
  d.config_text = cluster->config_;
  d.node_id = 1;
  d.registry = &tools::builtin_registry();
  d.peer_data_nodes_played_by_caller = !o.peer_data_nodes.empty();
  auto node = engine::DataNode::create(d);
  if (!node) return node.status();
  cluster->node_ = std::move(node).value();
  if (Status s = cluster->node_->start(); !s) return s;
  return cluster;
}

TestCluster::~TestCluster() {
  if (node_) node_->stop();
}

Result<std::unique_ptr<api::Connection>> TestCluster::connect(NodeId api_node, api::PollMode mode) {
  return api::Connection::connect(connect_options(api_node, mode));
}

api::ConnectOptions TestCluster::connect_options(NodeId api_node, api::PollMode mode) const {
  api::ConnectOptions c;
  c.config_text = config_;
  c.node_id = api_node;
  c.registry = &tools::builtin_registry();
  c.poll_mode = mode;
  c.request_timeout_ms = 20000;
  return c;
}

}  // namespace fjord::test
