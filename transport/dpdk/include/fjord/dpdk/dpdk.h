// The DPDK Ethernet transporter: links whose frames travel in UDP/IPv4
// packets through a DPDK port (a NIC bound to a DPDK driver, or a virtual
// device such as memif, net_ring or af_packet), made reliable and ordered
// by the transporter itself (docs/transport.md, "DPDK Ethernet").
//
// Programs call register_dpdk_transporter() once at start-up (single
// thread); everything else goes through the registry and the Transporter
// contract. Not on the hot path.
#pragma once

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::dpdk {

Status register_dpdk_transporter(transport::TransporterRegistry& registry);

}  // namespace fjord::dpdk
