#include "link_warnings.h"

#include <algorithm>
#include <cctype>

namespace fjord::tools {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool loopback(const std::string& host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "ip6-localhost" || h == "::1" || h.rfind("127.", 0) == 0;
}

// Where node `id` of `link` runs as the config says: the link's own
// HostName1/2, else the node's HostName; "" = any host (an [api] without
// HostName).
std::string configured_host(const engine::ClusterConfig& cluster, const transport::LinkConfig& link, NodeId id) {
  const std::string& given = link.params.get_string(id == link.node1 ? "HostName1" : "HostName2");
  if (!given.empty()) return given;
  const engine::NodeDef* node = cluster.node(id);
  return node ? node->host : std::string();
}

// The link's traffic can come from another host: its server listens on a
// non-loopback address and its client may run elsewhere. Shared memory and
// in-process links never leave the host.
bool leaves_host(const engine::ClusterConfig& cluster, const transport::LinkConfig& link) {
  if (link.type == "shm" || link.type == "sim") return false;
  const std::string server = configured_host(cluster, link, link.server_node);
  const std::string client = configured_host(cluster, link, link.client_node());
  if (loopback(link.host_of(link.server_node)) || loopback(client)) return false;
  return client.empty() || lower(client) != lower(server);
}

std::string where(const engine::ClusterConfig& cluster, const transport::LinkConfig& link) {
  if (link.origin.rfind("default ", 0) != 0) return link.origin;
  const engine::NodeDef* a = cluster.node(link.node1);
  const engine::NodeDef* b = cluster.node(link.node2);
  return (a ? a->origin : cluster.path) + " and " + (b ? b->origin : cluster.path);
}

std::string host_text(const std::string& host) { return host.empty() ? "any host" : host; }

}  // namespace

std::vector<std::string> link_warnings(const engine::ClusterConfig& cluster) {
  std::vector<std::string> out;
  for (const transport::LinkConfig& link : cluster.links.all()) {
    const bool key1 = !link.key_file1.empty();
    const bool key2 = !link.key_file2.empty();
    const std::string prefix = where(cluster, link) + ": warning: " + link.describe();
    if (key1 != key2) {
      out.push_back(prefix + ": node " + std::to_string(key1 ? link.node1 : link.node2) +
                    " has a ClusterKeyFile but node " + std::to_string(key1 ? link.node2 : link.node1) +
                    " has none, so the link is refused at set-up (give both nodes the same key file)");
      continue;
    }
    if (key1 || !leaves_host(cluster, link)) continue;
    out.push_back(prefix + " leaves the host (node " + std::to_string(link.server_node) + " on " +
                  host_text(configured_host(cluster, link, link.server_node)) + ", node " +
                  std::to_string(link.client_node()) + " on " +
                  host_text(configured_host(cluster, link, link.client_node())) +
                  ") without authentication: any process that reaches it can claim to be node " +
                  std::to_string(link.client_node()) + " (set ClusterKeyFile for both nodes)");
  }
  return out;
}

}  // namespace fjord::tools
