// The [dpdk] link section: its parameters, their checks, and the settings
// of one end of a link resolved from them (internal header).
//
// Each end has its own device (DPDK devargs: "net_memif0,role=server,...",
// "net_ring0", "0000:03:00.0"), MAC, IPv4 address and UDP port, suffixed 1
// and 2 like HostName1/HostName2. Several links share a device; the UDP
// ports tell them apart. Slow path; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "dpdk_wire.h"
#include "fjord/base/status.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"

namespace fjord::dpdk {

std::span<const config::ParamSpec> dpdk_params();

// The seeded fault injector's plan (test builds only; all zero otherwise).
struct FaultPlan {
  uint32_t loss_percent = 0;
  uint32_t duplicate_percent = 0;
  uint32_t reorder_percent = 0;
  uint64_t seed = 0;
  bool active() const { return loss_percent + duplicate_percent + reorder_percent != 0; }
};

struct EndSettings {
  std::string device;  // DPDK devargs of this end's port
  wire::MacAddress mac{};
  bool mac_given = false;  // false: the port's own (local end) or learned from its packets (peer end)
  uint32_t ip = 0;
  uint16_t udp_port = 0;
};

struct LinkSettings {
  EndSettings local;
  EndSettings peer;
  uint32_t mtu = 1500;
  std::size_t send_ring_bytes = 0;     // SendBufferMemory, whole pages
  std::size_t receive_ring_bytes = 0;  // ReceiveBufferMemory, whole pages
  uint64_t link_timeout_ns = 0;
  std::string eal_args;  // empty: the defaults (dpdk_engine.h)
  FaultPlan faults;
};

// Both ends of `link` resolved as `self` sees them; an error names the key,
// its value and where it came from.
Result<LinkSettings> resolve_settings(const transport::LinkConfig& link, NodeId self);
// The factory's validate(): the values given are well-formed, and two ends
// that resolve differ. A missing device or address is set-up's error.
Status validate_link(const transport::LinkConfig& link);

}  // namespace fjord::dpdk
