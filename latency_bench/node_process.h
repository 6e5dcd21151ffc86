// A data node in its own process for the access and throughput commands:
// `fjord-datanode --config FILE --node-id N`, pinned to a CPU, waited for
// until its control socket answers, asked for its thread layout and its
// DataMemory pages, and stopped with SIGTERM at the end. With a generated
// config, the file and the node's log live in a temporary directory that is
// removed when the NodeProcess goes (also when this program is interrupted:
// SIGINT/SIGTERM kill the node and remove the directory first).
//
// Also the embedded default's config text: one data node, single-threaded
// and spinning, and per transporter a set of API node ids joined to it by a
// link section of that type (tcp needs none: NDB's default link).
//
// Slow path. One thread owns a NodeProcess; start it before this program
// starts threads of its own (fork).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"
#include "process.h"

namespace fjord::bench {

// The fjord-datanode program: $FJORD_DATANODE, else next to this program in
// a build tree (../tools/fjord-datanode) or an install (./fjord-datanode),
// else PATH. kNotFound says where it looked.
Result<std::string> find_datanode_program();

struct EmbeddedConfig {
  std::vector<std::string> transporters;  // in order; index i gets API nodes embedded_api_node(i, 0..)
  uint16_t port = 0;                      // the node's ServerPort (a free one)
  int node_cpu = -1;                      // cpubind of the node's one thread; -1: not bound
  uint32_t spintime_us = 500;             // SchedulerSpinTimer (the grammar's maximum)
  std::string data_dir;
  std::string control_socket;  // "@fjord-latency-bench-<pid>"
  uint64_t data_memory_bytes = 64ULL << 20;
  uint32_t api_nodes_per_transporter = 8;
  uint64_t endpoint_base = 0;   // ShmKey and the like: unique to this process
  std::string tls_search_path;  // TlsSearchPath of the tcp-tls links (kTcpTls)
  // KEY=VALUE lines added to the [ndbd] section (not SchedulerSpinTimer:
  // that is spintime_us, which ThreadConfig repeats).
  std::vector<std::string> node_params;
};

inline constexpr NodeId kEmbeddedDataNode = 1;
// API node `i` of transporter number `index`: 50, 51, ... for the first,
// 60, 61, ... for the second.
NodeId embedded_api_node(std::size_t transporter_index, uint32_t i);
// The config text (NDB config.ini style) of the embedded cluster.
std::string embedded_config_text(const EmbeddedConfig& config, const transport::TransporterRegistry& registry);
// DataMemory for `rows` rows of `row_bytes`, their hash, unique and ordered
// indexes, with room to spare, rounded up to MB.
uint64_t embedded_data_memory_bytes(uint64_t rows, uint32_t row_bytes);

struct NodeLaunch {
  std::string program;         // fjord-datanode
  std::string config_path;     // the file it reads
  NodeId node = kNoNode;       // its --node-id
  int cpu = -1;                // pin the process here
  std::string control_socket;  // where it answers once started
  std::string log_path;        // --log-file ("" = the node's default: DataDir/ndb_<id>_out.log)
  std::string temp_dir;        // removed with the NodeProcess ("" = nothing to remove)
  uint64_t timeout_ns = 10'000'000'000ULL;
};

class NodeProcess {
 public:
  // Starts the node and waits until its control socket answers; on failure
  // the Status quotes the end of its output, and the node is stopped.
  static Result<std::unique_ptr<NodeProcess>> start(const NodeLaunch& launch);
  ~NodeProcess();
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  // SIGTERM; waits for a clean exit (kInternal quoting its output if the
  // exit code is not 0). Idempotent.
  Status stop();
  pid_t pid() const { return child_.pid(); }

 private:
  NodeProcess(NodeLaunch launch, ChildProcess child) : launch_(std::move(launch)), child_(std::move(child)) {}
  void remove_temp_dir();

  NodeLaunch launch_;
  ChildProcess child_;
  bool stopped_ = false;
};

// A running node's answers over its control socket (any node this host
// reaches: started here or by the user).
Result<std::string> node_layout(const std::string& control_socket, uint32_t timeout_ms = 5000);
// DataMemory pages in use ("stats json": data_memory.pages_in_use).
Result<uint64_t> node_pages_in_use(const std::string& control_socket, uint32_t timeout_ms = 5000);
inline constexpr uint64_t kDataMemoryPageBytes = 32768;  // storage/page_pool.h

// A fresh directory under $TMPDIR (or /tmp): "/tmp/latency_bench.XXXXXX".
Result<std::string> make_temp_dir();
// While a node started here runs, SIGINT/SIGTERM also remove this helper's
// file and then its directory (redis-server's socket); one helper at a time.
void note_interrupt_cleanup(const std::string& dir, const std::string& file);
void forget_interrupt_cleanup();

}  // namespace fjord::bench
