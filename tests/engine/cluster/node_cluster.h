// An in-process cluster for end-to-end tests: one data node (DataNode, its
// own threads) and API connections over a chosen transporter (tcp, shm,
// sim), from generated config text with fresh endpoints. Called from the
// test's threads; the node runs on its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fjord/api/api.h"
#include "fjord/engine/data_node.h"

namespace fjord::test {

struct ClusterOptions {
  std::string medium = "tcp";
  bool single_threaded = true;
  std::string thread_config;  // multi-threaded layout when not single
  std::string data_memory = "64M";
  uint32_t deadlock_timeout_ms = 400;
  uint32_t inactive_timeout_ms = 0;
  uint32_t partitions = 8;
  int api_nodes = 6;  // [api] 50, 51, ...
  // Data nodes a test plays itself (2, 3, ...): an [ndbd] each and a link of
  // `medium` to node 1 (not tcp: it has no link sections here).
  std::vector<NodeId> peer_data_nodes;
  std::string extra_ndbd;  // more "Key=value" lines for [ndbd]
  std::string extra_link;  // more "Key=value" lines for each link section (not tcp: it has none)
  // sim only: the fault seed, and delayed and partial deliveries (which must
  // not change any result).
  uint64_t sim_seed = 0;
  bool sim_faults = true;
};

class TestCluster {
 public:
  static Result<std::unique_ptr<TestCluster>> start(const ClusterOptions& options);
  ~TestCluster();

  Result<std::unique_ptr<api::Connection>> connect(NodeId api_node = 50, api::PollMode mode = api::PollMode::kBusy);
  // What connect() connects with, for a test that changes some of it.
  api::ConnectOptions connect_options(NodeId api_node, api::PollMode mode = api::PollMode::kBusy) const;
  engine::DataNode& node() { return *node_; }
  const std::string& config_text() const { return config_; }
  // The data node's TCP port (ServerPort) on 127.0.0.1.
  uint16_t server_port() const { return port_; }

 private:
  std::string config_;
  uint16_t port_ = 0;
  std::unique_ptr<engine::DataNode> node_;
};

// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
uint16_t free_tcp_port();

// The config text a TestCluster would use (exposed for config tests).
std::string cluster_config_text(const ClusterOptions& options, uint16_t port);

}  // namespace fjord::test
