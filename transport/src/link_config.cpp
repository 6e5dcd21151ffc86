#include "fjord/transport/link_config.h"

#include <algorithm>
#include <optional>

#include "fjord/transport/registry.h"

namespace fjord::transport {

using config::Kind;
using config::ParamSpec;

const ParamSpec kCommonLinkParams[] = {
    {"NodeId1", Kind::kUint, 1, kMaxNodeId, "", true, "one end of the link"},
    {"NodeId2", Kind::kUint, 1, kMaxNodeId, "", true, "the other end of the link"},
    {"NodeIdServer", Kind::kUint, 0, kMaxNodeId, "0", false,
     "the end that listens; 0 = the data node, else the lower node id"},
    {"HostName1", Kind::kString, 0, 255, "", false, "host of NodeId1 (default: the node's HostName, else localhost)"},
    {"HostName2", Kind::kString, 0, 255, "", false, "host of NodeId2"},
    {"PortNumber", Kind::kUint, 0, 65535, "", false,
     "port the server end listens on and the client dials (default: the server node's ServerPort, else 11860); "
     "0 = any free port, which a client in another process cannot know"},
    {"SendBufferMemory", Kind::kBytes, 64 << 10, 1ULL << 30, "2M", false, "send memory of this link, per direction"},
    {"Checksum", Kind::kBool, 0, 1, "false", false, "frames carry a crc32c checked on receipt"},
    {"OverloadLimit", Kind::kBytes, 0, 1ULL << 30, "0", false,
     "send-memory fill at which new work is refused; 0 = 80% of SendBufferMemory"},
    {"SlowdownLimit", Kind::kBytes, 0, 1ULL << 30, "0", false,
     "send-memory fill at which producers slow down; 0 = 60% of SendBufferMemory"},
};
const std::size_t kCommonLinkParamCount = std::size(kCommonLinkParams);
static_assert(kDefaultLinkPort != 0, "a link without PortNumber must name a port both ends can meet on");

namespace {

// NDB's parameter names of [tcp] and [shm] sections, and those both share
// (the names of the other transporters' sections).
// clang-format off
constexpr std::string_view kNdbLinkNames[] = {
    "Checksum", "Group", "HostName1", "HostName2", "NodeId1", "NodeId2", "NodeIdServer", "OverloadLimit",
    "PortNumber", "PreferIPVersion", "PreSendChecksum", "SendBufferMemory", "SendSignalId", "SlowdownLimit"};
constexpr std::string_view kNdbTcpNames[] = {
    "Checksum", "Group", "HostName1", "HostName2", "NodeId1", "NodeId2", "NodeIdServer", "OverloadLimit",
    "PortNumber", "PreferIPVersion", "PreSendChecksum", "SendBufferMemory", "SendSignalId", "SlowdownLimit",
    "AllowUnresolvedHostNames", "Proxy", "ReceiveBufferMemory", "TcpSpinTime", "TCP_MAXSEG_SIZE", "TCP_RCV_BUF_SIZE",
    "TCP_SND_BUF_SIZE", "TcpBind_INADDR_ANY"};
constexpr std::string_view kNdbShmNames[] = {
    "Checksum", "Group", "HostName1", "HostName2", "NodeId1", "NodeId2", "NodeIdServer", "OverloadLimit",
    "PortNumber", "PreferIPVersion", "PreSendChecksum", "SendBufferMemory", "SendSignalId", "SlowdownLimit", "ShmKey",
    "ShmSize", "ShmSpinTime", "SigNum"};
// clang-format on

}  // namespace

std::span<const std::string_view> ndb_link_parameter_names(std::string_view type) {
  if (type == "tcp") return kNdbTcpNames;
  if (type == "shm") return kNdbShmNames;
  return kNdbLinkNames;
}

std::string LinkConfig::describe() const {
  return type + " link " + std::to_string(node1) + "-" + std::to_string(node2) +
         (origin.empty() ? "" : " (" + origin + ")");
}

const LinkConfig* LinkTable::find(NodeId a, NodeId b) const {
  for (const LinkConfig& link : links_)
    if ((link.node1 == a && link.node2 == b) || (link.node1 == b && link.node2 == a)) return &link;
  return nullptr;
}

std::vector<const LinkConfig*> LinkTable::links_of(NodeId node) const {
  std::vector<const LinkConfig*> out;
  for (const LinkConfig& link : links_)
    if (link.involves(node)) out.push_back(&link);
  return out;
}

bool is_link_section(std::string_view section_name, const TransporterRegistry& registry) {
  std::string_view name = section_name;
  constexpr std::string_view kDefault = " default";
  if (name.size() > kDefault.size() && name.substr(name.size() - kDefault.size()) == kDefault)
    name.remove_suffix(kDefault.size());
  return registry.find(name) != nullptr;
}

namespace {

const NodeAddress* find_node(std::span<const NodeAddress> nodes, NodeId id) {
  for (const NodeAddress& n : nodes)
    if (n.node == id) return &n;
  return nullptr;
}

Status invalid(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

// Fills host, port and server defaults, then checks the cross-key rules.
Status finish_link(LinkConfig& link, std::span<const NodeAddress> nodes, const std::string& where) {
  const config::ParamSet& p = link.params;
  if (link.node1 == link.node2) return invalid(where + ": NodeId1 and NodeId2 are both " + std::to_string(link.node1));
  const NodeAddress* n1 = find_node(nodes, link.node1);
  const NodeAddress* n2 = find_node(nodes, link.node2);
  if (!nodes.empty() && (!n1 || !n2))
    return invalid(where + ": node " + std::to_string(!n1 ? link.node1 : link.node2) +
                   " is not defined by any [ndbd], [api] or [mgm] section");

  const auto server = static_cast<NodeId>(p.get_uint("NodeIdServer"));
  if (server != 0 && server != link.node1 && server != link.node2)
    return invalid(where + ": NodeIdServer=" + std::to_string(server) + " is neither NodeId1 (" +
                   std::to_string(link.node1) + ") nor NodeId2 (" + std::to_string(link.node2) + ")");
  if (server != 0)
    link.server_node = server;
  else if (n1 && n2 && n1->is_data_node != n2->is_data_node)
    link.server_node = n1->is_data_node ? link.node1 : link.node2;
  else
    link.server_node = std::min(link.node1, link.node2);

  auto host_for = [&](const char* key, const NodeAddress* n) {
    const std::string& given = p.get_string(key);
    if (!given.empty()) return given;
    return n && !n->host.empty() ? n->host : std::string("localhost");
  };
  link.key_file1 = n1 ? n1->key_file : std::string();
  link.key_file2 = n2 ? n2->key_file : std::string();
  link.host1 = host_for("HostName1", n1);
  link.host2 = host_for("HostName2", n2);
  if (p.has("PortNumber")) {
    link.port = static_cast<uint16_t>(p.get_uint("PortNumber"));
  } else {
    const NodeAddress* s = find_node(nodes, link.server_node);
    link.port = s && s->server_port != 0 ? s->server_port : kDefaultLinkPort;
  }

  link.send_buffer_bytes = p.get_uint("SendBufferMemory");
  link.checksum = p.get_bool("Checksum");
  const uint64_t overload = p.get_uint("OverloadLimit");
  const uint64_t slowdown = p.get_uint("SlowdownLimit");
  link.overload_bytes = overload != 0 ? overload : link.send_buffer_bytes / 10 * 8;
  link.slowdown_bytes = slowdown != 0 ? slowdown : link.send_buffer_bytes / 10 * 6;
  if (link.overload_bytes > link.send_buffer_bytes)
    return invalid(where + ": OverloadLimit=" + config::format_bytes(link.overload_bytes) +
                   " exceeds SendBufferMemory=" + config::format_bytes(link.send_buffer_bytes));
  if (link.slowdown_bytes > link.overload_bytes)
    return invalid(where + ": SlowdownLimit=" + config::format_bytes(link.slowdown_bytes) +
                   " exceeds the overload limit " + config::format_bytes(link.overload_bytes));
  return Status::ok();
}

}  // namespace

namespace {

config::Schema link_schema(const TransporterFactory& factory, std::vector<ParamSpec>& specs) {
  specs.assign(kCommonLinkParams, kCommonLinkParams + kCommonLinkParamCount);
  for (const ParamSpec& extra : factory.parameters()) specs.push_back(extra);
  return config::Schema{specs, ndb_link_parameter_names(factory.name()), {}};
}

// The link of one section, or an error recorded in `diagnostics`.
std::optional<LinkConfig> load_link(const config::File& file, const config::Section& section,
                                    const TransporterFactory& factory, std::span<const NodeAddress> nodes,
                                    config::Diagnostics& diagnostics) {
  std::vector<ParamSpec> specs;
  const std::size_t errors_before = diagnostics.error_count();
  config::ParamSet params = config::apply_schema(file, section, link_schema(factory, specs), diagnostics);
  if (diagnostics.error_count() != errors_before || !params.has("NodeId1") || !params.has("NodeId2"))
    return std::nullopt;
  const std::string where =
      (section.line > 0 ? file.path + ":" + std::to_string(section.line) : "default link") + ": [" + section.name + "]";
  LinkConfig link;
  link.type = std::string(factory.name());
  link.node1 = static_cast<NodeId>(params.get_uint("NodeId1"));
  link.node2 = static_cast<NodeId>(params.get_uint("NodeId2"));
  // Sections the engine adds itself (NDB's default TCP links) have no line.
  link.origin = section.line > 0 ? file.path + ":" + std::to_string(section.line) : "default " + link.type + " link";
  link.params = std::move(params);
  if (Status s = finish_link(link, nodes, where); !s) {
    diagnostics.error(s.message(), s.code());
    return std::nullopt;
  }
  if (Status s = factory.validate(link); !s) {
    diagnostics.error(where + ": " + s.message(), s.code());
    return std::nullopt;
  }
  return link;
}

}  // namespace

LinkTable load_link_table(const config::File& file, const TransporterRegistry& registry,
                          std::span<const NodeAddress> nodes, config::Diagnostics& diagnostics) {
  std::vector<LinkConfig> links;
  for (const config::Section& section : file.sections) {
    if (config::is_default_section(section.name)) {
      const std::string_view base = std::string_view(section.name).substr(0, section.name.size() - 8);
      std::vector<ParamSpec> specs;
      if (const TransporterFactory* factory = registry.find(base))
        config::check_default_section(file, section, link_schema(*factory, specs), diagnostics);
      continue;
    }
    const TransporterFactory* factory = registry.find(section.name);
    if (!factory) continue;  // not a link section
    std::optional<LinkConfig> link = load_link(file, section, *factory, nodes, diagnostics);
    if (!link) continue;
    const auto same_pair = [&](const LinkConfig& other) {
      return (other.node1 == link->node1 && other.node2 == link->node2) ||
             (other.node1 == link->node2 && other.node2 == link->node1);
    };
    if (auto other = std::find_if(links.begin(), links.end(), same_pair); other != links.end()) {
      diagnostics.error(link->origin + ": [" + section.name + "]: nodes " + std::to_string(link->node1) + " and " +
                            std::to_string(link->node2) + " already have a " + other->type + " link at " +
                            other->origin,
                        StatusCode::kAlreadyExists);
      continue;
    }
    links.push_back(std::move(*link));
  }
  return LinkTable(std::move(links), diagnostics.warnings());
}

Result<LinkTable> load_link_table(const config::File& file, const TransporterRegistry& registry,
                                  std::span<const NodeAddress> nodes) {
  config::Diagnostics diagnostics;
  LinkTable table = load_link_table(file, registry, nodes, diagnostics);
  if (diagnostics.has_errors()) return diagnostics.status();
  return table;
}

}  // namespace fjord::transport
