// Unix stream socket addresses by name: "@name" is in the abstract
// namespace (nothing in the filesystem), anything else is a path; and who
// holds a name another process bound first. Slow path; any thread.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
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

// The credentials (pid, uid, gid at its listen()) of the process that
// accepts connections on `name`, or nullopt when none does (nothing bound,
// a stale socket file, or a backlog full). Never blocks.
std::optional<ucred> unix_socket_holder(std::string_view name);

// Why `name` cannot be bound (bind() failed with EADDRINUSE): "held by pid
// 12 (uid 65534), another user's process: ..." naming the holder, and
// whether it is this process's user (another node, say) or another user
// squatting the name. `what` names the socket ("the control socket of
// node 1").
std::string unix_name_taken(std::string_view name, const std::string& what);

}  // namespace fjord
