#include "fjord/transport/ip_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstring>

namespace fjord::transport {

std::string sockaddr_text(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (address && address->sa_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (address && address->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(address);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

Result<std::vector<sockaddr_storage>> resolve_host(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() && passive ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) return Status(StatusCode::kNotFound, "cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  std::vector<sockaddr_storage> out;
  for (addrinfo* a = list; a; a = a->ai_next) {
    sockaddr_storage s{};
    std::memcpy(&s, a->ai_addr, a->ai_addrlen);
    out.push_back(s);
  }
  ::freeaddrinfo(list);
  std::stable_partition(out.begin(), out.end(), [](const sockaddr_storage& s) { return s.ss_family == AF_INET; });
  if (out.empty()) return Status(StatusCode::kNotFound, "host '" + host + "' has no address");
  return out;
}

namespace {
bool as_ipv4(const sockaddr* s, in_addr& out) {
  if (s->sa_family == AF_INET) {
    out = reinterpret_cast<const sockaddr_in*>(s)->sin_addr;
    return true;
  }
  const auto* six = reinterpret_cast<const sockaddr_in6*>(s);
  if (s->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&six->sin6_addr)) {
    std::memcpy(&out, six->sin6_addr.s6_addr + 12, 4);
    return true;
  }
  return false;
}
}  // namespace

std::string ip_text(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = "?";
  in_addr four{};
  if (address && as_ipv4(address, four))
    ::inet_ntop(AF_INET, &four, host, sizeof host);
  else if (address && address->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, host, sizeof host);
  return host;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
  in_addr x{}, y{};
  if (as_ipv4(a, x) && as_ipv4(b, y)) return x.s_addr == y.s_addr;
  if (a->sa_family == AF_INET6 && b->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

Status check_peer_address(const LinkConfig& link, NodeId peer, const sockaddr* from) {
  const std::string& host = link.host_of(peer);
  auto allowed = resolve_host(host, 0);
  if (!allowed) return Status(StatusCode::kRejected, allowed.status().message());
  for (const sockaddr_storage& a : *allowed)
    if (same_ip(reinterpret_cast<const sockaddr*>(&a), from)) return Status::ok();
  return Status(StatusCode::kRejected, "node " + std::to_string(peer) + " connected from " + sockaddr_text(from) +
                                           " but " + link.describe() + " says its host is '" + host + "'");
}

Result<const LinkConfig*> listen_link(NodeId self, const LinkTable& links, std::string_view type) {
  const LinkConfig* first = nullptr;
  for (const LinkConfig* link : links.links_of(self)) {
    if (link->type != type || link->server_node != self) continue;
    if (!first) {
      first = link;
    } else if (link->port != first->port || link->host_of(self) != first->host_of(self)) {
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " must listen on one address for all its " + std::string(type) +
                        " links, but " + first->describe() + " says " + first->host_of(self) + ":" +
                        std::to_string(first->port) + " and " + link->describe() + " says " + link->host_of(self) +
                        ":" + std::to_string(link->port));
    }
  }
  if (!first)
    return Status(StatusCode::kNotFound, "node " + std::to_string(self) + " serves no " + std::string(type) + " link");
  return first;
}

Status check_connect_port(const LinkConfig& link) {
  if (link.port != 0) return Status::ok();
  return Status(StatusCode::kInvalidArgument,
                link.describe() +
                    " has PortNumber=0: its server listens on any free port, which this end cannot know; give "
                    "both ends the same PortNumber, or leave it out for the server node's ServerPort (else " +
                    std::to_string(kDefaultLinkPort) + ")");
}

bool is_any_address(const sockaddr* address) {
  if (address && address->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (address && address->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return false;
}

}  // namespace fjord::transport
