// The data node's control socket: where it lives, how the node takes its
// name so that no other user can hold it first or answer in its place, and
// the client's side (control_request, used by fjord-stats). Slow path.
//
// By default the socket is a path in a directory only the node's user may
// enter or write (<DataDir>/fjord-control, mode 0700): no other user can
// create a name there, so none can take it first. A name configured
// explicitly is used as given; if another process holds it, the node
// refuses to start and says who holds it (another user squatting it, or a
// node of this user still running). The client only believes a reply from
// a process of its own user or root.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/log.h"
#include "fjord/base/unix_address.h"
#include "node_internal.h"

namespace fjord::engine {
namespace {

constexpr int kControlBacklog = 8;

// A control socket name no Unix address holds (unix_address gave 0).
Status unusable_socket_name(const std::string& name) {
  return Status(StatusCode::kInvalidArgument, "control socket name '" + name + "' is empty or longer than " +
                                                  std::to_string(kMaxUnixSocketName) +
                                                  " bytes (set ControlSocket, or use a shorter DataDir)");
}

// `dir` exists, is a directory (not a link to one), belongs to this user
// and is closed to everyone else; created so if missing.
Status make_private_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return io_error("create the control directory " + dir, errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return io_error("stat the control directory " + dir, errno);
  if (!S_ISDIR(st.st_mode))
    return Status(StatusCode::kAlreadyExists,
                  dir + " (the control socket's directory) exists and is not a directory; remove it");
  if (st.st_uid != ::geteuid())
    return Status(StatusCode::kRejected, dir + " (the control socket's directory) belongs to uid " +
                                             std::to_string(st.st_uid) + ", not to this node's user (uid " +
                                             std::to_string(::geteuid()) +
                                             "): another user could create or take its names; remove it");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status(StatusCode::kRejected, dir + " (the control socket's directory) has mode " + mode +
                                             "; it must be 0700 so that only the node's user reaches the socket "
                                             "(chmod 700 it)");
  }
  return Status::ok();
}

// A path name left by a node that is gone is removed; one a process still
// answers on, or a file that is no socket, is an error naming it.
Status clear_stale_socket_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status::ok() : io_error("stat " + path, errno);
  if (!S_ISSOCK(st.st_mode))
    return Status(StatusCode::kAlreadyExists, path + " (" + what + ") exists and is not a socket; remove it");
  if (unix_socket_holder(path)) return Status(StatusCode::kAlreadyExists, unix_name_taken(path, what));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("remove the stale socket " + path, errno);
  return Status::ok();
}

Result<UniqueFd> bind_control_socket(const std::string& name, NodeId self) {
  sockaddr_un addr;
  const socklen_t len = unix_address(name, addr);
  if (len == 0) return unusable_socket_name(name);
  const std::string what = "the control socket of node " + std::to_string(self);
  if (name[0] != '@')
    if (Status s = clear_stale_socket_file(name, what); !s) return s;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return io_error("control socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno == EADDRINUSE) return Status(StatusCode::kAlreadyExists, unix_name_taken(name, what));
    return io_error("bind " + what + " on " + name, errno);
  }
  if (::listen(fd.get(), kControlBacklog) != 0) return io_error("listen on " + name, errno);
  return fd;
}

}  // namespace

std::string default_control_directory(const std::string& data_dir) {
  return (data_dir.empty() ? std::string(".") : data_dir) + "/fjord-control";
}

std::string control_socket_of(const ClusterConfig& cluster, NodeId node) {
  const NodeDef* def = cluster.node(node);
  if (def == nullptr) return {};
  const std::string& configured = def->params.get_string("ControlSocket");
  if (!configured.empty()) return configured;
  return default_control_directory(def->params.get_string("DataDir")) + "/node-" + std::to_string(node);
}

Status DataNode::Impl::open_control() {
  if (control_in_private_directory)
    if (Status s = make_private_directory(default_control_directory(node->params.get_string("DataDir"))); !s) return s;
  auto fd = bind_control_socket(control_name, self);
  if (!fd) return fd.status();
  control_fd = std::move(fd).value();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kControlTag;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, control_fd.get(), &ev);
  stats_interval_s = static_cast<uint32_t>(node->params.get_uint("StatsLogInterval"));
  return Status::ok();
}

namespace {

Result<UniqueFd> connect_control(const std::string& socket_name, uint32_t timeout_ms) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return io_error("socket", errno);
  timeval tv{static_cast<time_t>(timeout_ms / 1000), static_cast<suseconds_t>(timeout_ms % 1000 * 1000)};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_un addr;
  const socklen_t len = unix_address(socket_name, addr);
  if (len == 0) return unusable_socket_name(socket_name);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return Status(StatusCode::kUnavailable, "no data node answers on " + socket_name + ": " + std::strerror(errno));
  // Only a node of this user (or root) is believed: any user can bind an
  // abstract name, or a path in a directory open to all.
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
    return io_error("SO_PEERCRED on " + socket_name, errno);
  if (cred.uid != ::geteuid() && cred.uid != 0)
    return Status(StatusCode::kRejected, "the process answering on " + socket_name + " (pid " +
                                             std::to_string(cred.pid) + ") runs as uid " + std::to_string(cred.uid) +
                                             ", neither this user (uid " + std::to_string(::geteuid()) +
                                             ") nor root: not a node of this user; its reply is not read");
  return fd;
}

}  // namespace

Result<std::string> control_request(const std::string& socket_name, const std::string& command, uint32_t timeout_ms) {
  auto connected = connect_control(socket_name, timeout_ms);
  if (!connected) return connected.status();
  const UniqueFd fd = std::move(connected).value();
  const std::string line = command + "\n";
  const bool sent = ::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size());
  const int send_errno = errno;
  // A node that refuses the connection (too many waiting) answers and
  // closes without reading: its answer is still there to read.
  std::string reply;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n > 0)
      reply.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || !reply.empty())
      break;
    else if (!sent)
      return io_error("send to " + socket_name, send_errno);
    else
      return Status(StatusCode::kTimeout, "no reply from " + socket_name);
  }
  if (!sent && reply.empty()) return io_error("send to " + socket_name, send_errno);
  return reply;
}

}  // namespace fjord::engine
