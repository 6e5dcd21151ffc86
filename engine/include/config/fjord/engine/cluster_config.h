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
// Node sections: [ndbd] (data nodes), [api] or [mysqld] (API nodes), [mgm]
// (accepted for NDB compatibility, otherwise unused). Link sections are
// named after a registered transporter (transport/link_config.h). A data
// node and another node with no link section between them get a TCP link
// with default parameters, as in NDB. Every error names the file, line, key
// and the accepted range. Parameters and defaults: docs/configuration.md.
//
// Slow path (start-up); any thread.
#pragma once

#include <string>
#include <vector>

#include "fjord/base/status.h"
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
  std::string origin;        // "cluster.ini:12"
};

// Data node parameters, NDB's names where the concept is the same.
extern const config::ParamSpec kDataNodeParams[];
extern const std::size_t kDataNodeParamCount;
extern const config::ParamSpec kApiNodeParams[];
extern const std::size_t kApiNodeParamCount;
inline constexpr uint16_t kDefaultServerPortBase = 11860;

struct ClusterConfig {
  std::string path;
  std::vector<NodeDef> nodes;
  transport::LinkTable links;

  const NodeDef* node(NodeId id) const;
  std::vector<const NodeDef*> of_kind(NodeKind kind) const;
};

Result<ClusterConfig> load_cluster_config(const config::File& file, const transport::TransporterRegistry& registry);
Result<ClusterConfig> load_cluster_config_file(const std::string& path, const transport::TransporterRegistry& registry);

}  // namespace fjord::engine
