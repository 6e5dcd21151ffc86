// Unix stream socket addresses by name: "@name" is in the abstract
// namespace (nothing in the filesystem), anything else is a path. Slow path.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <string_view>

namespace fjord {

// The longest name unix_address() takes ('@' counted): sun_path less one byte.
inline constexpr std::size_t kMaxUnixSocketName = sizeof(sockaddr_un::sun_path) - 1;

// Fills `addr` for `name` and returns the length to give bind() or
// connect(); 0 when the name is empty or longer than kMaxUnixSocketName
// (nothing is cut short).
inline socklen_t unix_address(std::string_view name, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() > kMaxUnixSocketName) return 0;
  const bool abstract = name[0] == '@';
  if (abstract) name.remove_prefix(1);  // sun_path[0] stays NUL: the abstract namespace
  std::memcpy(addr.sun_path + (abstract ? 1 : 0), name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + (abstract ? 1 : 0) + name.size());
}

}  // namespace fjord
