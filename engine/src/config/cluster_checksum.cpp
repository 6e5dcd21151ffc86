// The canonical text of a loaded cluster config and its SHA-256
// (cluster_config.h: ClusterConfig::canonical_text, cluster_checksum()).
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "cluster_config_internal.h"
#include "fjord/engine/cluster_config.h"

namespace fjord::engine::detail {

namespace {

std::string canonical_value(const config::ParamSet& params, const config::ParamSpec& spec) {
  switch (spec.kind) {
    case config::Kind::kUint:
    case config::Kind::kBytes: return std::to_string(params.get_uint(spec.name));
    case config::Kind::kBool: return params.get_bool(spec.name) ? "1" : "0";
    case config::Kind::kString: return params.get_string(spec.name);
  }
  return "?";
}

// One "Name=value" line per parameter of `specs` that has a value, in the
// specs' order, skipping `skip` (values written in another form).
void append_params(std::string& out, const config::ParamSet& params, std::span<const config::ParamSpec> specs,
                   std::span<const std::string_view> skip = {}) {
  for (const config::ParamSpec& spec : specs) {
    if (std::find(skip.begin(), skip.end(), spec.name) != skip.end()) continue;
    if (!params.has(spec.name)) continue;
    out += "  " + std::string(spec.name) + "=" + canonical_value(params, spec) + "\n";
  }
}

std::span<const config::ParamSpec> specs_of(NodeKind kind) {
  switch (kind) {
    case NodeKind::kData: return {kDataNodeParams, kDataNodeParamCount};
    case NodeKind::kApi: return {kApiNodeParams, kApiNodeParamCount};
    case NodeKind::kMgm: return {kMgmNodeParams, kMgmNodeParamCount};
  }
  FJORD_ASSERT_MSG(false, "unknown node kind");
  return {};
}

// Data node parameters written as what they resolve to: ServerPort=0 is
// 11860 + NodeId, and a node without NodeGroup is in the group the layout
// gives it.
constexpr std::string_view kDataNodeResolvedParams[] = {"ServerPort", "NodeGroup"};

// A link's ends, written by node id (the lower first) so that NodeId1 and
// NodeId2 written either way round give one text.
constexpr std::string_view kLinkEndParams[] = {"NodeId1",   "NodeId2",   "NodeIdServer",
                                               "HostName1", "HostName2", "PortNumber"};

void append_link(std::string& out, const transport::LinkConfig& link, const transport::TransporterRegistry& registry) {
  const NodeId low = std::min(link.node1, link.node2);
  const NodeId high = std::max(link.node1, link.node2);
  out += "[" + link.type + "] " + std::to_string(low) + "-" + std::to_string(high) + "\n";
  out += "  server=" + std::to_string(link.server_node) + "\n  port=" + std::to_string(link.port) + "\n";
  out += "  host " + std::to_string(low) + "=" + link.host_of(low) + "\n";
  out += "  host " + std::to_string(high) + "=" + link.host_of(high) + "\n";
  append_params(out, link.params, {transport::kCommonLinkParams, transport::kCommonLinkParamCount}, kLinkEndParams);
  if (const transport::TransporterFactory* factory = registry.find(link.type))
    append_params(out, link.params, factory->parameters());
}

}  // namespace

std::string canonical_text(const ClusterConfig& cluster, const transport::TransporterRegistry& registry) {
  std::vector<const NodeDef*> nodes;
  for (const NodeDef& n : cluster.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(), [](const NodeDef* a, const NodeDef* b) { return a->id < b->id; });
  std::string out;
  for (const NodeDef* n : nodes) {
    out += "[" + std::string(node_kind_name(n->kind)) + "] " + std::to_string(n->id) + "\n";
    if (n->kind != NodeKind::kData) {
      append_params(out, n->params, specs_of(n->kind));
      continue;
    }
    append_params(out, n->params, specs_of(n->kind), kDataNodeResolvedParams);
    out += "  ServerPort=" + std::to_string(n->server_port) +
           "\n  NodeGroup=" + std::to_string(cluster.layout.group_of_node(n->id)) + "\n";
  }
  std::vector<const transport::LinkConfig*> links;
  for (const transport::LinkConfig& l : cluster.links.all()) links.push_back(&l);
  const auto pair_of = [](const transport::LinkConfig* l) {
    return std::pair(std::min(l->node1, l->node2), std::max(l->node1, l->node2));
  };
  std::sort(links.begin(), links.end(), [&](auto* a, auto* b) { return pair_of(a) < pair_of(b); });
  for (const transport::LinkConfig* l : links) append_link(out, *l, registry);
  return out;
}

}  // namespace fjord::engine::detail

namespace fjord::engine {

std::string cluster_checksum(const ClusterConfig& cluster) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  const int done = EVP_Digest(cluster.canonical_text.data(), cluster.canonical_text.size(), digest.data(), &length,
                              EVP_sha256(), nullptr);
  FJORD_ASSERT_MSG(done == 1, "SHA-256 failed (libcrypto)");
  FJORD_ASSERT(length == 32);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    std::array<char, 3> two{};
    std::snprintf(two.data(), two.size(), "%02x", digest[i]);
    hex += two.data();
  }
  return hex;
}

}  // namespace fjord::engine
