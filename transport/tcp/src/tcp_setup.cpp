// TCP set-up: the factory, the listener, connect, and the peer address check.
// Slow path, allocates freely: connect() blocks with its deadline; the
// listener never waits for one peer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "fjord/base/acceptor.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/tcp/tcp.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/ip_address.h"
#include "fjord/transport/pending_handshakes.h"
#include "tcp_transporter.h"
#include "tls_accept.h"
#include "tls_session.h"

namespace fjord::tcp {
namespace {

using config::Kind;
using config::ParamSpec;
using transport::LinkConfig;
using transport::LinkTable;
using transport::Listener;
using transport::Transporter;

constexpr std::string_view kName = "tcp";
// Connections the kernel queues for the listener while its thread is busy:
// room for a burst (a flood among them) without the SYN of a well-behaved
// peer being dropped, which would cost it a retransmission (a second).
constexpr int kListenBacklog = 1024;

const ParamSpec kTcpParams[] = {
    {"ReceiveBufferMemory", Kind::kBytes, 64 << 10, 1ULL << 30, "2M", false, "receive ring of this link"},
    {"TCP_SND_BUF_SIZE", Kind::kBytes, 0, 1ULL << 30, "0", false, "SO_SNDBUF; 0 = the kernel's default"},
    {"TCP_RCV_BUF_SIZE", Kind::kBytes, 0, 1ULL << 30, "0", false, "SO_RCVBUF; 0 = the kernel's default"},
    {"RequireTls", Kind::kBool, 0, 1, "false", false,
     "this end speaks TLS 1.3 on the link and refuses a peer that does not (needs TlsSearchPath)"},
    {"TlsSearchPath", Kind::kString, 0, 4096, "", false,
     "directories (colon-separated) holding cluster-ca.crt and node-<id>.crt/.key; a listener with it accepts TLS"},
};

// ---- TLS hook: right after connect/accept, before the Fjord handshake ----

bool requires_tls(const LinkConfig& link) { return link.params.get_bool("RequireTls"); }
const std::string& tls_search_path(const LinkConfig& link) { return link.params.get_string("TlsSearchPath"); }

// The connecting side's TLS session, or nullptr when its link does not
// require TLS.
Result<std::unique_ptr<TlsSession>> connect_tls(NodeId self, const LinkConfig& link, int fd, DeadlineNs deadline,
                                                const std::string& peer) {
  if (!requires_tls(link)) return std::unique_ptr<TlsSession>();
  auto context = TlsContext::load(self, tls_search_path(link));
  if (!context) return Status(context.status().code(), link.describe() + ": " + context.status().message());
  return TlsSession::connect(**context, fd, link.server_node, deadline, peer);
}

// The TLS settings of a listener: one TlsSearchPath for all its tcp links
// (a node has one certificate), or none.
Result<std::shared_ptr<TlsContext>> listener_tls(NodeId self, const LinkTable& links) {
  const LinkConfig* with_path = nullptr;
  for (const LinkConfig* link : links.links_of(self)) {
    if (link->type != kName || tls_search_path(*link).empty()) continue;
    if (with_path && tls_search_path(*with_path) != tls_search_path(*link))
      return Status(StatusCode::kInvalidArgument, with_path->describe() + " and " + link->describe() + " give node " +
                                                      std::to_string(self) +
                                                      " different TlsSearchPath values; its tcp links share one");
    with_path = link;
  }
  if (!with_path) return std::shared_ptr<TlsContext>();
  auto context = TlsContext::load(self, tls_search_path(*with_path));
  if (!context) return Status(context.status().code(), with_path->describe() + ": " + context.status().message());
  return context;
}

// After the Fjord handshake matched `link`: TLS as the link requires, and a
// certificate that names the node the request claims.
Status check_link_tls(NodeId self, const LinkConfig& link, const TlsSession* tls, NodeId claimed) {
  if (tls) return tls->check_peer(claimed);
  if (!requires_tls(link)) return Status::ok();
  return Status(StatusCode::kRejected, link.describe() + " requires TLS at node " + std::to_string(self) +
                                           " (RequireTls=1) but node " + std::to_string(claimed) +
                                           " connected without it");
}

std::string sockaddr_text(const sockaddr_storage& addr) {
  return transport::sockaddr_text(reinterpret_cast<const sockaddr*>(&addr));
}

Status set_socket_options(int fd, const LinkConfig& link) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return io_error("setsockopt TCP_NODELAY", errno);
  const auto sndbuf = static_cast<int>(link.params.get_uint("TCP_SND_BUF_SIZE"));
  const auto rcvbuf = static_cast<int>(link.params.get_uint("TCP_RCV_BUF_SIZE"));
  if (sndbuf > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
    return io_error("SO_SNDBUF", errno);
  if (rcvbuf > 0 && ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0)
    return io_error("SO_RCVBUF", errno);
  return Status::ok();
}

Result<std::unique_ptr<Transporter>> make_transporter(const LinkConfig& link, NodeId self, UniqueFd socket,
                                                      std::unique_ptr<TlsSession> tls) {
  auto send_ring = MirroredMap::anonymous(round_up_to_pages(link.send_buffer_bytes), "fjord-tcp-send");
  if (!send_ring) return send_ring.status();
  auto receive_ring =
      MirroredMap::anonymous(round_up_to_pages(link.params.get_uint("ReceiveBufferMemory")), "fjord-tcp-recv");
  if (!receive_ring) return receive_ring.status();
  if (tls)
    return std::unique_ptr<Transporter>(new TlsTcpTransporter(
        link, self, std::move(socket), std::move(send_ring).value(), std::move(receive_ring).value(), std::move(tls)));
  return std::unique_ptr<Transporter>(
      new TcpTransporter(link, self, std::move(socket), std::move(send_ring).value(), std::move(receive_ring).value()));
}

class TcpListener final : public Listener {
 public:
  // `ready`: an epoll set holding `socket` (the listener's fd()), where
  // connections waiting for their handshake join it.
  TcpListener(NodeId self, const LinkTable& links, UniqueFd socket, UniqueFd ready, uint16_t port, std::string endpoint,
              std::shared_ptr<TlsContext> tls)
      : self_(self),
        links_(links),
        socket_(std::move(socket)),
        ready_(std::move(ready)),
        port_(port),
        endpoint_(std::move(endpoint)),
        tls_(std::move(tls)),
        acceptor_("node " + std::to_string(self) + ": tcp listener on " + endpoint_),
        pending_(ready_.get(), "tcp listener on " + endpoint_) {}

  int fd() const override { return ready_.get(); }
  std::string endpoint() const override { return endpoint_; }
  uint16_t port() const override { return port_; }

  // Connections are accepted as they come and wait in pending_ until their
  // handshake request is all there, a TLS peer's through its TLS handshake
  // (tls_accept.h): a peer that connects and stalls holds up no other
  // (transport/pending_handshakes.h).
  Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) override {
    for (;;) {
      take_waiting(deadline);
      const uint64_t now = monotonic_ns();
      if (auto ready = pending_.take_ready(now)) return set_up(std::move(*ready));
      if (now >= deadline) return Status(StatusCode::kTimeout, "no connection attempt on " + endpoint_);
      const uint64_t until = std::min(deadline, pending_.next_deadline());
      epoll_event events[8];
      (void)::epoll_wait(ready_.get(), events, 8,
                         static_cast<int>(std::min<uint64_t>((until > now ? until - now : 0) / 1'000'000 + 1, 1000)));
    }
  }

 private:
  // At most kMaxPending a call: under a flood of connections the caller
  // still gets to the ones whose requests are in (the listen socket stays
  // readable while more wait in its queue).
  void take_waiting(DeadlineNs deadline) {
    for (std::size_t taken = 0; taken < transport::PendingHandshakes::kMaxPending; ++taken) {
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      UniqueFd conn = acceptor_.take(socket_.get(), reinterpret_cast<sockaddr*>(&from), &from_len);
      if (!conn.valid()) return;
      // A peer already gone fails its greeting; it waits all the same, and
      // its handshake reports it (no proof can be made over a nonce never
      // sent). The greeting goes out in the clear, before any TLS.
      auto greeting = transport::send_greeting(conn.get());
      const std::string peer = sockaddr_text(from);
      std::unique_ptr<transport::PendingSetup> setup;
      if (tls_) setup = std::make_unique<TlsAcceptSetup>(tls_, conn.get(), peer);
      // The peer is here: its set-up gets its own budget, not what is left
      // of this accept() slice. The bounds count by IP address.
      const auto* address = reinterpret_cast<const sockaddr*>(&from);
      (void)pending_.add({std::move(conn), peer, 0, transport::setup_deadline(deadline), transport::ip_text(address),
                          greeting ? *greeting : transport::random_nonce(), std::move(setup)},
                         monotonic_ns());
    }
  }

  // A ready connection's TLS: its TLS set-up (tls_accept.h), nullptr for a
  // plain peer, or the refusal of a TLS peer this listener cannot serve.
  Result<TlsAcceptSetup*> ready_tls(transport::PendingHandshakes::Entry& ready) {
    // Every setup this listener's pending_ holds is a TlsAcceptSetup (take_waiting()).
    auto* setup = static_cast<TlsAcceptSetup*>(ready.setup.get());
    if (setup == nullptr) {
      if (!starts_with_tls_record(ready.conn.get())) return setup;
      return transport::send_reject(
          ready.conn.get(), kName, ready.peer,
          "node " + std::to_string(self_) + " has no TLS credentials (none of its tcp links sets TlsSearchPath)",
          ready.deadline);
    }
    // Returned, not logged: the listener's owner logs failed set-ups (the
    // data node at most once a second, however many peers fail).
    if (const Status& failed = setup->handshake_failure(); !failed) return failed;
    return setup->session() != nullptr ? setup : nullptr;
  }

  // Runs once the request is all there (decrypted, with TLS), so the
  // handshake reads without waiting; its replies are small enough for the
  // socket's buffer. The deadline is the one the set-up had from its accept.
  Result<std::unique_ptr<Transporter>> set_up(transport::PendingHandshakes::Entry ready) {
    const int conn = ready.conn.get();
    const std::string& peer = ready.peer;
    const DeadlineNs deadline = ready.deadline;
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    ::getpeername(conn, reinterpret_cast<sockaddr*>(&from), &from_len);
    auto tls = ready_tls(ready);
    if (!tls) return tls.status();
    std::optional<transport::HandshakeStreamScope> through_tls;
    if (*tls) through_tls.emplace(conn, **tls);
    auto accepted = transport::server_handshake(conn, self_, kName, links_, deadline, peer, ready.greeting);
    if (!accepted) return accepted.status();
    const LinkConfig& link = *accepted->link;
    if (Status s = check_link_tls(self_, link, *tls ? (*tls)->session() : nullptr, accepted->request.from_node); !s)
      return transport::send_reject(conn, kName, peer, s.message(), deadline);
    if (Status s = transport::check_peer_address(link, link.peer_of(self_), reinterpret_cast<const sockaddr*>(&from));
        !s)
      return transport::send_reject(conn, kName, peer, s.message(), deadline);
    if (Status s = set_socket_options(conn, link); !s) return s;
    if (Status s = transport::send_accept(conn, *accepted, {}, deadline); !s) return s;
    FJORD_LOG_INFO("node %u: accepted %s from node %u at %s%s", self_, link.describe().c_str(), link.peer_of(self_),
                   peer.c_str(), *tls ? " with TLS" : "");
    return make_transporter(link, self_, std::move(ready.conn),
                            *tls ? (*tls)->take_session() : std::unique_ptr<TlsSession>());
  }

  NodeId self_;
  LinkTable links_;
  UniqueFd socket_;
  UniqueFd ready_;
  uint16_t port_;
  std::string endpoint_;
  std::shared_ptr<TlsContext> tls_;  // nullptr: this listener has no TLS credentials
  Acceptor acceptor_;
  transport::PendingHandshakes pending_;
};

class TcpFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "TCP sockets (ordinary socket calls only, so LD_PRELOAD socket libraries work)";
  }
  std::span<const ParamSpec> parameters() const override { return kTcpParams; }
  Status validate(const LinkConfig& link) const override {
    if (requires_tls(link) && tls_search_path(link).empty())
      return Status(StatusCode::kInvalidArgument,
                    "RequireTls=1 needs TlsSearchPath, the directories holding cluster-ca.crt and each node's "
                    "node-<id>.crt and node-<id>.key");
    return Status::ok();
  }

  Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) override {
    auto link = transport::listen_link(self, links, kName);
    if (!link) return link.status();
    if (Status s = transport::check_own_keys(self, links, kName); !s) return s;
    const LinkConfig* first = *link;
    auto addresses = transport::resolve_host(first->host_of(self), first->port, true);
    if (!addresses) return addresses.status();
    Status last = Status(StatusCode::kNotFound, "no address");
    for (const sockaddr_storage& addr : *addresses) {
      UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) {
        last = io_error("socket", errno);
        continue;
      }
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      const socklen_t len = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0 ||
          ::listen(fd.get(), kListenBacklog) != 0) {
        last = io_error("bind/listen on " + sockaddr_text(addr), errno);
        continue;
      }
      sockaddr_storage bound{};
      socklen_t bound_len = sizeof bound;
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
      const std::string endpoint = sockaddr_text(bound);
      const uint16_t port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
      UniqueFd ready(::epoll_create1(EPOLL_CLOEXEC));
      epoll_event ev{};
      ev.events = EPOLLIN;
      if (!ready.valid() || ::epoll_ctl(ready.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0)
        return io_error("epoll for the tcp listener on " + endpoint, errno);
      auto tls = listener_tls(self, links);
      if (!tls) return tls.status();
      FJORD_LOG_INFO("node %u: tcp listening on %s%s", self, endpoint.c_str(),
                     *tls ? (", TLS with " + (*tls)->certificate_path()).c_str() : "");
      return std::unique_ptr<Listener>(
          new TcpListener(self, links, std::move(fd), std::move(ready), port, endpoint, std::move(tls).value()));
    }
    return last;
  }

  Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) override {
    FJORD_ASSERT(link.type == kName);
    FJORD_ASSERT(link.involves(self));
    const NodeId server = link.server_node;
    if (server == self)
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " is the server of " + link.describe());
    if (Status s = transport::check_connect_port(link); !s) return s;
    auto key = transport::own_key(link, self);  // a key file problem is found before dialling
    if (!key) return key.status();
    auto addresses = transport::resolve_host(link.host_of(server), link.port);
    if (!addresses) return addresses.status();
    Status last = Status(StatusCode::kNotFound, "no address");
    for (const sockaddr_storage& addr : *addresses) {
      auto fd = connect_one(addr, deadline);
      if (!fd) {
        last = fd.status();
        continue;
      }
      if (Status s = set_socket_options(fd->get(), link); !s) return s;
      // The listener's greeting comes in the clear, before any TLS.
      std::optional<transport::AuthNonce> greeting;
      if (requires_tls(link)) {
        auto read = transport::recv_greeting(fd->get(), deadline);
        if (!read) return read.status();
        greeting = *read;
      }
      auto tls =
          connect_tls(self, link, fd->get(), deadline, "node " + std::to_string(server) + " at " + sockaddr_text(addr));
      if (!tls) return tls.status();
      std::optional<transport::HandshakeStreamScope> through_tls;
      if (*tls) through_tls.emplace(fd->get(), **tls);
      transport::HandshakeRequest request{self, server, std::string(kName), {}, link.checksum};
      auto reply = transport::client_handshake(fd->get(), request, key->has_value() ? &**key : nullptr, deadline,
                                               greeting ? &*greeting : nullptr);
      if (!reply) return reply.status();
      FJORD_LOG_INFO("node %u: connected %s to node %u at %s%s", self, link.describe().c_str(), server,
                     sockaddr_text(addr).c_str(), *tls ? " with TLS" : "");
      return make_transporter(link, self, std::move(fd).value(), std::move(tls).value());
    }
    return last;
  }

 private:
  static Result<UniqueFd> connect_one(const sockaddr_storage& addr, DeadlineNs deadline) {
    UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return io_error("socket", errno);
    const socklen_t len = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS)
      return io_error("connect to " + sockaddr_text(addr), errno);
    for (;;) {
      pollfd p{fd.get(), POLLOUT, 0};
      const uint64_t now = monotonic_ns();
      if (now >= deadline) return Status(StatusCode::kTimeout, "connect to " + sockaddr_text(addr) + " timed out");
      const int rc = ::poll(&p, 1, static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 1000)));
      if (rc > 0) break;
      if (rc < 0 && errno != EINTR) return io_error("poll", errno);
    }
    int err = 0;
    socklen_t err_len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) return io_error("connect to " + sockaddr_text(addr), err);
    return fd;
  }
};

}  // namespace

Status register_tcp_transporter(transport::TransporterRegistry& registry) {
  return registry.add(std::make_unique<TcpFactory>());
}

}  // namespace fjord::tcp
