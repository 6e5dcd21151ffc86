// Registers every transporter compiled into this build (tcp, shm, sim, and
// rdma and dpdk when built) in a registry. Programs and tests call this once at
// start-up; the engine itself never names a concrete transporter.
#pragma once

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::tools {

Status register_builtin_transporters(transport::TransporterRegistry& registry);
// The global registry, filled on first use.
transport::TransporterRegistry& builtin_registry();

}  // namespace fjord::tools
