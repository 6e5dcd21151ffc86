// IP-address helpers for transporters that address peers by IP (TCP, RDMA
// through rdma_cm): resolving a link's host names, checking
// that a connecting peer comes from the host its node is configured on, and
// the "one listening address per node and medium" rule. Slow path (set-up);
// any thread; no shared state.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/link_config.h"

namespace fjord::transport {

// "10.0.0.1:11860", "[::1]" forms are not used: "::1:11860".
std::string sockaddr_text(const sockaddr* address);
// The address alone: "10.0.0.1", "::1" (an IPv4-mapped IPv6 address as
// IPv4, so one host counts as one source however it connects).
std::string ip_text(const sockaddr* address);

// The addresses `host` resolves to, IPv4 first ("localhost" means 127.0.0.1
// before ::1). passive: for bind(), where an empty host means any address.
Result<std::vector<sockaddr_storage>> resolve_host(const std::string& host, uint16_t port, bool passive = false);

// True for the wildcard addresses 0.0.0.0 and :: (listen on every address).
bool is_any_address(const sockaddr* address);

// Same IP (ports ignored), IPv4-mapped IPv6 equal to plain IPv4.
bool same_ip(const sockaddr* a, const sockaddr* b);

// kRejected, naming the address and the configured host, unless `from` is
// one of the addresses of the host the link names for node `peer`.
Status check_peer_address(const LinkConfig& link, NodeId peer, const sockaddr* from);

// The one link whose address node `self` listens on for `type`: every link
// of that type served by `self` must name the same host and port (one
// listening socket per node and medium). kNotFound if it serves none;
// kInvalidArgument naming both links if they disagree.
Result<const LinkConfig*> listen_link(NodeId self, const LinkTable& links, std::string_view type);

// kInvalidArgument, naming the link, if its port is 0: PortNumber=0 makes
// the server listen on any free port, which a client cannot know (a section
// without PortNumber has a port both ends agree on, link_config.h).
Status check_connect_port(const LinkConfig& link);

}  // namespace fjord::transport
