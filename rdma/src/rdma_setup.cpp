// RDMA set-up: the factory, its parameters, the listener, connect, and the
// handshake over rdma_cm. Slow path: blocking with deadlines, allocates.
//
// Handshake (docs/rdma.md): the client's HandshakeRequest, with its RingInfo
// as extra bytes, travels in the rdma_cm connect private data (56 bytes on
// IB/RoCE: it fits). The server checks it against its link table before it
// allocates anything the link's size depends on, accepts the connection in
// every case with its greeting (a fresh nonce) as the accept's private data,
// and answers the client's hello (which carries the client's proof of the
// cluster key over that nonce, when the link has keys) with its
// HandshakeReply (its RingInfo and proof, or the full reason for a refusal,
// which would not fit a CM reject) as the first SEND on the new queue pair;
// a refused peer is then disconnected. Keys add no message and no round
// trip here.
//
// accept()'s deadline bounds the wait for a connect request, not the set-up
// of one already taken: that runs to its end (or fails with its reason)
// within kServerSetupNs, so a caller polling with short deadlines never
// tears a half-made connection down under its client (docs/rdma.md).
#include <arpa/inet.h>
#include <ifaddrs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/rdma/rdma.h"
#include "fjord/transport/handshake.h"
#include "fjord/transport/ip_address.h"
#include "rdma_transporter.h"

namespace fjord::rdma {
namespace {

using config::Kind;
using config::ParamSpec;
using transport::check_peer_address;
using transport::LinkConfig;
using transport::LinkTable;
using transport::Listener;
using transport::resolve_host;
using transport::sockaddr_text;
using transport::Transporter;

constexpr std::string_view kName = "rdma";
constexpr int kResolveTimeoutMs = 2000;
// How long the server may take to set up a connection it has taken off the
// listener channel, whatever is left of accept()'s deadline. A healthy
// set-up is a few round trips (milliseconds; tens of them in the emulated
// guest); a client that gives up or dies ends it at once with a CM event
// (reject, disconnect). Only a peer that falls silent halfway keeps the
// listener this long.
constexpr uint64_t kServerSetupNs = 10'000'000'000ULL;

// delay_handshake_replies(): a test seam, 0 in production.
std::atomic<uint64_t> g_reply_delay_ns{0};

// A set-up that had begun and then failed, with `prefix` (link, device,
// peer) in front: never kTimeout, which accept() returns only when no
// connection attempt was waiting (callers poll on it).
Status setup_failed(const std::string& prefix, const Status& s) {
  const StatusCode code = s.code() == StatusCode::kTimeout ? StatusCode::kLinkDown : s.code();
  return Status(code, prefix + s.message());
}

const ParamSpec kRdmaParams[] = {
    {"RdmaDevice", Kind::kString, 0, 64, "", false,
     "verbs device (rxe0, mlx5_0); empty = the device that holds HostName's address"},
    {"RdmaPort", Kind::kUint, 1, 255, "1", false, "device port the link must use"},
    {"GidIndex", Kind::kUint, 0, 255, "1", false,
     "GID table entry named in messages (RoCE v2 over IPv4 is 1 on rxe); rdma_cm picks the GID of HostName"},
    {"ReceiveBufferMemory", Kind::kBytes, 64 << 10, 1ULL << 30, "2M", false,
     "receive ring; each direction's ring is min(SendBufferMemory, ReceiveBufferMemory)"},
    {"QueueDepth", Kind::kUint, 16, 4096, "256", false, "send-queue slots, and receives kept posted for wake-ups"},
    {"InlineThreshold", Kind::kBytes, 0, 1024, "256", false,
     "RDMA WRITEs up to this many bytes are posted inline (capped by the device)"},
    {"RdmaSpintime", Kind::kUint, 0, 1'000'000, "100", false,
     "microseconds a receiver busy-polls before sleeping on the completion channel"},
    {"ListenAnyAddress", Kind::kBool, 0, 1, "false", false,
     "the server end listens on every address of every RDMA device, not only its HostName's (clients still "
     "connect to HostName)"},
};

// Waits for one specific rdma_cm event; anything else is the error.
Result<CmEvent> wait_event(rdma_event_channel* channel, rdma_cm_event_type wanted, DeadlineNs deadline,
                           const std::string& what) {
  auto e = next_event(channel, deadline);
  if (!e) return Status(e.status().code(), what + ": " + e.status().message());
  if (e->type == wanted) return e;
  const StatusCode code = e->type == RDMA_CM_EVENT_REJECTED ? StatusCode::kRejected : StatusCode::kUnavailable;
  return Status(code, what + ": " + event_text(*e));
}

Status expect_event(rdma_event_channel* channel, rdma_cm_event_type wanted, DeadlineNs deadline,
                    const std::string& what) {
  auto e = wait_event(channel, wanted, deadline, what);
  return e ? Status::ok() : e.status();
}

// The client's hello: the magic, then its proof of the cluster key when it
// holds one. Repeats (iWARP) are the bare magic: they land in data
// receives, whose buffers hold a doorbell.
constexpr std::size_t kHelloProofBytes = sizeof(kHelloMagic) + transport::kClientProofBytes;

std::vector<std::byte> hello_bytes(const transport::HandshakeRequest& request) {
  std::vector<std::byte> out(request.proof ? kHelloProofBytes : sizeof(kHelloMagic));
  std::memcpy(out.data(), &kHelloMagic, sizeof kHelloMagic);
  if (request.proof) {
    std::memcpy(out.data() + sizeof kHelloMagic, request.proof->nonce.data(), transport::kAuthNonceBytes);
    std::memcpy(out.data() + sizeof kHelloMagic + transport::kAuthNonceBytes, request.proof->mac.data(),
                transport::kAuthMacBytes);
  }
  return out;
}

// The proof a hello carries (nullopt: none), or a protocol error.
Result<std::optional<transport::ClientProof>> hello_proof(std::span<const std::byte> hello) {
  uint32_t magic = 0;
  if (hello.size() >= sizeof magic) std::memcpy(&magic, hello.data(), sizeof magic);
  if (magic != kHelloMagic || (hello.size() != sizeof magic && hello.size() != kHelloProofBytes))
    return Status(StatusCode::kProtocolError, "the peer's first message is not a fjord hello");
  if (hello.size() == sizeof magic) return std::optional<transport::ClientProof>();
  transport::ClientProof proof;
  std::memcpy(proof.nonce.data(), hello.data() + sizeof magic, transport::kAuthNonceBytes);
  std::memcpy(proof.mac.data(), hello.data() + sizeof magic + transport::kAuthNonceBytes, transport::kAuthMacBytes);
  return std::optional<transport::ClientProof>(proof);
}

// The greeting the server's accept carried (IB pads private data: the
// message's own length bounds it).
Result<transport::AuthNonce> greeting_of(const CmEvent& established) {
  const std::span<const std::byte> data(established.private_data, established.private_data_len);
  auto total = transport::handshake_message_bytes(data, transport::kHandshakeGreetingMagic);
  if (!total) return Status(total.status().code(), "the server's accept: " + total.status().message());
  if (*total > data.size())
    return Status(StatusCode::kProtocolError, "the server's accept carries a truncated greeting");
  return transport::decode_greeting(data.first(*total));
}

std::vector<std::byte> ring_info_bytes(const LinkResources& r) {
  std::vector<std::byte> out(wire::kRingInfoBytes);
  wire::encode_ring_info(r.ring_info(), std::span<std::byte, wire::kRingInfoBytes>(out.data(), out.size()));
  return out;
}

// The peer's RingInfo, checked against what this end computed from its own
// copy of the link's configuration.
Result<wire::RingInfo> peer_ring_info(std::span<const std::byte> extra, const LinkParams& mine, NodeId peer) {
  auto info = wire::decode_ring_info(extra);
  if (!info) return Status(StatusCode::kProtocolError, "node " + std::to_string(peer) + " sent no ring description");
  if (info->ring_bytes != mine.ring_bytes)
    return Status(StatusCode::kRejected,
                  "ring sizes differ: node " + std::to_string(peer) + " has " + config::format_bytes(info->ring_bytes) +
                      ", this node " + config::format_bytes(mine.ring_bytes) +
                      " (min of SendBufferMemory and ReceiveBufferMemory must agree on both ends)");
  if (info->queue_depth < 16 || info->queue_depth > 4096)
    return Status(StatusCode::kProtocolError,
                  "node " + std::to_string(peer) + " sent queue depth " + std::to_string(info->queue_depth));
  return *info;
}

class RdmaListener final : public Listener {
 public:
  RdmaListener(NodeId self, const LinkTable& links, CmChannel channel, CmId id, uint16_t port, std::string endpoint)
      : self_(self),
        links_(links),
        channel_(std::move(channel)),
        id_(std::move(id)),
        port_(port),
        endpoint_(std::move(endpoint)) {}

  int fd() const override { return channel_->fd; }
  std::string endpoint() const override { return endpoint_; }
  uint16_t port() const override { return port_; }

  Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) override {
    for (;;) {
      auto e = next_event(channel_.get(), deadline);
      if (!e) {
        if (e.status().code() == StatusCode::kTimeout)
          return Status(StatusCode::kTimeout, "no connection attempt on " + endpoint_);
        return e.status();
      }
      // From here the client is committed: it creates its queue pair, and
      // sends its hello as soon as it sees ESTABLISHED. Abandoning the
      // set-up at the caller's deadline would destroy our queue pair under
      // that hello (the client then reads "remote operation error", a flush
      // or a disconnect, and fails), while telling the caller kTimeout,
      // "nobody was waiting".
      if (e->type == RDMA_CM_EVENT_CONNECT_REQUEST)
        return serve(*e, std::max<DeadlineNs>(deadline, monotonic_ns() + kServerSetupNs));
      if (e->type == RDMA_CM_EVENT_DEVICE_REMOVAL)
        return Status(StatusCode::kUnavailable, "the RDMA device of " + endpoint_ + " was removed");
      FJORD_LOG_DEBUG("rdma listener %s: ignoring %s", endpoint_.c_str(), event_text(*e).c_str());
    }
  }

 private:
  // Decides on one connect request: the matched link, or why not.
  struct Decision {
    const LinkConfig* link = nullptr;
    transport::HandshakeRequest request;
    LinkParams params;
    wire::RingInfo peer;
    Status refusal;
    std::optional<transport::AuthMac> proof;  // for the accepting reply
  };

  Decision decide(const CmEvent& request_event, const sockaddr* from) const {
    Decision d;
    const std::span<const std::byte> data(request_event.private_data, request_event.private_data_len);
    auto total = transport::handshake_message_bytes(data, transport::kHandshakeRequestMagic);
    auto request = total && *total <= data.size() ? transport::decode_request(data.first(*total))
                                                  : Result<transport::HandshakeRequest>(total.status());
    if (!request) {
      d.refusal = request.status();
      return d;
    }
    auto checked = transport::check_request(*request, self_, kName, links_);
    if (!checked) {
      d.refusal = checked.status();
      return d;
    }
    const LinkConfig& link = **checked;
    if (Status s = transport::check_key_presence(*request, link, self_); !s) {
      d.refusal = s;
      return d;
    }
    if (Status s = check_peer_address(link, link.peer_of(self_), from); !s) {
      d.refusal = s;
      return d;
    }
    d.params = link_params(link);
    auto peer = peer_ring_info(request->extra, d.params, link.peer_of(self_));
    if (!peer) {
      d.refusal = peer.status();
      return d;
    }
    d.link = &link;
    d.request = std::move(request).value();
    d.peer = *peer;
    return d;
  }

  // Reads the client's hello and checks its proof against `greeting`; a
  // failed proof turns `d` into a refusal (the reply then says why).
  Status take_hello(LinkResources& r, Decision& d, const transport::AuthNonce& greeting, DeadlineNs deadline) {
    auto hello = receive_bootstrap(r, deadline, "the client's hello");
    if (!hello) return hello.status();
    auto proof = hello_proof(*hello);
    if (!proof) return proof.status();
    if (!d.link) return Status::ok();
    auto checked = transport::check_client_proof(d.request, *proof, greeting, *d.link, self_);
    if (checked) {
      d.proof = *checked;
      return Status::ok();
    }
    d.refusal = checked.status();
    d.link = nullptr;
    return Status::ok();
  }

  // The answer to the hello: the accepting reply, or the refusal's reason.
  std::vector<std::byte> reply_bytes(const Decision& d, const LinkResources& r) const {
    transport::HandshakeReply reply;
    reply.accepted = d.link != nullptr;
    if (d.link) {
      reply.extra = ring_info_bytes(r);
      reply.proof = d.proof;
    } else {
      reply.code = d.refusal.code() == StatusCode::kInvalidArgument ? StatusCode::kRejected : d.refusal.code();
      reply.reason = transport::refusal_for_peer(d.refusal, self_);
    }
    return transport::encode_reply(reply);
  }

  // Sets up the connection `request_event` asks for, by `deadline` (the
  // set-up's own, see accept()); every error names the link (or the peer, if
  // refused), the device, port and GID, and the peer's address.
  Result<std::unique_ptr<Transporter>> serve(const CmEvent& request_event, DeadlineNs deadline) {
    CmId id(request_event.id);  // the new connection's id is ours from here on
    const std::string peer = sockaddr_text(rdma_get_peer_addr(id.get()));
    Decision d = decide(request_event, rdma_get_peer_addr(id.get()));
    if (!d.link) {  // a refusal still gets a queue pair, just big enough to carry the reason
      d.params.port = id->port_num;
      d.params.gid_index = 1;
    }
    const std::string link_name = d.link ? d.link->describe() : "refused rdma connection from " + peer;
    const auto prefix_at = [&](const std::string& where) {
      return d.link ? link_name + " [" + where + "]: connection from " + peer + ": "
                    : "rdma connection from " + peer + " [" + where + "]: ";
    };
    const std::string early_prefix = prefix_at(describe_device(id.get(), d.params.gid_index));
    if (!d.link && d.refusal.code() == StatusCode::kProtocolError) {
      // Not a fjord peer: no reply it could read; refuse at the CM level.
      rdma_reject(id.get(), nullptr, 0);
      FJORD_LOG_WARN("node %u: rejected rdma connection from %s: %s", self_, peer.c_str(), d.refusal.message().c_str());
      return Status(StatusCode::kRejected, "rejected " + early_prefix + d.refusal.message());
    }
    auto channel = make_channel();
    if (!channel) return setup_failed(early_prefix, channel.status());
    if (rdma_migrate_id(id.get(), channel->get()) != 0)
      return setup_failed(early_prefix, io_error("rdma_migrate_id", errno));
    auto res = create_resources(std::move(channel).value(), std::move(id), d.params, link_name, d.link == nullptr);
    if (!res) return res.status();  // names link and device already
    LinkResources& r = **res;
    const std::string prefix = prefix_at(r.where);
    // The client's hello arrives first, so its receive goes first; the data
    // receives behind it take any hello the client repeats (iWARP). A
    // refused peer gets receives too, for the same reason.
    if (Status s = post_bootstrap_receive(r); !s) return setup_failed(prefix, s);
    if (Status s = post_data_receives(r, 0, r.params.queue_depth); !s) return setup_failed(prefix, s);
    const transport::AuthNonce greeting = transport::random_nonce();
    const std::vector<std::byte> greeting_bytes = transport::encode_greeting(greeting);
    rdma_conn_param param{};
    param.private_data = greeting_bytes.data();
    param.private_data_len = static_cast<uint8_t>(greeting_bytes.size());
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    if (rdma_accept(r.id.get(), &param) != 0) return setup_failed(prefix, io_error("rdma_accept", errno));
    if (Status s = expect_event(r.channel.get(), RDMA_CM_EVENT_ESTABLISHED, deadline, "waiting for ESTABLISHED"); !s)
      return setup_failed(prefix, s);
    // Answer only once the client has spoken: on iWARP a SEND before the
    // initiator's first message breaks the MPA start-up.
    if (Status s = take_hello(r, d, greeting, deadline); !s)
      return s.code() == StatusCode::kProtocolError ? Status(s.code(), prefix + s.message()) : setup_failed(prefix, s);
    if (const uint64_t delay_ns = g_reply_delay_ns.load(std::memory_order_relaxed); delay_ns > 0)
      std::this_thread::sleep_for(std::chrono::nanoseconds(delay_ns));
    if (Status s = send_bootstrap(r, reply_bytes(d, r), "the handshake reply", deadline); !s)
      return setup_failed(prefix, s);
    if (!d.link) {
      FJORD_LOG_WARN("node %u: rejected rdma connection from %s: %s", self_, peer.c_str(), d.refusal.message().c_str());
      rdma_disconnect(r.id.get());
      return Status(StatusCode::kRejected, "rejected rdma connection from " + peer + ": " + d.refusal.message());
    }
    FJORD_LOG_INFO("node %u: accepted %s from node %u at %s [%s]", self_, d.link->describe().c_str(),
                   d.link->peer_of(self_), peer.c_str(), r.where.c_str());
    return std::unique_ptr<Transporter>(new RdmaTransporter(*d.link, self_, std::move(res).value(), d.peer));
  }

  NodeId self_;
  LinkTable links_;
  CmChannel channel_;
  CmId id_;
  uint16_t port_;
  std::string endpoint_;
};

Result<CmId> create_id(rdma_event_channel* channel) {
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel, &raw, nullptr, RDMA_PS_TCP) != 0) return io_error("rdma_create_id", errno);
  return CmId(raw);
}

// Client: address and route resolution, from the configured local address
// (so the server's peer-address check sees it; 0.0.0.0 lets the route
// choose) to the server's.
Result<CmId> resolve_route(rdma_event_channel* channel, const LinkConfig& link, NodeId self, DeadlineNs deadline) {
  const NodeId server = link.server_node;
  auto dst = resolve_host(link.host_of(server), link.port);
  if (!dst) return dst.status();
  auto src = resolve_host(link.host_of(self), 0);
  if (!src) return src.status();
  auto id = create_id(channel);
  if (!id) return id.status();
  sockaddr_storage& to = dst->front();
  sockaddr_storage* from = nullptr;  // none, or a wildcard: the route to the server picks the device
  for (sockaddr_storage& s : *src)
    if (s.ss_family == to.ss_family && !transport::is_any_address(reinterpret_cast<sockaddr*>(&s))) from = &s;
  const std::string target = sockaddr_text(reinterpret_cast<sockaddr*>(&to));
  if (rdma_resolve_addr(id->get(), reinterpret_cast<sockaddr*>(from), reinterpret_cast<sockaddr*>(&to),
                        kResolveTimeoutMs) != 0)
    return Status(StatusCode::kUnavailable,
                  link.describe() + ": rdma_resolve_addr " + target + ": " + std::strerror(errno));
  if (Status s = expect_event(channel, RDMA_CM_EVENT_ADDR_RESOLVED, deadline,
                              link.describe() + ": resolving " + target + " to an RDMA device");
      !s)
    return s;
  if (rdma_resolve_route(id->get(), kResolveTimeoutMs) != 0)
    return Status(StatusCode::kUnavailable, link.describe() + ": rdma_resolve_route " + target + " [" +
                                                describe_device(id->get(), 1) + "]: " + std::strerror(errno));
  if (Status s = expect_event(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline,
                              link.describe() + ": route to " + target + " [" + describe_device(id->get(), 1) + "]");
      !s)
    return s;
  return id;
}

// Client: the hello, then the server's reply. siw's passive side reports
// ESTABLISHED before it hands the socket to the queue pair, and a hello that
// lands in between waits in the socket until more data comes; on iWARP the
// hello is therefore sent again when no reply came within kHelloRepeatNs, at
// most kMaxHelloRepeats times, each logged. A repeat lands in one of the
// server's data receives: r.peer_receives_used counts them for the data path.
Result<std::span<const std::byte>> say_hello(LinkResources& r, std::span<const std::byte> hello,
                                             const std::string& prefix, DeadlineNs deadline) {
  for (uint32_t sent = 1;; ++sent) {
    const std::span<const std::byte> message = sent == 1 ? hello : hello.first(sizeof kHelloMagic);
    if (Status s = send_bootstrap(r, message, "the hello", deadline, true); !s) return s;
    r.peer_receives_used = sent - 1;
    const bool may_repeat = r.iwarp && sent <= kMaxHelloRepeats;
    const DeadlineNs wait_until = may_repeat ? std::min(deadline, monotonic_ns() + kHelloRepeatNs) : deadline;
    auto reply = receive_bootstrap(r, wait_until, "the handshake reply");
    if (reply || reply.status().code() != StatusCode::kTimeout || wait_until == deadline) return reply;
    FJORD_LOG_INFO(
        "%sno handshake reply %lu ms after hello %u of at most %u; sending it again (iWARP: a first "
        "message can wait in the server's socket until more data comes)",
        prefix.c_str(), static_cast<unsigned long>(kHelloRepeatNs / 1'000'000), sent, kMaxHelloRepeats + 1);
  }
}

class RdmaFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "InfiniBand/RoCE/iWARP verbs: RC queue pairs via rdma_cm, RDMA WRITE into the peer's receive ring";
  }
  std::span<const ParamSpec> parameters() const override { return kRdmaParams; }

  Status probe() const override {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (!list)
      return Status(StatusCode::kUnavailable,
                    std::string("no RDMA device: ibv_get_device_list: ") + std::strerror(errno));
    ibv_free_device_list(list);
    if (count == 0) return Status(StatusCode::kUnavailable, "no RDMA device: ibv_get_device_list found none");
    auto channel = make_channel();
    if (!channel)
      return Status(StatusCode::kUnavailable, "RDMA devices present but no rdma_cm: " + channel.status().message());
    return Status::ok();
  }

  // The first IPv4 address of this machine that rdma_cm binds to a device.
  std::string local_host() const override {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return "127.0.0.1";
    std::string found;
    for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      auto channel = make_channel();
      if (!channel) break;
      rdma_cm_id* id = nullptr;
      if (rdma_create_id(channel->get(), &id, nullptr, RDMA_PS_TCP) != 0) continue;
      if (rdma_bind_addr(id, a->ifa_addr) == 0 && id->verbs != nullptr) {
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
        found = text;
      }
      rdma_destroy_id(id);
    }
    ::freeifaddrs(list);
    return found.empty() ? "127.0.0.1" : found;
  }

  // Binds to the server's HostName, or to the wildcard address with
  // ListenAnyAddress=1 or a HostName of 0.0.0.0 / ::. rdma_cm then delivers
  // connection requests from every RDMA device, and serve() makes each
  // connection's PD, CQs and MRs on the device its request arrived on.
  Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) override {
    auto listening = transport::listen_link(self, links, kName);
    if (!listening) return listening.status();
    if (Status s = transport::check_own_keys(self, links, kName); !s) return s;
    const LinkConfig* first = *listening;
    const bool any = first->params.get_bool("ListenAnyAddress");
    auto addresses = resolve_host(any ? std::string("0.0.0.0") : first->host_of(self), first->port);
    if (!addresses) return addresses.status();
    auto channel = make_channel();
    if (!channel) return channel.status();
    auto id = create_id(channel->get());
    if (!id) return id.status();
    sockaddr* addr = reinterpret_cast<sockaddr*>(&addresses->front());
    const std::string where = sockaddr_text(addr);
    if (rdma_bind_addr(id->get(), addr) != 0)
      return Status(StatusCode::kUnavailable, first->describe() + ": cannot bind an rdma listener to " + where + ": " +
                                                  std::strerror(errno) + " (is the address on an RDMA device?)");
    const bool every_device = transport::is_any_address(addr);
    if (!(*id)->verbs && !every_device)
      return Status(StatusCode::kUnavailable,
                    first->describe() + ": " + where +
                        " is not on an RDMA device (give the address of one, or ListenAnyAddress=1 to serve every "
                        "device)");
    if (rdma_listen(id->get(), 64) != 0) return io_error("rdma_listen on " + where, errno);
    const uint16_t port = ntohs(rdma_get_src_port(id->get()));
    const std::string endpoint =
        sockaddr_text(rdma_get_local_addr(id->get())) + " [" +
        (every_device ? std::string("every RDMA device") : describe_device(id->get(), link_params(*first).gid_index)) +
        "]";
    FJORD_LOG_INFO("node %u: rdma listening on %s", self, endpoint.c_str());
    return std::unique_ptr<Listener>(
        new RdmaListener(self, links, std::move(channel).value(), std::move(id).value(), port, endpoint));
  }

  Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) override {
    FJORD_ASSERT(link.type == kName);
    FJORD_ASSERT(link.involves(self));
    const NodeId server = link.server_node;
    if (server == self)
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " is the server of " + link.describe());
    if (Status s = transport::check_connect_port(link); !s) return s;
    auto key = transport::own_key(link, self);
    if (!key) return key.status();
    const LinkParams params = link_params(link);
    auto channel = make_channel();
    if (!channel) return channel.status();
    auto id = resolve_route(channel->get(), link, self, deadline);
    if (!id) return id.status();
    auto res = create_resources(std::move(channel).value(), std::move(id).value(), params, link.describe(), false);
    if (!res) return res.status();
    LinkResources& r = **res;
    const std::string prefix = link.describe() + " [" + r.where + "]: ";
    // The reply arrives as the first message, so its receive goes first.
    if (Status s = post_bootstrap_receive(r); !s) return setup_failed(prefix, s);
    if (Status s = post_data_receives(r, 0, r.params.queue_depth); !s) return setup_failed(prefix, s);
    transport::HandshakeRequest request{self, server, std::string(kName), ring_info_bytes(r), link.checksum};
    request.has_key = key->has_value();
    auto peer = shake_hands(r, request, key->has_value() ? &**key : nullptr, prefix, deadline);
    if (!peer) return peer.status();
    return std::unique_ptr<Transporter>(new RdmaTransporter(link, self, std::move(res).value(), *peer));
  }

 private:
  // Client: the request in the connect's private data, the greeting from
  // the accept's, the hello (with the proof over the greeting's nonce when
  // this node holds `key`), the reply; returns the server's ring.
  static Result<wire::RingInfo> shake_hands(LinkResources& r, transport::HandshakeRequest& request,
                                            const transport::ClusterKey* key, const std::string& prefix,
                                            DeadlineNs deadline) {
    const std::vector<std::byte> request_bytes = transport::encode_request(request);
    static_assert(transport::kHandshakePrefixBytes + 2 + 2 + 1 + kName.size() + 1 + 1 + 2 + wire::kRingInfoBytes <=
                      wire::kConnectPrivateDataBytes,
                  "the handshake request must fit the rdma_cm connect private data");
    rdma_conn_param param{};
    param.private_data = request_bytes.data();
    param.private_data_len = static_cast<uint8_t>(request_bytes.size());
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    const NodeId server = request.to_node;
    const std::string connecting = prefix + "connecting to node " + std::to_string(server) + " at " +
                                   sockaddr_text(rdma_get_peer_addr(r.id.get()));
    // iWARP connects its TCP stream inside rdma_connect, so "nobody listens"
    // may come from here or, on IB/RoCE, as a REJECTED event.
    if (rdma_connect(r.id.get(), &param) != 0)
      return Status(StatusCode::kUnavailable, connecting + ": rdma_connect: " + std::strerror(errno));
    auto established = wait_event(r.channel.get(), RDMA_CM_EVENT_ESTABLISHED, deadline, connecting);
    if (!established) return established.status();
    auto greeting = greeting_of(*established);
    if (!greeting) return Status(greeting.status().code(), connecting + ": " + greeting.status().message());
    if (key) transport::add_proof(request, *key, *greeting);
    auto reply_bytes = say_hello(r, hello_bytes(request), connecting + ": ", deadline);
    if (!reply_bytes) return Status(reply_bytes.status().code(), connecting + ": " + reply_bytes.status().message());
    auto reply = transport::decode_reply(*reply_bytes);
    if (!reply) return Status(reply.status().code(), connecting + ": " + reply.status().message());
    if (!reply->accepted)
      return Status(StatusCode::kRejected, "node " + std::to_string(server) +
                                               " rejected the rdma connection from node " +
                                               std::to_string(request.from_node) + ": " + reply->reason);
    if (Status s = transport::check_server_proof(request, reply->proof, key, *greeting); !s) return s;
    auto peer = peer_ring_info(reply->extra, r.params, server);
    if (!peer) return Status(peer.status().code(), prefix + peer.status().message());
    FJORD_LOG_INFO("node %u: %s: connected", request.from_node, connecting.c_str());
    return peer;
  }
};

}  // namespace

Status register_rdma_transporter(transport::TransporterRegistry& registry) {
  return registry.add(std::make_unique<RdmaFactory>());
}

Result<LinkInfo> link_info(const transport::Transporter& t) {
  const auto* rdma = dynamic_cast<const RdmaTransporter*>(&t);
  if (!rdma) return Status(StatusCode::kInvalidArgument, t.type() + " link is not an rdma link");
  return rdma->info();
}

void delay_handshake_replies(uint64_t delay_ns) { g_reply_delay_ns.store(delay_ns, std::memory_order_relaxed); }

Status inject_qp_error(transport::Transporter& t) {
  auto* rdma = dynamic_cast<RdmaTransporter*>(&t);
  if (!rdma) return Status(StatusCode::kInvalidArgument, t.type() + " link is not an rdma link");
  return rdma->inject_qp_error();
}

}  // namespace fjord::rdma
