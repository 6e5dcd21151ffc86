#include "fjord/base/acceptor.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "fjord/base/log.h"

namespace fjord {
namespace {
int open_spare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }
}  // namespace

Acceptor::Acceptor(std::string what) : what_(std::move(what)), spare_(open_spare()) {}

UniqueFd Acceptor::take(int listen_fd, sockaddr* from, socklen_t* from_len) {
  for (;;) {
    UniqueFd conn(::accept4(listen_fd, from, from_len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (conn.valid()) return conn;
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;  // a peer that left before we took it
    if (error == EAGAIN || error == EWOULDBLOCK) return {};
    if ((error != EMFILE && error != ENFILE) || !spare_.valid()) {
      FJORD_LOG_WARN("%s: accept: %s", what_.c_str(), std::strerror(error));
      return {};
    }
    spare_.reset();
    UniqueFd shed(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    const int shed_error = shed.valid() ? 0 : errno;
    shed.reset();
    spare_.reset(open_spare());
    if (shed_error == EAGAIN || shed_error == EWOULDBLOCK) return {};  // it left meanwhile
    if (shed_error != 0) {
      // Still nothing (another thread took the freed descriptor first, say):
      // the caller comes back on its next wake-up.
      FJORD_LOG_WARN("%s: accept: %s", what_.c_str(), std::strerror(error));
      return {};
    }
    FJORD_LOG_WARN("%s: accept: %s: a waiting connection was closed unserved", what_.c_str(), std::strerror(error));
  }
}

}  // namespace fjord
