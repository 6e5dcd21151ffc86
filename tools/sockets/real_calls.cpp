// dlsym(RTLD_NEXT) look-ups of the C library's socket calls.
#include "real_calls.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace fjord::sockets {
namespace {

template <typename F>
void resolve(F& slot, const char* name) {
  void* symbol = ::dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    std::fprintf(stderr, "libfjord-sockets: the C library has no %s\n", name);
    std::abort();
  }
  slot = reinterpret_cast<F>(symbol);
}

RealCalls resolve_all() {
  RealCalls r{};
  resolve(r.socket, "socket");
  resolve(r.listen, "listen");
  resolve(r.connect, "connect");
  resolve(r.accept, "accept");
  resolve(r.accept4, "accept4");
  resolve(r.read, "read");
  resolve(r.write, "write");
  resolve(r.readv, "readv");
  resolve(r.writev, "writev");
  resolve(r.send, "send");
  resolve(r.recv, "recv");
  resolve(r.sendto, "sendto");
  resolve(r.recvfrom, "recvfrom");
  resolve(r.sendmsg, "sendmsg");
  resolve(r.recvmsg, "recvmsg");
  resolve(r.sendfile, "sendfile");
  resolve(r.close, "close");
  resolve(r.shutdown, "shutdown");
  resolve(r.setsockopt, "setsockopt");
  resolve(r.dup, "dup");
  resolve(r.dup2, "dup2");
  resolve(r.dup3, "dup3");
  resolve(r.fcntl, "fcntl");
  resolve(r.ioctl, "ioctl");
  resolve(r.poll, "poll");
  resolve(r.ppoll, "ppoll");
  resolve(r.epoll_ctl, "epoll_ctl");
  resolve(r.epoll_wait, "epoll_wait");
  resolve(r.epoll_pwait, "epoll_pwait");
  resolve(r.select, "select");
  resolve(r.pselect, "pselect");
  resolve(r.fork, "fork");
  return r;
}

}  // namespace

const RealCalls& real() {
  // A function-local static: thread-safe first use, even from another
  // library's constructor that runs before ours.
  static const RealCalls calls = resolve_all();
  return calls;
}

}  // namespace fjord::sockets
