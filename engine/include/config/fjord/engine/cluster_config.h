// The cluster configuration file: nodes and links, in NDB's config.ini style.
//
//   [ndbd default]
//   DataMemory=512M
//   [ndbd]
//   NodeId=1
//   HostName=10.0.0.1
//   [api]
//   NodeId=50
//   [shm]                 # optional: the 1-50 link uses shared memory
//   NodeId1=1
//   NodeId2=50
//
// Node sections: [ndbd] (data nodes), [api] or [mysqld] (API nodes),
// [ndb_mgmd] or [mgm] (management nodes: accepted for NDB compatibility,
// otherwise unused); each name also as "<name> default", and the defaults of
// one name apply to its alias ([mysqld default] to [api] too), as in NDB.
// An [api], [mysqld], [ndb_mgmd] or [mgm] section without NodeId gets the
// next free id, as in NDB; a data node's NodeId is required. [system] and
// [computer] are accepted with a warning. Link sections are named after a
// registered transporter (transport/link_config.h). A data node and another
// node with no link section between them (another data node or an API node)
// get a TCP link with default parameters, as in NDB; two API nodes have no
// link.
//
// Several [ndbd] sections form node groups as NDB forms them: NoOfReplicas
// (1..4, one value for every data node) nodes per group, a node's group
// given by its NodeGroup or, without it, consecutive nodes in id order
// (ClusterConfig::layout, cluster_layout.h). Every error of the file is reported, each naming
// the file, line, key and the accepted range; NDB parameters Fjord does not
// implement are accepted with one warning each (ClusterConfig::warnings).
// Parameters and defaults: docs/configuration.md.
//
// Slow path (start-up); any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/engine/cluster_layout.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/registry.h"

namespace fjord::engine {

enum class NodeKind : uint8_t { kData, kApi, kMgm };
const char* node_kind_name(NodeKind kind) noexcept;

struct NodeDef {
  NodeId id = kNoNode;
  NodeKind kind = NodeKind::kApi;
  std::string host;          // HostName (default localhost)
  uint16_t server_port = 0;  // data nodes: ServerPort (default 11860 + NodeId)
  config::ParamSet params;   // every value of the section, defaults applied
  std::string section;       // as written: "ndbd", "api", "mysqld", "ndb_mgmd", "mgm"
  std::string origin;        // "cluster.ini:12"
};

// Data node parameters, NDB's names where the concept is the same.
extern const config::ParamSpec kDataNodeParams[];
extern const std::size_t kDataNodeParamCount;
extern const config::ParamSpec kApiNodeParams[];
extern const std::size_t kApiNodeParamCount;
extern const config::ParamSpec kMgmNodeParams[];
extern const std::size_t kMgmNodeParamCount;
// NDB's parameter names of [ndbd], [api]/[mysqld] and [ndb_mgmd]/[mgm]:
// those not in the tables above are accepted with a warning.
extern const std::string_view kNdbDataNodeNames[];
extern const std::size_t kNdbDataNodeNameCount;
extern const std::string_view kNdbApiNodeNames[];
extern const std::size_t kNdbApiNodeNameCount;
extern const std::string_view kNdbMgmNodeNames[];
extern const std::size_t kNdbMgmNodeNameCount;
inline constexpr uint16_t kDefaultServerPortBase = 11860;

struct ClusterConfig {
  std::string path;
  std::vector<NodeDef> nodes;
  transport::LinkTable links;
  // NDB parameters and sections that have no effect here, one line each:
  // for the caller to print or log once.
  std::vector<std::string> warnings;
  // The node groups and the partition rule (cluster_layout.h).
  ClusterLayout layout;
  // Every node (by id) and link (by node pair) with every parameter Fjord
  // implements, defaults applied, one "Name=value" line each: the same text
  // whatever the order of sections, the spacing, the comments, the case of
  // keys or the spelling of a value (4M or 4096K). See cluster_checksum().
  std::string canonical_text;

  const NodeDef* node(NodeId id) const;
  std::vector<const NodeDef*> of_kind(NodeKind kind) const;
};

// SHA-256 of cluster.canonical_text as 64 lower-case hex digits: two nodes
// that load configs of one checksum have the same cluster configuration.
std::string cluster_checksum(const ClusterConfig& cluster);

// Every error of the file in the status (one per line).
Result<ClusterConfig> load_cluster_config(const config::File& file, const transport::TransporterRegistry& registry);
// The same with the parser's errors too: a syntax error and a bad value of
// one file are reported together.
Result<ClusterConfig> load_cluster_config_text(std::string_view text, const std::string& path,
                                               const transport::TransporterRegistry& registry);
Result<ClusterConfig> load_cluster_config_file(const std::string& path, const transport::TransporterRegistry& registry);
// Records errors and warnings in `diagnostics` (which may hold the parser's
// already); nullopt if there is any error.
std::optional<ClusterConfig> load_cluster_config(const config::File& file,
                                                 const transport::TransporterRegistry& registry,
                                                 config::Diagnostics& diagnostics);

}  // namespace fjord::engine
