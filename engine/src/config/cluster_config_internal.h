// Internal to fjord_engine_config: the node groups of a cluster config (NDB's
// rules for NoOfReplicas and NodeGroup, node_groups.cpp) and its canonical
// text (cluster_checksum.cpp). Start-up only; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fjord/engine/cluster_config.h"
#include "fjord/engine/cluster_layout.h"

namespace fjord::engine::detail {

// The layout of the data nodes of `nodes` (loaded from `file`, ids
// assigned). Errors name the file, line and key (NoOfReplicas or NodeGroup)
// and go to `diagnostics`; nullopt if there is any. A PartitionsPerTable
// that leaves primaries unbalanced is a warning.
std::optional<ClusterLayout> build_layout(const config::File& file, const std::vector<NodeDef>& nodes,
                                          config::Diagnostics& diagnostics);

// ClusterConfig::canonical_text of a config whose nodes and links are
// loaded; `registry` names each transporter's own parameters.
std::string canonical_text(const ClusterConfig& cluster, const transport::TransporterRegistry& registry);

}  // namespace fjord::engine::detail
