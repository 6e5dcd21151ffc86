#include "dpdk_params.h"

#include "fjord/base/mirrored_map.h"
#include "fjord/transport/frame.h"

namespace fjord::dpdk {
namespace {

using config::Kind;
using config::ParamSpec;

const ParamSpec kParams[] = {
    {"Device1", Kind::kString, 0, 512, "", false,
     "DPDK device (devargs) of node 1's port: a vdev such as net_memif0,role=server,socket=/run/fjord.sock, or a "
     "PCI address bound to a DPDK driver"},
    {"Device2", Kind::kString, 0, 512, "", false, "the same for node 2"},
    {"Mac1", Kind::kString, 0, 17, "", false,
     "node 1's MAC (xx:xx:xx:xx:xx:xx); empty: its port's own, and its peer learns it from its packets"},
    {"Mac2", Kind::kString, 0, 17, "", false, "the same for node 2"},
    {"IpAddress1", Kind::kString, 0, 15, "", false, "node 1's IPv4 address on the link; empty: HostName1"},
    {"IpAddress2", Kind::kString, 0, 15, "", false, "the same for node 2"},
    {"UdpPort1", Kind::kUint, 0, 65535, "0", false, "node 1's UDP port; 0: PortNumber"},
    {"UdpPort2", Kind::kUint, 0, 65535, "0", false, "node 2's UDP port; 0: PortNumber + 1"},
    {"Mtu", Kind::kUint, wire::kMinMtu, wire::kMaxMtu, "1500", false,
     "IP MTU of the packets (the payload per packet is 68 bytes less)"},
    {"ReceiveBufferMemory", Kind::kBytes, 64 << 10, 1ULL << 30, "1M", false,
     "receive ring of this link: the window the peer may fill unread"},
    {"LinkTimeout", Kind::kUint, 100, 600'000, "5000", false,
     "milliseconds without a packet from the peer, or with sent bytes and no acknowledgement, before the "
     "link is declared down"},
    {"EalArgs", Kind::kString, 0, 1024, "", false,
     "EAL arguments of the process (space-separated), used by the first DPDK link it sets up; empty: one core, no "
     "huge pages, no PCI scan"},
#ifdef FJORD_DPDK_FAULTS
    {"InjectLoss", Kind::kUint, 0, 50, "0", false, "test builds: percent of sent packets dropped"},
    {"InjectDuplicate", Kind::kUint, 0, 50, "0", false, "test builds: percent of sent packets sent twice"},
    {"InjectReorder", Kind::kUint, 0, 50, "0", false, "test builds: percent of sent packets held behind the next"},
    {"InjectSeed", Kind::kUint, 0, UINT64_MAX, "1", false, "test builds: seed of the fault injector"},
#endif
};

// "IpAddress1=10.0.0.x (cluster.ini:4)"
std::string quote(const transport::LinkConfig& link, const std::string& key) {
  return key + "=" + link.params.get_string(key) + " (" + link.params.origin(key) + ")";
}

Result<EndSettings> resolve_end(const transport::LinkConfig& link, int end) {
  const std::string n = std::to_string(end);
  EndSettings out;
  out.device = link.params.get_string("Device" + n);
  if (out.device.empty())
    return Status(StatusCode::kInvalidArgument, "Device" + n + " is not set: name node " +
                                                    std::to_string(end == 1 ? link.node1 : link.node2) +
                                                    "'s DPDK device (devargs)");
  const std::string& mac = link.params.get_string("Mac" + n);
  if (!mac.empty()) {
    auto parsed = wire::parse_mac(mac);
    if (!parsed) return Status(StatusCode::kInvalidArgument, quote(link, "Mac" + n) + " is not a MAC address");
    out.mac = *parsed;
    out.mac_given = true;
  }
  const std::string& ip_text = link.params.get_string("IpAddress" + n);
  const std::string& host = end == 1 ? link.host1 : link.host2;
  auto ip = wire::parse_ipv4(ip_text.empty() ? host : ip_text);
  if (!ip) {
    if (!ip_text.empty())
      return Status(StatusCode::kInvalidArgument, quote(link, "IpAddress" + n) + " is not an IPv4 address");
    return Status(StatusCode::kInvalidArgument,
                  "IpAddress" + n + " is not set and HostName" + n + "='" + host + "' is not an IPv4 address");
  }
  out.ip = *ip;
  const uint64_t udp = link.params.get_uint("UdpPort" + n);
  const uint64_t derived = link.port == 0 ? 0 : uint64_t{link.port} + (end == 1 ? 0 : 1);
  if ((udp == 0 && derived == 0) || derived > 65535)
    return Status(StatusCode::kInvalidArgument,
                  "UdpPort" + n + " is not set and PortNumber=" + std::to_string(link.port) + " gives no UDP port");
  out.udp_port = static_cast<uint16_t>(udp != 0 ? udp : derived);
  return out;
}

FaultPlan fault_plan(const transport::LinkConfig& link, NodeId self) {
  FaultPlan plan;
#ifdef FJORD_DPDK_FAULTS
  plan.loss_percent = static_cast<uint32_t>(link.params.get_uint("InjectLoss"));
  plan.duplicate_percent = static_cast<uint32_t>(link.params.get_uint("InjectDuplicate"));
  plan.reorder_percent = static_cast<uint32_t>(link.params.get_uint("InjectReorder"));
  plan.seed = link.params.get_uint("InjectSeed") * 1000 + self;  // the two ends draw differently
#else
  (void)link;
  (void)self;
#endif
  return plan;
}

}  // namespace

std::span<const ParamSpec> dpdk_params() { return kParams; }

Result<LinkSettings> resolve_settings(const transport::LinkConfig& link, NodeId self) {
  FJORD_ASSERT(link.involves(self));
  auto one = resolve_end(link, 1);
  if (!one) return one.status();
  auto two = resolve_end(link, 2);
  if (!two) return two.status();
  LinkSettings out;
  const bool first = self == link.node1;
  out.local = first ? *one : *two;
  out.peer = first ? *two : *one;
  out.mtu = static_cast<uint32_t>(link.params.get_uint("Mtu"));
  out.send_ring_bytes = round_up_to_pages(link.send_buffer_bytes);
  out.receive_ring_bytes = round_up_to_pages(link.params.get_uint("ReceiveBufferMemory"));
  out.link_timeout_ns = link.params.get_uint("LinkTimeout") * 1'000'000ULL;
  out.eal_args = link.params.get_string("EalArgs");
  out.faults = fault_plan(link, self);
  return out;
}

// The values a section gives must be well-formed; those it leaves out (a
// device, an address that HostName does not give) are needed only to set
// the link up, and their absence is an error there.
Status check_given_values(const transport::LinkConfig& link) {
  for (const char* end : {"1", "2"}) {
    const std::string mac_key = std::string("Mac") + end;
    const std::string ip_key = std::string("IpAddress") + end;
    const std::string& mac = link.params.get_string(mac_key);
    if (!mac.empty() && !wire::parse_mac(mac))
      return Status(StatusCode::kInvalidArgument, quote(link, mac_key) + " is not a MAC address");
    const std::string& ip = link.params.get_string(ip_key);
    if (!ip.empty() && !wire::parse_ipv4(ip))
      return Status(StatusCode::kInvalidArgument, quote(link, ip_key) + " is not an IPv4 address");
  }
  return Status::ok();
}

Status validate_link(const transport::LinkConfig& link) {
  if (Status s = check_given_values(link); !s) return s;
  if (link.send_buffer_bytes < 2 * frame::kMaxFrameBytes)
    return Status(StatusCode::kInvalidArgument, "SendBufferMemory=" + config::format_bytes(link.send_buffer_bytes) +
                                                    " cannot hold two frames of the largest size");
  auto settings = resolve_settings(link, link.node1);
  if (!settings) return Status::ok();  // incomplete: connect() and listen() say what is missing
  const EndSettings& a = settings->local;
  const EndSettings& b = settings->peer;
  if (a.device == b.device && a.ip == b.ip && a.udp_port == b.udp_port)
    return Status(StatusCode::kInvalidArgument, "both ends use UDP port " + std::to_string(a.udp_port) + " of " +
                                                    wire::format_ipv4(a.ip) + " on device " + a.device +
                                                    ": give UdpPort1 and UdpPort2 different values");
  return Status::ok();
}

}  // namespace fjord::dpdk
