// Where the access and throughput commands find their data node, and as
// which API nodes over which transporters they reach it:
//
//   no --config           a data node started here (fjord-datanode, generated config in a temporary
//                         directory, single-threaded, spinning, pinned to the second CPU) with API
//                         nodes over every transporter that can run here (or only --transporter)
//   --config FILE         the user's cluster: --api-node (default the first [api]) and the first
//                         [ndbd]; the link section between them chooses the transporter. The node
//                         runs already, or --start-node starts it here from the same file.
//
// Slow path; the main thread, before any thread of ours starts (fork).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "access_report.h"
#include "commands.h"
#include "fjord/api/api.h"
#include "node_process.h"

namespace fjord::bench {

struct TargetEndpoint {
  std::string transporter;
  std::vector<NodeId> api_nodes;  // access uses the first; throughput one per executor
  std::string link;               // "[shm] link 1-60"
};

struct ClusterTarget {
  std::string config_path;  // what the API nodes (and a node started here) read
  NodeId data_node = kNoNode;
  std::string control_socket;  // the node's, for its layout and DataMemory
  std::vector<TargetEndpoint> endpoints;
  std::vector<TransporterColumn> skipped;  // transporters not measured, and why
  std::string description;                 // for the report's "data node:" line
  std::string config_label;                // "generated" or the --config path
  std::unique_ptr<NodeProcess> node;       // set when started here
  std::string temp_dir;                    // generated config (removed by `node`)
};

// Resolves (and starts, when asked) the cluster; `api_nodes_wanted` API node
// ids per transporter. kInvalidArgument for a config or option mistake
// (exit 2), other codes for a run that could not start (exit 1).
Result<ClusterTarget> prepare_cluster(const Options& options, const RunContext& context, uint32_t api_nodes_wanted,
                                      uint64_t rows, uint32_t row_bytes);

// Connects as `api_node` with the options' poll mode and timeouts.
Result<std::unique_ptr<api::Connection>> connect_api(const ClusterTarget& target, NodeId api_node,
                                                     const Options& options);
// What connect_api connects with (for a ClusterConnection on that id).
api::ConnectOptions api_options(const ClusterTarget& target, NodeId api_node, const Options& options);

// The spin time of the node started here: the grammar's maximum, or 0 when
// it shares one CPU with this program (two spinners on one CPU measure the
// scheduler).
uint32_t embedded_spintime_us(const RunContext& context);

// --node-param lines (and a sweep's value) into the generated config:
// SchedulerSpinTimer sets spintime_us, any other line is added to the
// [ndbd] section. kInvalidArgument for a spin time outside 0..500.
Status take_node_params(const std::vector<std::string>& params, EmbeddedConfig& config);

}  // namespace fjord::bench
