#include <algorithm>
#include <cstdlib>
#include <string>

#include "cluster_config_internal.h"

namespace fjord::engine::detail {

namespace {

using Group = std::vector<const NodeDef*>;

// "cluster.ini:2: [ndbd default] NoOfReplicas": where the node's value of
// `key` was written, or the node's own section when the value is the
// default.
std::string where(const config::File& file, const NodeDef& n, std::string_view key) {
  const std::string& origin = n.params.origin(key);
  const std::size_t colon = origin.rfind(':');
  if (colon == std::string::npos) return n.origin + ": [" + n.section + "] " + std::string(key);
  const int line = std::atoi(origin.c_str() + colon + 1);
  std::string section = n.section;
  for (const config::Section& s : file.sections)
    for (const config::Entry& e : s.entries)
      if (e.line == line && line != 0) section = s.name;
  return origin + ": [" + section + "] " + std::string(key);
}

std::string id_list(const Group& nodes) {
  std::string out;
  for (const NodeDef* n : nodes) out += (out.empty() ? "" : ", ") + std::to_string(n->id);
  return out;
}

uint32_t replicas_of_node(const NodeDef& n) { return static_cast<uint32_t>(n.params.get_uint("NoOfReplicas")); }

// Parameters that are one value for the whole cluster (NDB: NoOfReplicas;
// PartitionsPerTable because every node's DICT gives a new table the same
// partition count): the first data node's value is the reference, and every
// node that differs is named.
void check_cluster_wide(const config::File& file, const Group& data, std::string_view key,
                        config::Diagnostics& diagnostics) {
  const NodeDef& first = *data.front();
  const uint64_t value = first.params.get_uint(key);
  for (const NodeDef* n : data)
    if (n->params.get_uint(key) != value)
      diagnostics.error(where(file, *n, key) + "=" + std::to_string(n->params.get_uint(key)) + ": data node " +
                        std::to_string(n->id) + " differs from " + std::string(key) + "=" + std::to_string(value) +
                        " of data node " + std::to_string(first.id) + " (" + where(file, first, key) +
                        "); every data node has the same " + std::string(key) + ": set it once in [ndbd default]");
}

// Data nodes with NodeGroup first, in their groups; then the others in id
// order, each into the lowest-numbered group with room (new groups after the
// last), as NDB does: without any NodeGroup, consecutive nodes by id.
std::vector<Group> place_in_groups(const config::File& file, const Group& by_id, uint32_t r,
                                   config::Diagnostics& diagnostics) {
  std::vector<Group> groups;
  for (const NodeDef* n : by_id) {
    if (!n->params.has("NodeGroup")) continue;
    const auto g = static_cast<std::size_t>(n->params.get_uint("NodeGroup"));
    if (groups.size() <= g) groups.resize(g + 1);
    groups[g].push_back(n);
    if (groups[g].size() > r)
      diagnostics.error(where(file, *n, "NodeGroup") + "=" + std::to_string(g) + ": node group " + std::to_string(g) +
                        " would hold data nodes " + id_list(groups[g]) + ", more than NoOfReplicas=" +
                        std::to_string(r) + " (" + where(file, *by_id.front(), "NoOfReplicas") + ")");
  }
  for (const NodeDef* n : by_id) {
    if (n->params.has("NodeGroup")) continue;
    auto room = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.size() < r; });
    if (room == groups.end()) room = groups.insert(groups.end(), Group{});
    room->push_back(n);
  }
  for (Group& g : groups)
    std::sort(g.begin(), g.end(), [](const NodeDef* a, const NodeDef* b) { return a->id < b->id; });
  return groups;
}

// The first node of `group` placed there by its NodeGroup, if any.
const NodeDef* placed_explicitly(const Group& group) {
  for (const NodeDef* n : group)
    if (n->params.has("NodeGroup")) return n;
  return nullptr;
}

// Node groups are numbered 0.. without gaps, each with NoOfReplicas nodes.
void check_groups(const config::File& file, const std::vector<Group>& groups, const NodeDef& first, uint32_t r,
                  config::Diagnostics& diagnostics) {
  const std::string replicas_at = "NoOfReplicas=" + std::to_string(r) + " (" + where(file, first, "NoOfReplicas") + ")";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) {
      const auto next = std::find_if(groups.begin() + static_cast<std::ptrdiff_t>(g), groups.end(),
                                     [](const Group& x) { return !x.empty(); });
      const NodeDef* n = placed_explicitly(*next);
      FJORD_ASSERT_MSG(n != nullptr, "only NodeGroup places a node past an empty group");
      diagnostics.error(where(file, *n, "NodeGroup") + "=" + n->params.get_string("NodeGroup") +
                        ": node groups are numbered from 0 without gaps, and node group " + std::to_string(g) +
                        " has no data node");
      continue;
    }
    if (groups[g].size() >= r) continue;
    const NodeDef* n = placed_explicitly(groups[g]);
    std::string message =
        n ? where(file, *n, "NodeGroup") + "=" + std::to_string(g) : where(file, first, "NoOfReplicas");
    message += ": node group " + std::to_string(g) + " holds only data node";
    message += groups[g].size() > 1 ? "s " : " ";
    message += id_list(groups[g]);
    message += "; " + replicas_at + " needs " + std::to_string(r) + " in each node group";
    diagnostics.error(std::move(message));
  }
}

void warn_unbalanced(const config::File& file, const NodeDef& first, const ClusterLayout& layout,
                     config::Diagnostics& diagnostics) {
  const uint64_t partitions = first.params.get_uint("PartitionsPerTable");
  const uint64_t spread = uint64_t{layout.group_count()} * layout.replicas;
  if (partitions % spread == 0) return;
  diagnostics.warn(where(file, first, "PartitionsPerTable") + "=" + std::to_string(partitions) +
                   " is not a multiple of " + std::to_string(layout.group_count()) + " node groups x " +
                   std::to_string(layout.replicas) + " replicas = " + std::to_string(spread) +
                   ": the primaries of a table are not balanced over the nodes of its node groups");
}

}  // namespace

std::optional<ClusterLayout> build_layout(const config::File& file, const std::vector<NodeDef>& nodes,
                                          config::Diagnostics& diagnostics) {
  Group data;
  for (const NodeDef& n : nodes)
    if (n.kind == NodeKind::kData) data.push_back(&n);
  if (data.empty()) return std::nullopt;  // check_node_ids names the missing [ndbd]
  const std::size_t errors_before = diagnostics.error_count();
  const NodeDef& first = *data.front();  // file order
  const uint32_t r = replicas_of_node(first);
  check_cluster_wide(file, data, "NoOfReplicas", diagnostics);
  check_cluster_wide(file, data, "PartitionsPerTable", diagnostics);
  Group by_id = data;
  std::sort(by_id.begin(), by_id.end(), [](const NodeDef* a, const NodeDef* b) { return a->id < b->id; });
  const std::string count =
      std::to_string(data.size()) + " data node" + (data.size() > 1 ? "s" : "") + " (" + id_list(by_id) + ")";
  if (r > data.size())
    diagnostics.error(where(file, first, "NoOfReplicas") + "=" + std::to_string(r) + " is more than the " + count +
                      " of " + file.path + ": a node group holds NoOfReplicas data nodes");
  else if (data.size() % r != 0)
    diagnostics.error(where(file, first, "NoOfReplicas") + "=" + std::to_string(r) + " does not divide the " + count +
                      " of " + file.path + ": every node group holds NoOfReplicas data nodes");
  if (diagnostics.error_count() != errors_before) return std::nullopt;
  const std::vector<Group> groups = place_in_groups(file, by_id, r, diagnostics);
  check_groups(file, groups, first, r, diagnostics);
  if (diagnostics.error_count() != errors_before) return std::nullopt;
  ClusterLayout layout;
  layout.replicas = r;
  for (const Group& g : groups) {
    std::vector<NodeId> ids;
    for (const NodeDef* n : g) ids.push_back(n->id);
    layout.node_groups.push_back(std::move(ids));
  }
  FJORD_ASSERT(layout.group_count() * r == data.size());
  warn_unbalanced(file, first, layout, diagnostics);
  return layout;
}

}  // namespace fjord::engine::detail
