// DataNode::Impl (internal header for the node's source files).
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "fjord/base/fd.h"
#include "fjord/engine/blocks/tc.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/storage/page_pool.h"
#include "fjord/engine/thread_config.h"

namespace fjord::engine {

struct DataNode::Impl {
  DataNodeOptions options;
  NodeId self = kNoNode;
  ClusterConfig cluster;
  const NodeDef* node = nullptr;
  bool single = false;
  ThreadLayout layout;
  uint32_t ldm_count = 1;
  uint32_t tc_count = 1;
  std::unique_ptr<storage::PagePool> pool;  // DataMemory, shared by the LDM instances
  std::unique_ptr<Runtime> runtime;
  std::vector<TcBlock*> tc_blocks;  // owned by the runtime; read for statistics
  std::vector<std::unique_ptr<transport::Listener>> listeners;
  UniqueFd control_fd;
  std::string control_name;
  UniqueFd epoll_fd;
  UniqueFd wake_fd;  // eventfd: stop() wakes the connection thread
  std::thread connections;
  std::atomic<bool> started{false};
  std::atomic<bool> stopping{false};
  std::atomic<uint32_t> stats_interval_s{0};
  mutable std::mutex health_mutex;
  Status health;

  Status build_runtime();
  Status add_ldm_blocks();  // ldm_wiring.cpp
  Status open_listeners();  // connections.cpp ...
  Status open_control();
  void connection_loop();
  void accept_on(transport::Listener& listener);
  void serve_control();
  void connect_to_servers(uint64_t& next_try_ns);
  void wake();
  std::string layout_text() const;
  std::string stats_text() const;
  std::string stats_json() const;
};

}  // namespace fjord::engine
