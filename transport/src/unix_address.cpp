// Who holds a Unix socket name (fjord/base/unix_address.h).
#include "fjord/base/unix_address.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "fjord/base/fd.h"

namespace fjord {

std::optional<ucred> unix_socket_holder(std::string_view name) {
  sockaddr_un addr;
  const socklen_t len = unix_address(name, addr);
  if (len == 0) return std::nullopt;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::nullopt;
  // A Unix stream connect completes at once or fails (EAGAIN when the
  // backlog is full): it never waits, even without O_NONBLOCK.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) return std::nullopt;
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) return std::nullopt;
  return cred;
}

std::string unix_name_taken(std::string_view name, const std::string& what) {
  const std::string quoted(name);
  const std::optional<ucred> holder = unix_socket_holder(name);
  if (!holder) return quoted + " (" + what + ") is bound by a process that does not accept connections on it";
  const std::string who = "pid " + std::to_string(holder->pid) + " (uid " + std::to_string(holder->uid) + ")";
  if (holder->uid != ::geteuid())
    return quoted + " (" + what + ") is held by " + who + ", another user's process: the name is squatted, not " +
           "this user's to take back; stop that process or choose another name";
  return quoted + " (" + what + ") is held by " + who + ", a process of this user: is it still running?";
}

}  // namespace fjord
