// The C library's socket calls, found with dlsym(RTLD_NEXT) (internal header
// of libfjord-sockets).
//
// Every interposed call that is not for an accelerated descriptor goes
// straight to these. Resolved once, on first use or by the library's
// constructor, whichever comes first; any thread may call real().
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace fjord::sockets {

struct RealCalls {
  int (*socket)(int, int, int);
  int (*listen)(int, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  ssize_t (*recvmsg)(int, msghdr*, int);
  ssize_t (*sendfile)(int, int, off_t*, size_t);
  int (*close)(int);
  int (*shutdown)(int, int);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*ioctl)(int, unsigned long, ...);
  int (*poll)(pollfd*, nfds_t, int);
  int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  int (*epoll_ctl)(int, int, int, epoll_event*);
  int (*epoll_wait)(int, epoll_event*, int, int);
  int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
  pid_t (*fork)();
};

// The resolved table. A call the C library lacks aborts with its name (the
// library cannot work without it).
const RealCalls& real();

}  // namespace fjord::sockets
