// SHM set-up: the factory, the listener on abstract Unix sockets, connect,
// the peer-uid check, and passing the segment and eventfds with SCM_RIGHTS.
// Slow path: blocking with deadlines, allocates freely.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "fd_passing.h"
#include "fjord/base/acceptor.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/base/unix_address.h"
#include "fjord/shm/shm.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/pending_handshakes.h"
#include "shm_transporter.h"

namespace fjord::shm {
namespace {

using config::Kind;
using config::ParamSpec;
using transport::LinkConfig;
using transport::LinkTable;
using transport::Listener;
using transport::Transporter;

constexpr std::string_view kName = "shm";
constexpr std::size_t kLayoutExtraBytes = 12;  // u32 layout version, u64 ring bytes
// Connections the kernel queues while the listener's thread is busy: room
// for a burst, so that a well-behaved client's connect does not find the
// queue full and retry.
constexpr int kListenBacklog = 1024;

const ParamSpec kShmParams[] = {
    {"ShmKey", Kind::kUint, 0, UINT64_MAX, "0", false,
     "endpoint: the server listens on the abstract Unix socket @fjord-shm-<ShmKey>; 0 = @fjord-shm-<node1>-<node2>"},
    {"ShmSize", Kind::kBytes, 64 << 10, 1ULL << 30, "4M", false,
     "bytes of each one-way ring (rounded up to whole pages); at least two maximal frames"},
    {"ShmSpintime", Kind::kUint, 0, 2000, "0", false,
     "microseconds a receiver spins on an empty ring before it sleeps on the futex"},
};

// The abstract socket name (no leading NUL) of a link's server end.
std::string socket_name(const LinkConfig& link) {
  const uint64_t key = link.params.get_uint("ShmKey");
  if (key != 0) return "fjord-shm-" + std::to_string(key);
  return "fjord-shm-" + std::to_string(std::min(link.node1, link.node2)) + "-" +
         std::to_string(std::max(link.node1, link.node2));
}

// @name's address; the names are made here (socket_name) and always fit.
socklen_t abstract_address(const std::string& name, sockaddr_un& addr) {
  const socklen_t len = unix_address("@" + name, addr);
  FJORD_ASSERT(len != 0);
  return len;
}

std::size_t ring_bytes_of(const LinkConfig& link) { return round_up_to_pages(link.params.get_uint("ShmSize")); }

Result<ucred> peer_credentials(int socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return io_error("SO_PEERCRED", errno);
  return cred;
}

std::string uid_mismatch(const std::string& who, uid_t theirs) {
  return who + " runs as uid " + std::to_string(theirs) + " but this process runs as uid " +
         std::to_string(::geteuid()) + ": shared-memory links join processes of one user only";
}

std::vector<std::byte> encode_layout(std::size_t ring_bytes) {
  std::vector<std::byte> out(kLayoutExtraBytes);
  const uint32_t version = kLayoutVersion;
  const uint64_t bytes = ring_bytes;
  std::memcpy(out.data(), &version, 4);
  std::memcpy(out.data() + 4, &bytes, 8);
  return out;
}

Result<std::size_t> decode_layout(std::span<const std::byte> extra) {
  if (extra.size() != kLayoutExtraBytes)
    return Status(StatusCode::kProtocolError, "shm accept carries " + std::to_string(extra.size()) +
                                                  " layout bytes, expected " + std::to_string(kLayoutExtraBytes));
  uint32_t version = 0;
  uint64_t bytes = 0;
  std::memcpy(&version, extra.data(), 4);
  std::memcpy(&bytes, extra.data() + 4, 8);
  if (version != kLayoutVersion)
    return Status(StatusCode::kRejected, "the server uses shm layout " + std::to_string(version) +
                                             ", this node speaks " + std::to_string(kLayoutVersion));
  if (bytes < 2 * frame::kMaxFrameBytes || bytes > (1ULL << 30) || bytes % page_size() != 0)
    return Status(StatusCode::kProtocolError, "the server announced rings of " + std::to_string(bytes) + " bytes");
  return static_cast<std::size_t>(bytes);
}

Result<UniqueFd> make_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) return io_error("eventfd", errno);
  return fd;
}

// The server's half after the handshake accepted the request: create the
// segment and eventfds, accept, pass them, build the transporter.
Result<std::unique_ptr<Transporter>> serve_link(const transport::AcceptedRequest& accepted, NodeId self, UniqueFd conn,
                                                DeadlineNs deadline) {
  const LinkConfig& link = *accepted.link;
  auto segment = Segment::create(ring_bytes_of(link));
  if (!segment) return segment.status();
  auto client_event = make_eventfd();  // the client sleeps on it; we write it
  if (!client_event) return client_event.status();
  auto server_event = make_eventfd();  // we sleep on it; the client writes it
  if (!server_event) return server_event.status();
  if (Status s = transport::send_accept(conn.get(), accepted, encode_layout(segment->ring_bytes()), deadline); !s)
    return s;
  const int fds[] = {segment->memfd(), client_event->get(), server_event->get()};
  if (Status s = send_fds(conn.get(), fds, deadline); !s) return s;
  segment->close_memfd();
  ShmTransporter::Resources r;
  r.side = kServerSide;
  r.life_line = std::move(conn);
  r.segment = std::move(segment).value();
  r.receive_event = std::move(server_event).value();
  r.send_event = std::move(client_event).value();
  return ShmTransporter::create(link, self, std::move(r));
}

class ShmListener final : public Listener {
 public:
  struct Endpoint {
    std::string name;  // abstract socket name, no leading NUL
    UniqueFd socket;
  };

  ShmListener(NodeId self, LinkTable links, std::vector<Endpoint> endpoints, UniqueFd epoll)
      : self_(self),
        links_(std::move(links)),
        endpoints_(std::move(endpoints)),
        epoll_(std::move(epoll)),
        acceptor_("node " + std::to_string(self) + ": shm listener on " + endpoint()),
        pending_(epoll_.get(), "shm listener on " + endpoint()) {}

  int fd() const override { return epoll_.get(); }
  std::string endpoint() const override {
    std::string out;
    for (const Endpoint& e : endpoints_) out += (out.empty() ? "@" : ", @") + e.name;
    return out;
  }

  // Connections are accepted as they come and wait in pending_ until their
  // handshake request is all there: a process that connects and says
  // nothing holds up no other (transport/pending_handshakes.h).
  Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) override {
    for (;;) {
      for (uint32_t i = 0; i < endpoints_.size(); ++i) take_waiting(i, deadline);
      const uint64_t now = monotonic_ns();
      if (auto ready = pending_.take_ready(now)) return handle(std::move(*ready));
      if (now >= deadline) return Status(StatusCode::kTimeout, "no connection attempt on " + endpoint());
      const uint64_t until = std::min(deadline, pending_.next_deadline());
      epoll_event events[8];
      (void)::epoll_wait(epoll_.get(), events, 8,
                         static_cast<int>(std::min<uint64_t>((until > now ? until - now : 0) / 1'000'000 + 1, 1000)));
    }
  }

 private:
  // At most kMaxPending a call: under a flood of connections the caller
  // still gets to the ones whose requests are in.
  void take_waiting(uint32_t index, DeadlineNs deadline) {
    const Endpoint& e = endpoints_[index];
    for (std::size_t taken = 0; taken < transport::PendingHandshakes::kMaxPending; ++taken) {
      UniqueFd conn = acceptor_.take(e.socket.get());
      if (!conn.valid()) return;
      auto cred = peer_credentials(conn.get());
      const std::string peer =
          cred ? "pid " + std::to_string(cred->pid) + " (uid " + std::to_string(cred->uid) + ") on @" + e.name
               : "a process on @" + e.name;
      // A peer already gone fails its greeting; it waits all the same, and
      // its handshake reports it (no proof can be made over a nonce never sent).
      auto greeting = transport::send_greeting(conn.get());
      // The peer is here: its set-up gets its own budget, not what is left
      // of this accept() slice. The bounds count by uid, so another user's
      // connections never take the slots of this user's nodes.
      const std::string source = cred ? "uid " + std::to_string(cred->uid) : "uid ?";
      (void)pending_.add({std::move(conn), peer, index, transport::setup_deadline(deadline), source,
                          greeting ? *greeting : transport::random_nonce()},
                         monotonic_ns());
    }
  }

  Result<std::unique_ptr<Transporter>> handle(transport::PendingHandshakes::Entry ready) {
    const Endpoint& endpoint = endpoints_[ready.endpoint];
    UniqueFd conn = std::move(ready.conn);
    const std::string& peer = ready.peer;
    const DeadlineNs deadline = ready.deadline;
    auto cred = peer_credentials(conn.get());
    if (!cred) return cred.status();
    auto accepted = transport::server_handshake(conn.get(), self_, kName, links_, deadline, peer, ready.greeting);
    if (!accepted) return accepted.status();
    const LinkConfig& link = *accepted->link;
    const NodeId client = link.peer_of(self_);
    if (socket_name(link) != endpoint.name)
      return transport::send_reject(conn.get(), kName, peer,
                                    "node " + std::to_string(client) + " connected on @" + endpoint.name + " but " +
                                        link.describe() + " listens on @" + socket_name(link) +
                                        " (check ShmKey on both sides)",
                                    deadline);
    if (cred->uid != ::geteuid())
      return transport::send_reject(
          conn.get(), kName, peer,
          uid_mismatch("node " + std::to_string(client) + " (pid " + std::to_string(cred->pid) + ")", cred->uid),
          deadline);
    auto transporter = serve_link(*accepted, self_, std::move(conn), deadline);
    if (transporter)
      FJORD_LOG_INFO("node %u: accepted %s from node %u (pid %d) on @%s, rings of %s", self_, link.describe().c_str(),
                     client, static_cast<int>(cred->pid), endpoint.name.c_str(),
                     config::format_bytes(ring_bytes_of(link)).c_str());
    return transporter;
  }

  NodeId self_;
  LinkTable links_;
  std::vector<Endpoint> endpoints_;
  UniqueFd epoll_;
  Acceptor acceptor_;
  transport::PendingHandshakes pending_;
};

// Binds and listens on @name. A name already bound is an error naming the
// link and the process that holds it: another user's process squatting the
// name, or one of this user's (a node still running, another link with the
// same ShmKey).
Result<UniqueFd> listen_abstract(const std::string& name, const LinkConfig& link) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return io_error("socket AF_UNIX", errno);
  sockaddr_un addr{};
  const socklen_t len = abstract_address(name, addr);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno == EADDRINUSE)
      return Status(StatusCode::kAlreadyExists, unix_name_taken("@" + name, "the shm endpoint of " + link.describe()) +
                                                    " (each link needs its own ShmKey)");
    return io_error("bind @" + name, errno);
  }
  if (::listen(fd.get(), kListenBacklog) != 0) return io_error("listen on @" + name, errno);
  return fd;
}

// The client's connect to @name, retried while the listener's backlog is full.
Result<UniqueFd> connect_abstract(const std::string& name, NodeId server, DeadlineNs deadline) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return io_error("socket AF_UNIX", errno);
  sockaddr_un addr{};
  const socklen_t len = abstract_address(name, addr);
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) return fd;
    if (errno == EINTR) continue;
    if (errno == ECONNREFUSED || errno == ENOENT)
      return Status(StatusCode::kUnavailable,
                    "nothing listens on @" + name + " (is node " + std::to_string(server) + " up?)");
    if (errno != EAGAIN) return io_error("connect to @" + name, errno);
    if (monotonic_ns() >= deadline) return Status(StatusCode::kTimeout, "connect to @" + name + " timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // backlog full: the server is busy accepting
  }
}

class ShmFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "shared memory between processes on one host (memfd rings, futex/eventfd wake-up)";
  }
  std::span<const ParamSpec> parameters() const override { return kShmParams; }

  Status validate(const LinkConfig& link) const override {
    const uint64_t size = link.params.get_uint("ShmSize");
    if (size < 2 * frame::kMaxFrameBytes)
      return Status(StatusCode::kInvalidArgument, "ShmSize=" + config::format_bytes(size) +
                                                      " cannot hold two frames of the largest size (" +
                                                      config::format_bytes(2 * frame::kMaxFrameBytes) + ")");
    return Status::ok();
  }

  Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) override {
    if (Status s = transport::check_own_keys(self, links, kName); !s) return s;
    std::vector<ShmListener::Endpoint> endpoints;
    UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll.valid()) return io_error("epoll_create1", errno);
    for (const LinkConfig* link : links.links_of(self)) {
      if (link->type != kName || link->server_node != self) continue;
      const std::string name = socket_name(*link);
      for (const auto& e : endpoints)
        if (e.name == name)
          return Status(StatusCode::kInvalidArgument, "two shm links of node " + std::to_string(self) +
                                                          " share the endpoint @" + name + "; give " +
                                                          link->describe() + " its own ShmKey");
      auto fd = listen_abstract(name, *link);
      if (!fd) return fd.status();
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.fd = fd->get();
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd->get(), &event) != 0) return io_error("epoll_ctl", errno);
      FJORD_LOG_INFO("node %u: shm listening on @%s for %s", self, name.c_str(), link->describe().c_str());
      endpoints.push_back({name, std::move(fd).value()});
    }
    if (endpoints.empty()) return Status(StatusCode::kNotFound, "node " + std::to_string(self) + " serves no shm link");
    return std::unique_ptr<Listener>(new ShmListener(self, links, std::move(endpoints), std::move(epoll)));
  }

  Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) override {
    FJORD_ASSERT(link.type == kName);
    FJORD_ASSERT(link.involves(self));
    const NodeId server = link.server_node;
    if (server == self)
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " is the server of " + link.describe());
    auto key = transport::own_key(link, self);  // a key file problem is found before dialling
    if (!key) return key.status();
    const std::string name = socket_name(link);
    auto conn = connect_abstract(name, server, deadline);
    if (!conn) return conn.status();
    transport::HandshakeRequest request{self, server, std::string(kName), {}, link.checksum};
    auto reply = transport::client_handshake(conn->get(), request, key->has_value() ? &**key : nullptr, deadline);
    if (!reply) return reply.status();
    // The server checked our uid before accepting (and told us why if not);
    // check its uid too before mapping anything it sends.
    auto cred = peer_credentials(conn->get());
    if (!cred) return cred.status();
    if (cred->uid != ::geteuid())
      return Status(
          StatusCode::kRejected,
          uid_mismatch("the process listening on @" + name + " (pid " + std::to_string(cred->pid) +
                           ", another user's process holding the name of node " + std::to_string(server) + ")",
                       cred->uid));
    auto ring_bytes = decode_layout(reply->extra);
    if (!ring_bytes) return ring_bytes.status();
    UniqueFd fds[3];  // segment, our eventfd, the server's eventfd
    if (Status s = receive_fds(conn->get(), fds, deadline); !s) return s;
    auto segment = Segment::attach(std::move(fds[0]), *ring_bytes);
    if (!segment) return segment.status();
    segment->close_memfd();
    FJORD_LOG_INFO("node %u: connected %s to node %u on @%s, rings of %s", self, link.describe().c_str(), server,
                   name.c_str(), config::format_bytes(*ring_bytes).c_str());
    ShmTransporter::Resources r;
    r.side = kClientSide;
    r.life_line = std::move(conn).value();
    r.segment = std::move(segment).value();
    r.receive_event = std::move(fds[1]);
    r.send_event = std::move(fds[2]);
    return ShmTransporter::create(link, self, std::move(r));
  }
};

}  // namespace

Status register_shm_transporter(transport::TransporterRegistry& registry) {
  return registry.add(std::make_unique<ShmFactory>());
}

}  // namespace fjord::shm
