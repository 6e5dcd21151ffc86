// Warnings `fjord-config --check` gives about a valid config: links whose
// traffic leaves the host without authentication, and links that cannot
// come up because only one end has a ClusterKeyFile. Slow path; pure.
#pragma once

#include <string>
#include <vector>

#include "fjord/engine/cluster_config.h"

namespace fjord::tools {

// One line per problem, "FILE:LINE: warning: ..." (the link's section, or
// the nodes' sections for a default link).
std::vector<std::string> link_warnings(const engine::ClusterConfig& cluster);

}  // namespace fjord::tools
