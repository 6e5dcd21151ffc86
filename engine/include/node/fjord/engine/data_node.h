// DataNode: one data node process's engine, assembled from the cluster
// configuration: the thread layout (ThreadConfig / MaxNoOfExecutionThreads /
// automatic, or single-threaded), the runtime, the blocks (DICT on main, TC
// per tc thread, LDM per ldm thread), listeners for every link on which it
// is the server, a control socket for fjord-stats, and periodic statistics
// in the log when asked.
//
// Threads: create/start/stop from one controlling thread. The node runs its
// own threads (the runtime's, plus one "connections" thread that accepts
// links and serves the control socket). Slow path.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "fjord/base/status.h"
#include "fjord/engine/cluster_config.h"
#include "fjord/engine/runtime/runtime.h"
#include "fjord/transport/registry.h"

namespace fjord::engine {

struct DataNodeOptions {
  std::string config_path;                             // the cluster config file, or
  std::string config_text;                             // its text
  NodeId node_id = kNoNode;                            // required: an [ndbd] NodeId
  transport::TransporterRegistry* registry = nullptr;  // required
  std::string thread_config;                           // overrides ThreadConfig from the file
  std::optional<bool> single_threaded;                 // overrides SingleThreaded
  std::string control_socket;                          // overrides ControlSocket
  // Single-threaded only: the controlling thread runs the node's loop
  // through run_once() instead of a thread of the node's own (in-process
  // harnesses; see RuntimeOptions::caller_runs_loop). The connection thread
  // still accepts links.
  bool caller_runs_loop = false;
  // The config's other [ndbd] sections are data nodes the caller plays
  // itself (a harness testing what a node accepts from a peer data node):
  // the node links to them and admits their signals, and holds every
  // partition of every table itself. Without it, a config with more than
  // one [ndbd] is refused: a data node runs only as its cluster's one data
  // node.
  bool peer_data_nodes_played_by_caller = false;
};

class DataNode {
 public:
  static Result<std::unique_ptr<DataNode>> create(const DataNodeOptions& options);
  ~DataNode();

  Status start();
  // Closes the links, stops every thread. Idempotent.
  void stop();
  // caller_runs_loop: one pass of the node's loop on the calling thread;
  // true while work or input is left (Runtime::run_once).
  bool run_once();

  NodeId id() const;
  const ClusterConfig& config() const;
  // One line per thread: type, instance, blocks, CPUs, realtime, spintime.
  std::string layout_text() const;
  // Statistics: NDB-style lines (threads, links, DataMemory) and tables of
  // the LDM and TC instances' counters with their totals, or one JSON
  // object with the same ("ldm", "ldm_total", "tc", "tc_total").
  std::string stats_text() const;
  std::string stats_json() const;
  // Where fjord-stats finds this node: control_socket_of() below, or
  // DataNodeOptions.control_socket ("@name" = abstract socket).
  std::string control_socket() const;
  // The first error that stopped the node's connection thread, if any.
  Status health() const;

  struct Impl;

 private:
  explicit DataNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where node `node` of `cluster` answers control requests: its
// ControlSocket, else the path <DataDir>/fjord-control/node-<id>, in a
// directory the node makes private to its user (mode 0700) so that no other
// user can take the name. A relative DataDir is relative to the working
// directory of whoever asks. Empty if `cluster` has no such node.
std::string control_socket_of(const ClusterConfig& cluster, NodeId node);

// Asks a running node over its control socket; returns the reply text.
// Commands: "stats", "stats json", "layout", "log-stats SECONDS", "ping".
// kRejected, read nothing, when the process answering on the socket runs
// as neither this user nor root (another user holds the name).
Result<std::string> control_request(const std::string& socket_name, const std::string& command,
                                    uint32_t timeout_ms = 5000);

}  // namespace fjord::engine
