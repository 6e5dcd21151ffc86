// DataNode::Impl (internal header for the node's source files).
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "fjord/base/acceptor.h"
#include "fjord/base/fd.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/tc.h"
#include "fjord/engine/data_node.h"
#include "fjord/engine/storage/page_pool.h"
#include "fjord/engine/thread_config.h"

namespace fjord::engine {

// Tags of the connection thread's epoll set: listeners are their index.
inline constexpr uint32_t kControlTag = UINT32_MAX;
inline constexpr uint32_t kWakeTag = UINT32_MAX - 1;
// Control connections: kControlClientTag + their slot (below kWakeTag).
inline constexpr uint32_t kControlClientTag = UINT32_MAX - 64;

// Where a node's default control socket lives: <DataDir>/fjord-control
// (control_socket.cpp; made mode 0700 by the node).
std::string default_control_directory(const std::string& data_dir);

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
  std::vector<TcBlock*> tc_blocks;    // owned by the runtime; read for statistics
  std::vector<LdmBlock*> ldm_blocks;  // likewise
  std::vector<std::unique_ptr<transport::Listener>> listeners;
  UniqueFd control_fd;
  Acceptor control_acceptor{"control socket"};  // with its spare descriptor
  std::string control_name;
  bool control_in_private_directory = false;  // the default name: its directory is made private first
  // Control connections whose command line has not all arrived: a client
  // that connects and waits, or sends its line in pieces, holds up nothing
  // (each has until its deadline). Connection thread only.
  struct ControlClient {
    UniqueFd fd;
    std::string line;
    uint64_t deadline_ns = 0;
  };
  static constexpr std::size_t kMaxControlClients = 8;
  static constexpr std::size_t kMaxControlLine = 255;
  static constexpr uint64_t kControlTimeoutNs = 2'000'000'000ULL;
  std::array<ControlClient, kMaxControlClients> control_clients;
  UniqueFd epoll_fd;
  UniqueFd wake_fd;  // eventfd: stop() wakes the connection thread
  std::thread connections;
  uint64_t setup_log_quiet_until_ns = 0;  // log_setup_error: connection thread only
  uint64_t setup_errors_not_logged = 0;
  std::atomic<bool> started{false};
  std::atomic<bool> stopping{false};
  std::atomic<uint32_t> stats_interval_s{0};
  mutable std::mutex health_mutex;
  Status health;

  Status build_runtime();
  Status add_ldm_blocks();  // ldm_wiring.cpp
  Status open_listeners();  // connections.cpp ...
  Status open_control();    // control_socket.cpp
  void connection_loop();
  void accept_on(transport::Listener& listener);
  void log_setup_error(const Status& error);
  void accept_control();
  void read_control(std::size_t slot);
  void close_control(std::size_t slot);
  void expire_control(uint64_t now_ns);
  std::string control_reply(const std::string& command);
  void connect_to_servers(uint64_t& next_try_ns);
  SenderKind peer_kind(NodeId peer) const;
  void wake();
  std::string layout_text() const;
  std::string stats_text() const;
  std::string link_text(const LinkStatsView& link) const;
  std::string stats_json() const;
  std::string block_stats_text() const;  // block_stats.cpp
  std::string block_stats_json() const;  // fields appended to stats_json's object
};

}  // namespace fjord::engine
