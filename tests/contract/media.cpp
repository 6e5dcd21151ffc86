#include "media.h"

#include <unistd.h>

#include <atomic>

#include "builtin_transporters.h"
#include "tls_directory.h"

namespace fjord::test {
namespace {

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return std::to_string(::getpid()) + std::to_string(counter.fetch_add(1));
}

std::string common(const char* type, NodeId a, NodeId b) {
  return std::string("[") + type + "]\nNodeId1=" + std::to_string(a) + "\nNodeId2=" + std::to_string(b) +
         "\nNodeIdServer=" + std::to_string(a) + "\n";
}

std::string tcp_section(NodeId a, NodeId b, const std::string& extra) {
  return common("tcp", a, b) + "HostName1=127.0.0.1\nHostName2=127.0.0.1\nPortNumber=0\n" + extra;
}

// A cluster CA and certificates for nodes 1..16, made on first use and
// removed when the process exits.
const std::string& tls_directory() {
  static const NodeId kNodes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  static const TlsDirectory directory(kNodes);
  return directory.path();
}

std::string tcp_tls_section(NodeId a, NodeId b, const std::string& extra) {
  return tcp_section(a, b, "RequireTls=1\nTlsSearchPath=" + tls_directory() + "\n" + extra);
}

std::string shm_section(NodeId a, NodeId b, const std::string& extra) {
  return common("shm", a, b) + "ShmKey=" + unique_suffix() + "\n" + extra;
}

std::string sim_section(NodeId a, NodeId b, const std::string& extra) {
  return common("sim", a, b) + "SimEndpoint=" + unique_suffix() + "\n" + extra;
}

std::string rdma_section(NodeId a, NodeId b, const std::string& extra) {
  const char* ip = ::getenv("RXE_IP");
  const std::string host = ip ? ip : "127.0.0.1";
  return common("rdma", a, b) + "HostName1=" + host + "\nHostName2=" + host + "\nPortNumber=0\n" + extra;
}

// One process's DPDK links over its net_ring0 device, a loopback port (what
// is sent comes back): both ends of a link live in this process and the
// UDP ports, fresh for each section, tell the links apart. The injected
// faults hit every packet each end sends (handshake, data, acks, closes).
std::string dpdk_section_with(NodeId a, NodeId b, const std::string& extra, const std::string& faults) {
  static std::atomic<unsigned> next_port{20000};
  const unsigned port = next_port.fetch_add(2);
  return common("dpdk", a, b) + "Device1=net_ring0\nDevice2=net_ring0\nIpAddress1=10.0.0." + std::to_string(a) +
         "\nIpAddress2=10.0.0." + std::to_string(b) + "\nUdpPort1=" + std::to_string(port) +
         "\nUdpPort2=" + std::to_string(port + 1) + "\nLinkTimeout=2000\n" + faults + extra;
}
std::string dpdk_section(NodeId a, NodeId b, const std::string& extra) { return dpdk_section_with(a, b, extra, ""); }
std::string dpdk_loss1_section(NodeId a, NodeId b, const std::string& extra) {
  return dpdk_section_with(a, b, extra, "InjectLoss=1\nInjectDuplicate=1\nInjectReorder=1\nInjectSeed=11\n");
}
std::string dpdk_loss10_section(NodeId a, NodeId b, const std::string& extra) {
  return dpdk_section_with(a, b, extra, "InjectLoss=10\nInjectDuplicate=2\nInjectReorder=2\nInjectSeed=12\n");
}

const Medium kAll[] = {
    {"tcp", tcp_section},
    {"tcp", tcp_tls_section, false, "tcp_tls"},
    {"shm", shm_section},
    {"sim", sim_section, /*in_process_only=*/true},
    {"rdma", rdma_section},
    {"dpdk", dpdk_section, /*in_process_only=*/true},
    {"dpdk", dpdk_loss1_section, /*in_process_only=*/true, "dpdk_loss1"},
    {"dpdk", dpdk_loss10_section, /*in_process_only=*/true, "dpdk_loss10"},
};

}  // namespace

std::vector<Medium> contract_media() {
  std::vector<Medium> out;
  for (const Medium& m : kAll)
    if (tools::builtin_registry().find(m.type)) out.push_back(m);
  return out;
}

const Medium* find_medium(const std::string& type) {
  for (const Medium& m : kAll)
    if (m.name() == type) return &m;
  return nullptr;
}

}  // namespace fjord::test
