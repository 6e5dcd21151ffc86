// DataNode: assembly of config, layout, runtime, blocks and links.
#include "fjord/engine/data_node.h"

#include <sys/epoll.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/base/fd.h"
#include "fjord/base/log.h"
#include "fjord/base/tuning.h"
#include "fjord/engine/blocks/dict.h"
#include "fjord/engine/blocks/tc.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/thread_config.h"
#include "node_internal.h"

namespace fjord::engine {

DataNode::DataNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DataNode::~DataNode() { stop(); }

NodeId DataNode::id() const { return impl_->self; }
const ClusterConfig& DataNode::config() const { return impl_->cluster; }
std::string DataNode::control_socket() const { return impl_->control_name; }
std::string DataNode::layout_text() const { return impl_->layout_text(); }
std::string DataNode::stats_text() const { return impl_->stats_text(); }
std::string DataNode::stats_json() const { return impl_->stats_json(); }

Status DataNode::health() const {
  std::lock_guard lock(impl_->health_mutex);
  return impl_->health;
}

namespace {

Status invalid(const std::string& m) { return Status(StatusCode::kInvalidArgument, m); }

// NDB's single-threaded ndbd: one thread. It keeps the first LDM thread's
// placement.
void collapse_to_one_thread(ThreadLayout& layout) {
  ThreadSpec one = layout.threads.front();
  for (const ThreadSpec& t : layout.threads)
    if (t.type == ThreadType::kLdm) {
      one = t;
      break;
    }
  one.type = ThreadType::kMain;
  one.instance = 0;
  layout.threads = {one};
  layout.source += " (single-threaded: one thread receives, executes and sends)";
}

// LockExecuteThreadToCPU and LockMaintThreadsToCPU of the node's section
// (LockExecuteThreadToCPU was checked when the file was read).
CpuLocks cpu_locks_of(const NodeDef& node) {
  CpuLocks locks;
  const std::string& execute = node.params.get_string("LockExecuteThreadToCPU");
  if (!execute.empty())
    if (auto cpus = parse_cpu_id_list(execute); cpus) locks.execute_cpus = std::move(cpus).value();
  if (node.params.has("LockMaintThreadsToCPU"))
    locks.maint_cpu = static_cast<int>(node.params.get_uint("LockMaintThreadsToCPU"));
  return locks;
}

Status check_placement(const ThreadLayout& layout, const std::string& origin) {
  auto machine = detect_machine_topology();
  if (machine)
    if (Status s = validate_placement(layout, *machine); !s) return Status(s.code(), origin + ": " + s.message());
  return Status::ok();
}

// The threads to run: from ThreadConfig (option, else file), else
// MaxNoOfExecutionThreads, else the machine; or one thread in single mode.
// Then the CPUs of LockExecuteThreadToCPU and LockMaintThreadsToCPU for
// the threads left unplaced (in single mode: the one thread).
Result<ThreadLayout> choose_layout(const DataNodeOptions& o, const NodeDef& node, bool single) {
  const std::string& text = !o.thread_config.empty() ? o.thread_config : node.params.get_string("ThreadConfig");
  const std::string origin = !o.thread_config.empty() ? "--thread-config" : node.origin;
  auto layout = select_thread_layout(text, static_cast<uint32_t>(node.params.get_uint("MaxNoOfExecutionThreads")));
  if (!layout) return Status(layout.status().code(), origin + ": " + layout.status().message());
  if (Status s = check_placement(*layout, origin); !s) return s;
  const auto spin = static_cast<uint32_t>(node.params.get_uint("SchedulerSpinTimer"));
  const bool realtime = node.params.get_bool("RealtimeScheduler");
  for (ThreadSpec& t : layout->threads) {
    if (t.spintime_us == 0) t.spintime_us = spin;  // NDB: SchedulerSpinTimer is the default
    t.realtime = t.realtime || realtime;
  }
  if (single) collapse_to_one_thread(*layout);
  const CpuLocks locks = cpu_locks_of(node);
  if (locks.execute_cpus.empty() && locks.maint_cpu < 0) return layout;
  if (Status s = apply_cpu_locks(locks, *layout); !s) return Status(s.code(), node.origin + ": " + s.message());
  if (Status s = check_placement(*layout, node.origin); !s) return s;
  return layout;
}

// What an API node may send over its link, and to which block: the
// requests of the API protocol (protocol.h), nothing else. Data nodes may
// send every engine signal, management nodes nothing (the defaults).
Status admit_api_requests(LinkAdmission& admission) {
  namespace gsn = protocol::gsn;
  struct Rule {
    BlockNumber block;
    uint16_t signal_number;
  };
  static constexpr Rule kApiRequests[] = {
      {block_numbers::kDict, gsn::kApiRegReq},    {block_numbers::kDict, gsn::kCreateTableReq},
      {block_numbers::kDict, gsn::kDropTableReq}, {block_numbers::kDict, gsn::kGetTableReq},
      {block_numbers::kTc, gsn::kTcKeyReq},       {block_numbers::kTc, gsn::kTcKeyTrain},
      {block_numbers::kTc, gsn::kTcCommitReq},    {block_numbers::kTc, gsn::kTcRollbackReq},
      {block_numbers::kTc, gsn::kScanReq},        {block_numbers::kTc, gsn::kScanNextReq},
      {block_numbers::kTc, gsn::kScanCloseReq},
  };
  for (const Rule& r : kApiRequests)
    if (Status s = admission.allow(SenderKind::kApiNode, r.block, r.signal_number); !s) return s;
  return Status::ok();
}

std::string data_node_ids(const ClusterConfig& cluster) {
  std::string ids;
  for (const NodeDef* n : cluster.of_kind(NodeKind::kData)) ids += (ids.empty() ? "" : ", ") + std::to_string(n->id);
  return ids;
}

// The node to run is a data node of the config, and the config's only one
// (unless the caller plays the others).
Status check_self(const ClusterConfig& cluster, const DataNodeOptions& o) {
  const std::string self = std::to_string(o.node_id);
  const NodeDef* node = cluster.node(o.node_id);
  if (!node)
    return Status(StatusCode::kNotFound, "node id " + self + " is not in " + cluster.path + ": no [ndbd] has NodeId=" +
                                             self + " (its data nodes: " + data_node_ids(cluster) + ")");
  if (node->kind != NodeKind::kData)
    return invalid("node " + self + " is an " + node_kind_name(node->kind) + " node in " + cluster.path +
                   ", not a data node ([ndbd])");
  const std::size_t data_nodes = cluster.of_kind(NodeKind::kData).size();
  if (data_nodes > 1 && !o.peer_data_nodes_played_by_caller)
    return invalid("node " + self + " does not start: " + cluster.path + " names " + std::to_string(data_nodes) +
                   " data nodes (" + data_node_ids(cluster) +
                   "), and a data node runs only as its cluster's one data node (no node-to-node start or "
                   "replication); give it a config with one [ndbd]");
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<DataNode>> DataNode::create(const DataNodeOptions& o) {
  if (!o.registry) return invalid("DataNodeOptions.registry is required");
  auto cluster = !o.config_path.empty() ? load_cluster_config_file(o.config_path, *o.registry)
                                        : load_cluster_config_text(o.config_text, "<config>", *o.registry);
  if (!cluster) return cluster.status();
  if (Status s = check_self(*cluster, o); !s) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->self = o.node_id;
  impl->cluster = std::move(cluster).value();
  impl->node = impl->cluster.node(o.node_id);
  impl->single = o.single_threaded.value_or(impl->node->params.get_bool("SingleThreaded"));
  if (o.caller_runs_loop && !impl->single)
    return invalid("node " + std::to_string(o.node_id) + ": the caller runs the loop of a single-threaded node only");
  auto layout = choose_layout(o, *impl->node, impl->single);
  if (!layout) return layout.status();
  impl->layout = std::move(layout).value();
  impl->control_name = !o.control_socket.empty() ? o.control_socket : control_socket_of(impl->cluster, o.node_id);
  impl->control_in_private_directory =
      o.control_socket.empty() && impl->node->params.get_string("ControlSocket").empty();
  if (Status s = impl->build_runtime(); !s) return s;
  return std::unique_ptr<DataNode>(new DataNode(std::move(impl)));
}

Status DataNode::Impl::build_runtime() {
  RuntimeOptions ro;
  ro.self = self;
  ro.threads = layout.threads;
  ro.single_threaded = single;
  ro.caller_runs_loop = options.caller_runs_loop;
  ro.job_buffer_bytes = node->params.get_uint("JobBufferMemory");
  ro.watchdog_ms = static_cast<uint32_t>(node->params.get_uint("TimeBetweenWatchDogCheck"));
  ro.execution_timer_us = static_cast<uint32_t>(node->params.get_uint("SchedulerExecutionTimer"));
  ro.batch_signals = tuning::kBatchSignalsByResponsiveness[node->params.get_uint("SchedulerResponsiveness")];
  ro.on_link_down = [](std::unique_ptr<transport::Transporter>) {
    // The link is out of every runtime structure: letting it go here closes
    // it. API nodes reconnect on their own.
  };
  if (Status s = admit_api_requests(ro.admission); !s) return s;
  auto rt = Runtime::create(ro);
  if (!rt) return rt.status();
  runtime = std::move(rt).value();
  ldm_count = single ? 1 : std::max<uint32_t>(1, layout.count(ThreadType::kLdm));
  tc_count = single ? 1 : std::max<uint32_t>(1, layout.count(ThreadType::kTc));
  const bool tc_on_main = !single && layout.count(ThreadType::kTc) == 0;
  const auto partitions = static_cast<uint32_t>(node->params.get_uint("PartitionsPerTable"));
  if (Status s = runtime->add_block(
          std::make_unique<DictBlock>(static_cast<uint16_t>(tc_count), static_cast<uint16_t>(ldm_count), partitions),
          ThreadType::kMain, 0);
      !s)
    return s;
  for (uint32_t i = 0; i < tc_count; ++i) {
    TcOptions t;
    t.instance = static_cast<uint16_t>(i);
    t.ldm_instances = static_cast<uint16_t>(ldm_count);
    t.max_transactions = static_cast<uint32_t>(node->params.get_uint("MaxNoOfConcurrentTransactions"));
    t.max_operations = static_cast<uint32_t>(node->params.get_uint("MaxNoOfConcurrentOperations"));
    t.max_scans = static_cast<uint32_t>(node->params.get_uint("MaxNoOfConcurrentScans"));
    t.deadlock_timeout_ms = static_cast<uint32_t>(node->params.get_uint("TransactionDeadlockDetectionTimeout"));
    t.inactive_timeout_ms = static_cast<uint32_t>(node->params.get_uint("TransactionInactiveTimeout"));
    auto block = std::make_unique<TcBlock>(t);
    tc_blocks.push_back(block.get());
    if (Status s =
            runtime->add_block(std::move(block), tc_on_main ? ThreadType::kMain : ThreadType::kTc, tc_on_main ? 0 : i);
        !s)
      return s;
  }
  return add_ldm_blocks();
}

Status DataNode::start() {
  Impl& m = *impl_;
  if (m.started) return invalid("data node already started");
  FJORD_LOG_INFO("node %u: starting; %s", m.self, m.layout.source.c_str());
  for (const std::string& warning : m.cluster.warnings) FJORD_LOG_WARN("node %u: %s", m.self, warning.c_str());
  if (Status s = m.runtime->start(); !s) return s;
  if (Status s = m.open_listeners(); !s) {
    m.runtime->stop();
    return s;
  }
  if (Status s = m.open_control(); !s) {
    m.runtime->stop();
    return s;
  }
  m.started = true;
  m.connections = std::thread([&m] { m.connection_loop(); });
  FJORD_LOG_INFO("node %u: started; control socket %s", m.self, m.control_name.c_str());
  return Status::ok();
}

bool DataNode::run_once() { return impl_->runtime->run_once(); }

void DataNode::stop() {
  Impl& m = *impl_;
  if (!m.started || m.stopping.exchange(true)) return;
  m.wake();
  if (m.connections.joinable()) m.connections.join();
  m.runtime->stop();
  FJORD_LOG_INFO("node %u: stopped", m.self);
}

}  // namespace fjord::engine
