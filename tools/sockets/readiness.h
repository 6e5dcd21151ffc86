// poll, ppoll, select, pselect and epoll for accelerated sockets (internal
// header of libfjord-sockets).
//
// An accelerated socket's readiness comes from its rings, not from the
// kernel: these calls look at the rings first and return at once if one is
// ready. Otherwise they ask each peer for a doorbell (a byte on the kernel
// connection, Connection::arm_doorbells), look once more, and sleep in the
// kernel call with the application's own socket in the set (watched for
// input: a doorbell, or the end of the connection). Event loops therefore
// need no change. Epoll keeps, per epoll descriptor, the accelerated
// sockets registered in it with the application's events and data; the
// kernel registration of such a socket is EPOLLIN | EPOLLET with a tagged
// data word that the library removes from what epoll_wait returns. Any
// thread.
#pragma once

#include <cstdint>

namespace fjord::sockets {

// close(): the descriptor may be an epoll set the library tracks.
void forget_epoll_set(int fd);

// A socket registered in epoll set epfd became accelerated: its kernel
// registration becomes the library's, with the application's events and data.
void adopt_epoll_registration(int epfd, int fd, uint32_t events, uint64_t data);

}  // namespace fjord::sockets
