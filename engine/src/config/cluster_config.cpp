#include "fjord/engine/cluster_config.h"

#include <algorithm>

#include "fjord/engine/schema.h"
#include "fjord/engine/thread_config.h"

namespace fjord::engine {

using config::Kind;
using config::ParamSpec;

const ParamSpec kDataNodeParams[] = {
    {"NodeId", Kind::kUint, 1, kMaxNodeId, "", true, "this data node's id"},
    {"HostName", Kind::kString, 0, 255, "localhost", false, "where the node runs; API nodes connect here"},
    {"ServerPort", Kind::kUint, 0, 65535, "0", false, "port for incoming links; 0 = 11860 + NodeId"},
    {"DataMemory", Kind::kBytes, 1 << 20, 1ULL << 40, "64M", false, "memory for rows and indexes"},
    {"DataMemoryHugePages", Kind::kBool, 0, 1, "true", false,
     "back DataMemory with transparent 2 MB pages where the kernel allows (fewer TLB misses)"},
    {"DataDir", Kind::kString, 0, 4096, ".", false, "where the node writes its log (ndb_<id>_out.log)"},
    {"NoOfReplicas", Kind::kUint, 1, 1, "1", false, "copies of each row (only 1 in this version)"},
    {"ThreadConfig", Kind::kString, 0, 4096, "", false, "thread layout in NDB's grammar (docs/configuration.md)"},
    {"MaxNoOfExecutionThreads", Kind::kUint, 0, 72, "0", false, "thread counts from NDB's table; 0 = not set"},
    {"SingleThreaded", Kind::kBool, 0, 1, "false", false,
     "one thread receives, executes and sends (NDB's ndbd): lowest latency on few cores"},
    {"SchedulerSpinTimer", Kind::kUint, 0, 500, "0", false,
     "microseconds a thread spins before sleeping, unless ThreadConfig sets spintime"},
    {"RealtimeScheduler", Kind::kBool, 0, 1, "false", false,
     "threads use SCHED_FIFO unless ThreadConfig says otherwise"},
    {"PartitionsPerTable", Kind::kUint, 1, kMaxPartitions, "8", false,
     "partitions of a table when its definition does not say"},
    {"TransactionInactiveTimeout", Kind::kUint, 0, UINT32_MAX, "0", false,
     "ms a transaction may wait for its API before it is aborted; 0 = forever"},
    {"TransactionDeadlockDetectionTimeout", Kind::kUint, 50, UINT32_MAX, "1200", false,
     "ms an operation may wait for a lock before its transaction is aborted"},
    {"MaxNoOfConcurrentTransactions", Kind::kUint, 32, 1 << 22, "4096", false, "transaction records per TC instance"},
    {"MaxNoOfConcurrentOperations", Kind::kUint, 32, 1 << 24, "32768", false,
     "operation records per TC instance (and lock records per LDM instance)"},
    {"MaxNoOfConcurrentScans", Kind::kUint, 1, 500, "256", false, "scans in progress per TC instance"},
    {"MaxNoOfLocalScans", Kind::kUint, 0, 100000, "0", false,
     "partition scans open at once in the node (a scan opens one per partition), shared equally by its LDM "
     "instances; 0 = MaxNoOfConcurrentScans x TC instances x PartitionsPerTable, at most 16384"},
    {"TimeBetweenWatchDogCheck", Kind::kUint, 0, 600000, "6000", false,
     "ms a thread may stay in one step before the watchdog reports it; 0 = off"},
    {"JobBufferMemory", Kind::kBytes, 64 << 10, 1 << 30, "1M", false, "each job buffer between two threads"},
    {"StatsLogInterval", Kind::kUint, 0, 86400, "0", false, "seconds between statistics in the log; 0 = off"},
    {"ControlSocket", Kind::kString, 0, 100, "", false,
     "Unix socket for fjord-stats ('@name' = abstract); empty = DataDir/fjord-control/node-<NodeId>, in a directory "
     "private to the node's user"},
    {"ClusterKeyFile", Kind::kString, 0, 4096, "", false,
     "file holding the cluster key (32 to 4096 bytes, owned by the node's user, mode 0600) that each link of this "
     "node proves at set-up; empty = links not authenticated"},
};
const std::size_t kDataNodeParamCount = std::size(kDataNodeParams);

const ParamSpec kApiNodeParams[] = {
    {"NodeId", Kind::kUint, 1, kMaxNodeId, "", true, "this API node's id"},
    {"HostName", Kind::kString, 0, 255, "", false, "where the API node runs; empty = any host"},
    {"ClusterKeyFile", Kind::kString, 0, 4096, "", false,
     "file holding the cluster key (as for [ndbd]); empty = links not authenticated"},
};
const std::size_t kApiNodeParamCount = std::size(kApiNodeParams);

const char* node_kind_name(NodeKind kind) noexcept {
  switch (kind) {
    case NodeKind::kData: return "data";
    case NodeKind::kApi: return "api";
    case NodeKind::kMgm: return "mgm";
  }
  return "?";
}

const NodeDef* ClusterConfig::node(NodeId id) const {
  for (const NodeDef& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

std::vector<const NodeDef*> ClusterConfig::of_kind(NodeKind kind) const {
  std::vector<const NodeDef*> out;
  for (const NodeDef& n : nodes)
    if (n.kind == kind) out.push_back(&n);
  return out;
}

namespace {

Status invalid(const std::string& m) { return Status(StatusCode::kInvalidArgument, m); }

bool node_section(const std::string& name, NodeKind& kind) {
  if (name == "ndbd")
    kind = NodeKind::kData;
  else if (name == "api" || name == "mysqld")
    kind = NodeKind::kApi;
  else if (name == "mgm" || name == "ndb_mgmd")
    kind = NodeKind::kMgm;
  else
    return false;
  return true;
}

bool default_section(const std::string& name) {
  constexpr std::string_view kSuffix = " default";
  return name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

Result<NodeDef> load_node(const config::File& file, const config::Section& section, NodeKind kind) {
  const std::span<const ParamSpec> specs = kind == NodeKind::kData
                                               ? std::span<const ParamSpec>(kDataNodeParams, kDataNodeParamCount)
                                               : std::span<const ParamSpec>(kApiNodeParams, kApiNodeParamCount);
  // [mysqld] and [mgm] take [api] defaults' shape; their own default sections apply.
  auto params = config::apply_schema(file, section, specs);
  if (!params) return params.status();
  NodeDef n;
  n.kind = kind;
  n.id = static_cast<NodeId>(params->get_uint("NodeId"));
  n.host = params->get_string("HostName");
  if (kind == NodeKind::kData) {
    const auto port = static_cast<uint16_t>(params->get_uint("ServerPort"));
    n.server_port = port != 0 ? port : static_cast<uint16_t>(kDefaultServerPortBase + n.id);
    const std::string& tc = params->get_string("ThreadConfig");
    if (!tc.empty())
      if (auto layout = parse_thread_config(tc); !layout)
        return invalid(file.path + ":" + std::to_string(section.line) + ": [ndbd] " + layout.status().message());
  }
  n.origin = file.path + ":" + std::to_string(section.line);
  n.params = std::move(params).value();
  return n;
}

// A data node and a node with no link between them get a default TCP link.
void add_default_links(const std::vector<NodeDef>& nodes, const transport::LinkTable& explicit_links,
                       config::File& file) {
  for (const NodeDef& a : nodes) {
    if (a.kind != NodeKind::kData) continue;
    for (const NodeDef& b : nodes) {
      if (b.id == a.id || b.kind == NodeKind::kMgm) continue;
      if (b.kind == NodeKind::kData && b.id < a.id) continue;  // each data-data pair once
      if (explicit_links.find(a.id, b.id)) continue;
      config::Section s{"tcp", 0, {}};
      s.entries.push_back({"NodeId1", std::to_string(a.id), 0});
      s.entries.push_back({"NodeId2", std::to_string(b.id), 0});
      file.sections.push_back(std::move(s));
    }
  }
}

}  // namespace

Result<ClusterConfig> load_cluster_config(const config::File& file, const transport::TransporterRegistry& registry) {
  ClusterConfig out;
  out.path = file.path;
  for (const config::Section& section : file.sections) {
    NodeKind kind;
    if (node_section(section.name, kind)) {
      auto node = load_node(file, section, kind);
      if (!node) return node.status();
      if (const NodeDef* other = out.node(node->id))
        return Status(StatusCode::kAlreadyExists, node->origin + ": [" + section.name +
                                                      "] NodeId=" + std::to_string(node->id) + " is already used at " +
                                                      other->origin);
      out.nodes.push_back(std::move(node).value());
      continue;
    }
    if (transport::is_link_section(section.name, registry)) continue;
    if (default_section(section.name) && node_section(section.name.substr(0, section.name.size() - 8), kind)) continue;
    return invalid(file.path + ":" + std::to_string(section.line) + ": unknown section [" + section.name +
                   "]; known: ndbd, api, mysqld, mgm, and the transporters " + registry.names() +
                   " (each also as '<name> default')");
  }
  if (out.of_kind(NodeKind::kData).empty())
    return invalid(file.path + ": no [ndbd] section: a cluster needs a data node");
  std::vector<transport::NodeAddress> addresses;
  for (const NodeDef& n : out.nodes)
    addresses.push_back(
        {n.id, n.host, n.server_port, n.kind == NodeKind::kData, n.params.get_string("ClusterKeyFile")});
  auto explicit_links = transport::load_link_table(file, registry, addresses);
  if (!explicit_links) return explicit_links.status();
  for (const transport::LinkConfig& link : explicit_links->all())
    for (NodeId id : {link.node1, link.node2})
      if (out.node(id)->kind == NodeKind::kMgm)
        return invalid(link.origin + ": " + link.describe() + " joins management node " + std::to_string(id) +
                       ", which carries no data traffic");
  if (!registry.find("tcp")) {
    out.links = std::move(explicit_links).value();
    return out;
  }
  config::File with_defaults = file;
  add_default_links(out.nodes, *explicit_links, with_defaults);
  auto links = transport::load_link_table(with_defaults, registry, addresses);
  if (!links) return links.status();
  out.links = std::move(links).value();
  return out;
}

Result<ClusterConfig> load_cluster_config_file(const std::string& path,
                                               const transport::TransporterRegistry& registry) {
  auto file = config::read_file(path);
  if (!file) return file.status();
  return load_cluster_config(*file, registry);
}

}  // namespace fjord::engine
