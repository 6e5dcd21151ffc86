#include "fjord/engine/cluster_config.h"

#include <algorithm>
#include <optional>

#include "cluster_config_internal.h"
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
    {"NoOfReplicas", Kind::kUint, 1, kMaxReplicas, "1", false,
     "copies of each row, the data nodes of each node group; one value for every data node (set it in [ndbd "
     "default])"},
    {"NodeGroup", Kind::kUint, 0, kMaxNodeId - 1, "", false,
     "this data node's node group; not set = the lowest-numbered group with room, in node id order (groups of "
     "NoOfReplicas consecutive nodes when no node sets it)"},
    {"ThreadConfig", Kind::kString, 0, 4096, "", false, "thread layout in NDB's grammar (docs/configuration.md)"},
    {"MaxNoOfExecutionThreads", Kind::kUint, 0, 72, "0", false, "thread counts from NDB's table; 0 = not set"},
    {"SingleThreaded", Kind::kBool, 0, 1, "false", false,
     "one thread receives, executes and sends (NDB's ndbd): lowest latency on few cores"},
    {"SchedulerSpinTimer", Kind::kUint, 0, 500, "0", false,
     "microseconds a thread spins before sleeping, unless ThreadConfig sets spintime"},
    {"RealtimeScheduler", Kind::kBool, 0, 1, "false", false,
     "threads use SCHED_FIFO unless ThreadConfig says otherwise"},
    {"SchedulerExecutionTimer", Kind::kUint, 0, kExecutionTimerMaxUs, "0", false,
     "microseconds a thread executes signals before it sends what they produced to other nodes (it always sends "
     "before it waits); 0 = send after every batch"},
    {"SchedulerResponsiveness", Kind::kUint, 0, 10, "5", false,
     "balance of response time against throughput: higher = fewer signals executed per batch before sending"},
    {"LockExecuteThreadToCPU", Kind::kString, 0, 4096, "", false,
     "CPUs (such as 0-3,8) for the execution threads ThreadConfig does not place, handed out as NDB does"},
    {"LockMaintThreadsToCPU", Kind::kUint, 0, kNdbCpuIdMax, "", false,
     "CPU for the io and wd threads unless ThreadConfig places them; not set = not placed"},
    {"PartitionsPerTable", Kind::kUint, 1, kMaxPartitions, "8", false,
     "partitions of a table when its definition does not say; one value for the cluster (set it in [ndbd default])"},
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
    {"NodeId", Kind::kUint, 1, kMaxNodeId, "", false,
     "this API node's id; if not given, the next id no other node has (as in NDB)"},
    {"HostName", Kind::kString, 0, 255, "", false, "where the API node runs; empty = any host"},
    {"ClusterKeyFile", Kind::kString, 0, 4096, "", false,
     "file holding the cluster key (as for [ndbd]); empty = links not authenticated"},
};
const std::size_t kApiNodeParamCount = std::size(kApiNodeParams);

const ParamSpec kMgmNodeParams[] = {
    {"NodeId", Kind::kUint, 1, kMaxNodeId, "", false,
     "this management node's id; if not given, the next id no other node has (as in NDB)"},
    {"HostName", Kind::kString, 0, 255, "localhost", false, "where the management node runs"},
    {"ClusterKeyFile", Kind::kString, 0, 4096, "", false,
     "file holding the cluster key (as for [ndbd]); empty = links not authenticated"},
};
const std::size_t kMgmNodeParamCount = std::size(kMgmNodeParams);

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

constexpr std::string_view kDataNodeAliases[] = {"ndbd"};
constexpr std::string_view kApiNodeAliases[] = {"api", "mysqld"};
constexpr std::string_view kMgmNodeAliases[] = {"ndb_mgmd", "mgm"};
// NDB sections Fjord has no use for: accepted, with a warning.
constexpr std::string_view kNdbOtherSections[] = {"system", "computer"};

config::Schema node_schema(NodeKind kind) {
  switch (kind) {
    case NodeKind::kData:
      return {{kDataNodeParams, kDataNodeParamCount}, {kNdbDataNodeNames, kNdbDataNodeNameCount}, kDataNodeAliases};
    case NodeKind::kApi:
      return {{kApiNodeParams, kApiNodeParamCount}, {kNdbApiNodeNames, kNdbApiNodeNameCount}, kApiNodeAliases};
    case NodeKind::kMgm:
      return {{kMgmNodeParams, kMgmNodeParamCount}, {kNdbMgmNodeNames, kNdbMgmNodeNameCount}, kMgmNodeAliases};
  }
  FJORD_ASSERT_MSG(false, "unknown node kind");
  return {};
}

bool node_section(std::string_view name, NodeKind& kind) {
  for (NodeKind k : {NodeKind::kData, NodeKind::kApi, NodeKind::kMgm}) {
    const auto aliases = node_schema(k).aliases;
    if (std::find(aliases.begin(), aliases.end(), name) != aliases.end()) {
      kind = k;
      return true;
    }
  }
  return false;
}

std::string_view without_default(std::string_view name) {
  return config::is_default_section(name) ? name.substr(0, name.size() - std::string_view(" default").size()) : name;
}

// One node section; id kNoNode when NodeId is not given (assigned later).
// Errors go to `diagnostics`; nullopt if the section has any.
std::optional<NodeDef> load_node(const config::File& file, const config::Section& section, NodeKind kind,
                                 config::Diagnostics& diagnostics) {
  const std::size_t errors_before = diagnostics.error_count();
  config::ParamSet params = config::apply_schema(file, section, node_schema(kind), diagnostics);
  NodeDef n;
  n.kind = kind;
  n.section = section.name;
  n.origin = file.path + ":" + std::to_string(section.line);
  if (params.has("NodeId")) n.id = static_cast<NodeId>(params.get_uint("NodeId"));
  n.host = params.get_string("HostName");
  if (kind == NodeKind::kData && params.has("ServerPort")) {
    const auto port = static_cast<uint16_t>(params.get_uint("ServerPort"));
    n.server_port = port != 0 ? port : static_cast<uint16_t>(kDefaultServerPortBase + n.id);
  }
  if (kind == NodeKind::kData && params.has("ThreadConfig")) {
    // Named at the line of the ThreadConfig key, which may be in [ndbd default].
    const std::string& tc = params.get_string("ThreadConfig");
    if (!tc.empty())
      if (auto layout = parse_thread_config(tc); !layout)
        diagnostics.error(params.origin("ThreadConfig") + ": [" + section.name + "] " + layout.status().message());
  }
  if (kind == NodeKind::kData && !params.get_string("LockExecuteThreadToCPU").empty())
    if (auto cpus = parse_cpu_id_list(params.get_string("LockExecuteThreadToCPU")); !cpus)
      diagnostics.error(params.origin("LockExecuteThreadToCPU") + ": [" + section.name +
                        "] LockExecuteThreadToCPU: " + cpus.status().message());
  if (diagnostics.error_count() != errors_before) return std::nullopt;
  n.params = std::move(params);
  return n;
}

// NDB's rule for a node section without NodeId: the id after the previous
// node section's, skipping ids in use. Ids given anywhere in the file count
// as in use, so an assigned id never collides with a later section's.
void assign_node_ids(std::vector<NodeDef>& nodes, config::Diagnostics& diagnostics) {
  std::vector<bool> used(kMaxNodeId + 1, false);
  for (const NodeDef& n : nodes)
    if (n.id != kNoNode) used[n.id] = true;
  unsigned next = 1;
  for (NodeDef& n : nodes) {
    if (n.id == kNoNode) {
      while (next <= kMaxNodeId && used[next]) ++next;
      if (next > kMaxNodeId) {
        diagnostics.error(n.origin + ": [" + n.section + "] no free node id left (1.." + std::to_string(kMaxNodeId) +
                          ") to assign to a section without NodeId");
        continue;
      }
      n.id = static_cast<NodeId>(next);
      used[next] = true;
      n.params.set("NodeId", config::Kind::kUint, n.id, std::to_string(n.id), "assigned");
    }
    next = n.id + 1U;
  }
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

// Node sections, in file order, with their ids; checks every other section
// is a known one.
std::vector<NodeDef> load_nodes(const config::File& file, const transport::TransporterRegistry& registry,
                                config::Diagnostics& diagnostics) {
  std::vector<NodeDef> nodes;
  for (const config::Section& section : file.sections) {
    NodeKind kind;
    if (node_section(section.name, kind)) {
      if (std::optional<NodeDef> node = load_node(file, section, kind, diagnostics)) nodes.push_back(*node);
      continue;
    }
    const std::string_view base = without_default(section.name);
    const std::string where = file.path + ":" + std::to_string(section.line);
    if (base != section.name && node_section(base, kind)) {
      config::check_default_section(file, section, node_schema(kind), diagnostics);
    } else if (std::find(std::begin(kNdbOtherSections), std::end(kNdbOtherSections), base) !=
               std::end(kNdbOtherSections)) {
      diagnostics.warn(where + ": [" + section.name + "]: an NDB section Fjord does not use; it has no effect here");
    } else if (!transport::is_link_section(section.name, registry)) {
      diagnostics.error(where + ": unknown section [" + section.name +
                        "]; known: ndbd, api, mysqld, ndb_mgmd, mgm, and the transporters " + registry.names() +
                        " (each also as '<name> default')");
    }
  }
  assign_node_ids(nodes, diagnostics);
  return nodes;
}

void check_node_ids(const std::vector<NodeDef>& nodes, const config::File& file, config::Diagnostics& diagnostics) {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (nodes[i].id == nodes[j].id && nodes[i].id != kNoNode)
        diagnostics.error(nodes[i].origin + ": [" + nodes[i].section + "] NodeId=" + std::to_string(nodes[i].id) +
                              " is already used at " + nodes[j].origin,
                          StatusCode::kAlreadyExists);
  // A data node section with errors of its own is still there.
  const bool has_data_node = std::any_of(file.sections.begin(), file.sections.end(), [](const config::Section& s) {
    NodeKind kind;
    return node_section(s.name, kind) && kind == NodeKind::kData;
  });
  if (!has_data_node) diagnostics.error(file.path + ": no [ndbd] section: a cluster needs a data node");
}

}  // namespace

std::optional<ClusterConfig> load_cluster_config(const config::File& file,
                                                 const transport::TransporterRegistry& registry,
                                                 config::Diagnostics& diagnostics) {
  ClusterConfig out;
  out.path = file.path;
  out.nodes = load_nodes(file, registry, diagnostics);
  check_node_ids(out.nodes, file, diagnostics);
  if (!diagnostics.has_errors())
    if (std::optional<ClusterLayout> layout = detail::build_layout(file, out.nodes, diagnostics)) out.layout = *layout;
  std::vector<transport::NodeAddress> addresses;
  for (const NodeDef& n : out.nodes)
    addresses.push_back(
        {n.id, n.host, n.server_port, n.kind == NodeKind::kData, n.params.get_string("ClusterKeyFile")});
  // The link sections are checked too; against the nodes only when those
  // loaded, so a node's error is not repeated as "node N is not defined".
  const bool nodes_loaded = !diagnostics.has_errors();
  const std::span<const transport::NodeAddress> known =
      nodes_loaded ? std::span<const transport::NodeAddress>(addresses) : std::span<const transport::NodeAddress>();
  transport::LinkTable explicit_links = transport::load_link_table(file, registry, known, diagnostics);
  for (const transport::LinkConfig& link : explicit_links.all())
    for (NodeId id : {link.node1, link.node2})
      if (const NodeDef* n = out.node(id); n && n->kind == NodeKind::kMgm)
        diagnostics.error(link.origin + ": " + link.describe() + " joins management node " + std::to_string(id) +
                          ", which carries no data traffic");
  if (diagnostics.has_errors()) return std::nullopt;
  if (!registry.find("tcp")) {
    out.links = std::move(explicit_links);
  } else {
    config::File with_defaults = file;
    add_default_links(out.nodes, explicit_links, with_defaults);
    out.links = transport::load_link_table(with_defaults, registry, addresses, diagnostics);
  }
  if (diagnostics.has_errors()) return std::nullopt;
  out.canonical_text = detail::canonical_text(out, registry);
  out.warnings = diagnostics.warnings();
  return out;
}

Result<ClusterConfig> load_cluster_config(const config::File& file, const transport::TransporterRegistry& registry) {
  config::Diagnostics diagnostics;
  std::optional<ClusterConfig> cluster = load_cluster_config(file, registry, diagnostics);
  if (!cluster) return diagnostics.status();
  return std::move(*cluster);
}

Result<ClusterConfig> load_cluster_config_text(std::string_view text, const std::string& path,
                                               const transport::TransporterRegistry& registry) {
  config::Diagnostics diagnostics;
  const config::File file = config::parse_text(text, path, diagnostics);
  std::optional<ClusterConfig> cluster = load_cluster_config(file, registry, diagnostics);
  if (!cluster) return diagnostics.status();
  return std::move(*cluster);
}

Result<ClusterConfig> load_cluster_config_file(const std::string& path,
                                               const transport::TransporterRegistry& registry) {
  config::Diagnostics diagnostics;
  const config::File file = config::read_file(path, diagnostics);
  // A file that could not be read has no sections: nothing more to report.
  if (diagnostics.has_errors() && file.sections.empty()) return diagnostics.status();
  std::optional<ClusterConfig> cluster = load_cluster_config(file, registry, diagnostics);
  if (!cluster) return diagnostics.status();
  return std::move(*cluster);
}

}  // namespace fjord::engine
