// Link configuration: which transporter joins two nodes, and how.
//
// A link is one section of the config file named after a registered
// transporter ([tcp], [shm], [rdma], [sim], ...), between NodeId1 and NodeId2.
// Parameters common to every transporter are listed in kCommonLinkParams;
// each transporter adds its own (TransporterFactory::parameters()). Changing
// a section's name from [tcp] to [shm] is all it takes to swap the medium.
//
// Slow path. Any thread; values are immutable after loading.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/types.h"

namespace fjord::transport {

class TransporterRegistry;

// Parameters every link section accepts (NDB's names where NDB has one).
extern const config::ParamSpec kCommonLinkParams[];
extern const std::size_t kCommonLinkParamCount;

struct LinkConfig {
  std::string type;  // registered transporter name, e.g. "tcp"
  NodeId node1 = kNoNode;
  NodeId node2 = kNoNode;
  NodeId server_node = kNoNode;  // the side that listens (NodeIdServer)
  std::string host1;             // HostName1 / HostName2
  std::string host2;
  uint16_t port = 0;               // PortNumber: where the server listens (0 = any free port, tests)
  uint64_t send_buffer_bytes = 0;  // SendBufferMemory
  bool checksum = false;           // Checksum: frames carry crc32c
  uint64_t slowdown_bytes = 0;     // send-memory fill at which senders should slow down
  uint64_t overload_bytes = 0;     // fill at which new work is refused (OverloadLimit)
  std::string origin;              // "cluster.ini:12", for messages
  config::ParamSet params;         // all values, including transporter-specific ones
  // Each end's ClusterKeyFile (its node section's; empty = none): the
  // handshake proves the key each end reads from its own (handshake.h).
  std::string key_file1;
  std::string key_file2;

  bool involves(NodeId node) const { return node == node1 || node == node2; }
  NodeId peer_of(NodeId self) const { return self == node1 ? node2 : node1; }
  NodeId client_node() const { return peer_of(server_node); }
  const std::string& host_of(NodeId node) const { return node == node1 ? host1 : host2; }
  const std::string& key_file_of(NodeId node) const { return node == node1 ? key_file1 : key_file2; }
  // "tcp link 1-2 (cluster.ini:12)"
  std::string describe() const;
};

// The port of a link section without PortNumber whose server node has no
// ServerPort: both ends read the same file, so both take the same port (the
// listener binds it, the client dials it). latency_bench's --port default.
inline constexpr uint16_t kDefaultLinkPort = 11860;

// Where a node lives, for links that do not name hosts or ports themselves.
struct NodeAddress {
  NodeId node = kNoNode;
  std::string host;
  uint16_t server_port = 0;
  bool is_data_node = false;  // data nodes are the server side of data-API links
  std::string key_file;       // ClusterKeyFile; empty = the node's links are not authenticated
};

class LinkTable {
 public:
  LinkTable() = default;
  explicit LinkTable(std::vector<LinkConfig> links, std::vector<std::string> warnings = {})
      : links_(std::move(links)), warnings_(std::move(warnings)) {}

  const std::vector<LinkConfig>& all() const { return links_; }
  // The link between a and b (either order), or nullptr.
  const LinkConfig* find(NodeId a, NodeId b) const;
  std::vector<const LinkConfig*> links_of(NodeId node) const;
  // NDB parameters of the link sections that have no effect here, one line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<LinkConfig> links_;
  std::vector<std::string> warnings_;
};

// Builds the link table from every section of `file` whose name is a
// registered transporter (other sections are left to the caller). Checks:
// node ids in 1..255 and different, NodeIdServer one of the two, at most one
// link per node pair, slowdown <= overload <= SendBufferMemory, and each
// transporter's own parameters. `nodes` (may be empty) fills in HostName,
// PortNumber and NodeIdServer when a section does not give them. A section
// without PortNumber takes its server node's ServerPort, else
// kDefaultLinkPort: never 0, so the listening and the connecting end agree
// (only an explicit PortNumber=0 asks for any free port). Every
// error of the file is in the status; NDB parameters that have no effect
// here are in the table's warnings().
Result<LinkTable> load_link_table(const config::File& file, const TransporterRegistry& registry,
                                  std::span<const NodeAddress> nodes = {});
// The same, recording errors and warnings in `diagnostics` (which may
// already hold others of the same file) and returning the links that loaded.
// The table's warnings() are all of `diagnostics`' warnings.
LinkTable load_link_table(const config::File& file, const TransporterRegistry& registry,
                          std::span<const NodeAddress> nodes, config::Diagnostics& diagnostics);

// NDB's parameter names for a link section of this transporter ([tcp] and
// [shm] have their own; other transporters take the names both share).
std::span<const std::string_view> ndb_link_parameter_names(std::string_view type);

// True if `section_name` is "<name>" or "<name> default" for a registered
// transporter name.
bool is_link_section(std::string_view section_name, const TransporterRegistry& registry);

}  // namespace fjord::transport
