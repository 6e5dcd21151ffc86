// Passing file descriptors over a connected Unix stream socket (SCM_RIGHTS),
// bounded by a deadline (internal header).
//
// Each message is one data byte carrying the descriptors, so it never merges
// with the handshake bytes around it. Slow path (link set-up); any thread.
#pragma once

#include <span>

#include "fjord/base/fd.h"
#include "fjord/base/status.h"
#include "fjord/transport/types.h"

namespace fjord::shm {

inline constexpr std::size_t kMaxPassedFds = 4;

// Sends `fds` (1..kMaxPassedFds); they stay open on this side.
Status send_fds(int socket, std::span<const int> fds, DeadlineNs deadline);

// Receives exactly out.size() descriptors (close-on-exec). Anything else
// (fewer, more, none, a truncated control message) is a kProtocolError and
// whatever did arrive is closed.
Status receive_fds(int socket, std::span<UniqueFd> out, DeadlineNs deadline);

}  // namespace fjord::shm
