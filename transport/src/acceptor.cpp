#include "fjord/base/acceptor.h"

#include <fcntl.h>

#include <cerrno>

namespace fjord {
namespace {
int open_spare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }
}  // namespace

Acceptor::Acceptor() : spare_(open_spare()) {}

Acceptor::Taken Acceptor::take(int listen_fd, sockaddr* from, socklen_t* from_len) {
  for (;;) {
    UniqueFd conn(::accept4(listen_fd, from, from_len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (conn.valid()) return {Outcome::kConnection, std::move(conn), 0};
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;  // a peer that left before we took it
    if (error == EAGAIN || error == EWOULDBLOCK) return {Outcome::kNone, {}, 0};
    if ((error != EMFILE && error != ENFILE) || !spare_.valid()) return {Outcome::kFailed, {}, error};
    spare_.reset();
    UniqueFd shed(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    const int shed_error = shed.valid() ? 0 : errno;
    shed.reset();
    spare_.reset(open_spare());
    if (shed_error == 0) return {Outcome::kShed, {}, error};
    if (shed_error == EAGAIN || shed_error == EWOULDBLOCK) return {Outcome::kNone, {}, 0};  // it left meanwhile
    // Still nothing (another thread took the freed descriptor first, say):
    // the shortage is reported, and the caller comes back on its next wake-up.
    return {Outcome::kFailed, {}, error};
  }
}

}  // namespace fjord
