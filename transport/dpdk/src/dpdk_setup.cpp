// DPDK set-up: the factory, the listener and the connecting side. The
// handshake runs over the link's own path, as UDP packets between the two
// ends' ports, and every message is repeated until answered:
//
//   client                                  server (listener endpoint)
//   hello(connection) ... every retry  ->
//                                       <-  greeting(connection, nonce)
//   request(connection, proof) ...     ->   check_request, check_client_proof
//                                       <-  reply(connection, accepted or the reason)
//
// `connection` is the client's random id for this attempt; the server's
// link answers a repeated request with the same reply. The checks and
// refusals are handshake.h's, as for every medium. The engine thread runs
// both ends' handshake endpoints; set-up threads wait for their outcome.
// Slow path.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <random>

#include "dpdk_engine.h"
#include "dpdk_link.h"
#include "dpdk_params.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/dpdk/dpdk.h"
#include "fjord/transport/handshake.h"

namespace fjord::dpdk {
namespace {

using transport::LinkConfig;
using transport::LinkTable;
using transport::Listener;
using transport::Transporter;

constexpr std::string_view kName = "dpdk";
constexpr uint64_t kFirstRetryNs = 10'000'000;
constexpr uint64_t kMaxRetryNs = 200'000'000;
constexpr std::size_t kMaxPendingGreetings = 256;

std::span<const std::byte> bytes_of(const std::vector<std::byte>& v) { return v; }

uint32_t new_connection_id() {
  static std::mutex mutex;
  static std::mt19937 random(std::random_device{}());
  std::lock_guard lock(mutex);
  uint32_t id = 0;
  while (id == 0) id = static_cast<uint32_t>(random());
  return id;
}

// The engine and port of this end of `link`.
struct Opened {
  Engine* engine = nullptr;
  std::size_t port = 0;
  LinkSettings settings;
};
Result<Opened> open_end(const LinkConfig& link, NodeId self) {
  auto settings = resolve_settings(link, self);
  if (!settings) return Status(settings.status().code(), link.describe() + ": " + settings.status().message());
  auto engine = Engine::start(settings->eal_args);
  if (!engine) return engine.status();
  auto port = (*engine)->open_port(settings->local.device);
  if (!port) return Status(port.status().code(), link.describe() + ": " + port.status().message());
  return Opened{*engine, *port, std::move(settings).value()};
}

wire::Addressing addressing_of(const LinkSettings& s, const wire::MacAddress& own_mac,
                               const wire::MacAddress& peer_mac) {
  wire::Addressing a;
  a.source_mac = s.local.mac_given ? s.local.mac : own_mac;
  a.destination_mac = peer_mac;
  a.source_ip = s.local.ip;
  a.destination_ip = s.peer.ip;
  a.source_port = s.local.udp_port;
  a.destination_port = s.peer.udp_port;
  return a;
}

// Builds the link of an accepted handshake: its channel, bound in place of
// the handshake endpoint, and its transporter. Engine mutex held.
Result<std::unique_ptr<Transporter>> make_link(Engine& engine, const LinkConfig& link, NodeId self,
                                               const LinkSettings& settings, const ChannelSetup& setup,
                                               const std::shared_ptr<Endpoint>& fallback,
                                               std::vector<std::byte> reply) {
  auto channel = LinkChannel::create(settings, setup);
  if (!channel) return channel.status();
  (*channel)->set_reply(std::move(reply));
  (*channel)->set_fallback(fallback);
  auto transporter = std::make_unique<DpdkTransporter>(link, self, engine, *channel);
  engine.rebind_locked(setup.port, setup.addressing.source_port, *channel);
  return std::unique_ptr<Transporter>(std::move(transporter));
}

// ---- the accepting side ---------------------------------------------------------

// What the listener's endpoints hand its owner: set-ups and refusals.
struct AcceptQueue {
  std::mutex mutex;
  std::deque<Result<std::unique_ptr<Transporter>>> ready;
  UniqueFd event{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};

  void push(Result<std::unique_ptr<Transporter>> outcome) {
    {
      std::lock_guard lock(mutex);
      ready.push_back(std::move(outcome));
    }
    const uint64_t one = 1;
    (void)!::write(event.get(), &one, sizeof one);
  }
};

// One UDP port of a listener: the link served there.
class ListenEndpoint final : public Endpoint, public std::enable_shared_from_this<ListenEndpoint> {
 public:
  ListenEndpoint(Engine& engine, NodeId self, std::shared_ptr<const LinkTable> links, Opened opened,
                 std::shared_ptr<AcceptQueue> queue)
      : engine_(engine),
        self_(self),
        links_(std::move(links)),
        opened_(std::move(opened)),
        queue_(std::move(queue)),
        faults_(opened_.settings.faults) {}

  void on_packet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) override {
    const uint32_t connection = packet.header.connection;
    if (auto it = replies_.find(connection); it != replies_.end()) {  // a refusal, repeated
      answer(packet, io, wire::PacketType::kReply, it->second);
      return;
    }
    if (packet.header.type == wire::PacketType::kHello) greet(packet, io, now_ns);
    if (packet.header.type == wire::PacketType::kRequest) take_request(packet, io, now_ns);
  }
  bool poll(PortIo& io, uint64_t) override {
    io.release_held(faults_);
    return false;
  }

 private:
  using AuthNonce = transport::AuthNonce;
  struct Pending {
    AuthNonce nonce;
    uint64_t expires_ns;
  };

  void answer(const wire::Packet& to, PortIo& io, wire::PacketType type, std::span<const std::byte> payload) {
    wire::Addressing a = to.addressing;
    std::swap(a.source_mac, a.destination_mac);
    std::swap(a.source_ip, a.destination_ip);
    std::swap(a.source_port, a.destination_port);
    a.source_mac = opened_.settings.local.mac_given ? opened_.settings.local.mac : io.mac();
    wire::Header h;
    h.type = type;
    h.connection = to.header.connection;
    (void)io.send(a, h, payload, &faults_);
  }

  void greet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) {
    auto it = pending_.find(packet.header.connection);
    if (it == pending_.end()) {
      if (pending_.size() >= kMaxPendingGreetings)
        std::erase_if(pending_, [&](auto& p) { return p.second.expires_ns < now_ns; });
      if (pending_.size() >= kMaxPendingGreetings) return;  // a flood: the real client repeats its hello
      it =
          pending_
              .emplace(packet.header.connection, Pending{transport::random_nonce(), now_ns + transport::kSetupBudgetNs})
              .first;
    }
    answer(packet, io, wire::PacketType::kGreeting, transport::encode_greeting(it->second.nonce));
  }

  std::string peer_of(const wire::Packet& packet) const {
    return wire::format_ipv4(packet.addressing.source_ip) + ":" + std::to_string(packet.addressing.source_port) +
           " on " + opened_.settings.local.device;
  }

  // handshake.h's checks, in the order every medium runs them.
  Result<transport::AcceptedRequest> check(const wire::Packet& packet, const AuthNonce& nonce) {
    auto request = transport::decode_request(packet.payload);
    if (!request) return request.status();
    auto checked = transport::check_request(*request, self_, kName, *links_);
    if (!checked) return checked.status();
    const LinkConfig& link = **checked;
    auto settings = resolve_settings(link, self_);
    if (!settings) return settings.status();
    if (settings->local.udp_port != packet.addressing.destination_port ||
        settings->local.device != opened_.settings.local.device)
      return Status(StatusCode::kRejected, "node " + std::to_string(request->from_node) + " connected to UDP port " +
                                               std::to_string(packet.addressing.destination_port) + " but " +
                                               link.describe() + " listens on UDP port " +
                                               std::to_string(settings->local.udp_port) + " of " +
                                               settings->local.device);
    auto proof = transport::check_client_proof(*request, request->proof, nonce, link, self_);
    if (!proof) return proof.status();
    return transport::AcceptedRequest{&link, std::move(request).value(), *proof};
  }

  void take_request(const wire::Packet& packet, PortIo& io, uint64_t) {
    auto pending = pending_.find(packet.header.connection);
    if (pending == pending_.end()) return;  // no greeting of ours: the client says hello again
    const AuthNonce nonce = pending->second.nonce;
    pending_.erase(pending);
    auto accepted = check(packet, nonce);
    if (!accepted) {
      refuse(packet, io, accepted.status());
      return;
    }
    accept(packet, io, *accepted);
  }

  void refuse(const wire::Packet& packet, PortIo& io, const Status& refusal) {
    transport::HandshakeReply reply;
    reply.code = refusal.code() == StatusCode::kInvalidArgument ? StatusCode::kRejected : refusal.code();
    reply.reason = transport::refusal_for_peer(refusal, self_);
    std::vector<std::byte> bytes = transport::encode_reply(reply);
    answer(packet, io, wire::PacketType::kReply, bytes);
    if (replies_.size() >= kMaxPendingGreetings) replies_.clear();
    replies_[packet.header.connection] = std::move(bytes);
    queue_->push(
        Status(StatusCode::kRejected, "rejected dpdk connection from " + peer_of(packet) + ": " + refusal.message()));
  }

  void accept(const wire::Packet& packet, PortIo& io, const transport::AcceptedRequest& accepted) {
    transport::HandshakeReply reply;
    reply.accepted = true;
    reply.proof = accepted.proof;
    std::vector<std::byte> bytes = transport::encode_reply(reply);
    answer(packet, io, wire::PacketType::kReply, bytes);
    const LinkConfig& link = *accepted.link;
    ChannelSetup setup;
    setup.addressing = addressing_of(opened_.settings, io.mac(), packet.addressing.source_mac);
    setup.connection = packet.header.connection;
    setup.peer_node = link.peer_of(self_);
    setup.port = opened_.port;
    auto made = make_link(engine_, link, self_, opened_.settings, setup, weak_from_this().lock(), std::move(bytes));
    if (made)
      FJORD_LOG_INFO("node %u: accepted %s from node %u at %s", self_, link.describe().c_str(), setup.peer_node,
                     peer_of(packet).c_str());
    queue_->push(std::move(made));
  }

  Engine& engine_;
  NodeId self_;
  std::shared_ptr<const LinkTable> links_;  // the listener's table
  Opened opened_;
  std::shared_ptr<AcceptQueue> queue_;
  FaultInjector faults_;
  std::map<uint32_t, Pending> pending_;
  std::map<uint32_t, std::vector<std::byte>> replies_;  // refusals by connection, for repeats
};

class DpdkListener final : public Listener {
 public:
  DpdkListener(NodeId self, LinkTable links)
      : self_(self), links_(std::make_shared<const LinkTable>(std::move(links))) {}
  ~DpdkListener() override {
    for (auto& b : bound_) b.engine->retire(b.port, b.udp_port, b.endpoint.get(), nullptr, [](PortIo&) {});
  }

  Status add(const LinkConfig& link) {
    auto opened = open_end(link, self_);
    if (!opened) return opened.status();
    const uint16_t udp = opened->settings.local.udp_port;
    Engine* engine = opened->engine;
    const std::size_t port = opened->port;
    endpoint_text_ += (endpoint_text_.empty() ? "" : ", ") + wire::format_ipv4(opened->settings.local.ip) + ":" +
                      std::to_string(udp) + " on " + opened->settings.local.device;
    auto endpoint = std::make_shared<ListenEndpoint>(*engine, self_, links_, std::move(opened).value(), queue_);
    if (Status s = engine->bind(port, udp, endpoint); !s) return Status(s.code(), link.describe() + ": " + s.message());
    bound_.push_back({engine, port, udp, std::move(endpoint)});
    return Status::ok();
  }
  const LinkTable& links() const { return *links_; }

  int fd() const override { return queue_->event.get(); }
  std::string endpoint() const override { return endpoint_text_; }

  Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) override {
    for (;;) {
      uint64_t tokens = 0;
      (void)!::read(queue_->event.get(), &tokens, sizeof tokens);
      {
        std::lock_guard lock(queue_->mutex);
        if (!queue_->ready.empty()) {
          auto outcome = std::move(queue_->ready.front());
          queue_->ready.pop_front();
          if (!queue_->ready.empty()) {  // the fd stays readable for the next one
            const uint64_t one = 1;
            (void)!::write(queue_->event.get(), &one, sizeof one);
          }
          return outcome;
        }
      }
      const uint64_t now = monotonic_ns();
      if (now >= deadline) return Status(StatusCode::kTimeout, "no connection attempt on " + endpoint_text_);
      pollfd p{queue_->event.get(), POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 100)));
    }
  }

 private:
  struct Bound {
    Engine* engine;
    std::size_t port;
    uint16_t udp_port;
    std::shared_ptr<ListenEndpoint> endpoint;
  };
  NodeId self_;
  std::shared_ptr<const LinkTable> links_;  // shared with the endpoints, which may outlive this
  std::shared_ptr<AcceptQueue> queue_ = std::make_shared<AcceptQueue>();
  std::vector<Bound> bound_;
  std::string endpoint_text_;
};

// ---- the connecting side --------------------------------------------------------

class ConnectEndpoint final : public Endpoint {
 public:
  ConnectEndpoint(Engine& engine, NodeId self, const LinkConfig& link, Opened opened,
                  transport::HandshakeRequest request, std::optional<transport::ClusterKey> key)
      : engine_(engine),
        self_(self),
        link_(link),
        opened_(std::move(opened)),
        request_(std::move(request)),
        key_(std::move(key)),
        connection_(new_connection_id()),
        faults_(opened_.settings.faults) {}

  void on_packet(const wire::Packet& packet, PortIo& io, uint64_t now_ns) override {
    if (packet.header.connection != connection_ || packet.addressing.source_ip != opened_.settings.peer.ip ||
        packet.addressing.source_port != opened_.settings.peer.udp_port)
      return;
    if (packet.header.type == wire::PacketType::kGreeting && request_bytes_.empty()) {
      auto nonce = transport::decode_greeting(packet.payload);
      if (!nonce) return finish(nonce.status());
      nonce_ = *nonce;
      if (key_) transport::add_proof(request_, *key_, nonce_);
      request_bytes_ = transport::encode_request(request_);
      if (wire::kAllHeaderBytes + request_bytes_.size() > wire::kEthernetBytes + opened_.settings.mtu)
        return finish(Status(StatusCode::kInvalidArgument, "the handshake request does not fit one packet at Mtu=" +
                                                               std::to_string(opened_.settings.mtu)));
      peer_mac_ = packet.addressing.source_mac;
      next_send_ns_ = now_ns;
      retry_ns_ = kFirstRetryNs;
      (void)poll(io, now_ns);
    } else if (packet.header.type == wire::PacketType::kReply && !request_bytes_.empty()) {
      take_reply(packet, io);
    }
  }

  bool poll(PortIo& io, uint64_t now_ns) override {
    io.release_held(faults_);
    if (done_ || now_ns < next_send_ns_) return false;
    wire::Header h;
    h.type = request_bytes_.empty() ? wire::PacketType::kHello : wire::PacketType::kRequest;
    h.connection = connection_;
    const wire::MacAddress peer = opened_.settings.peer.mac_given ? opened_.settings.peer.mac : peer_mac_;
    (void)io.send(addressing_of(opened_.settings, io.mac(), peer), h, bytes_of(request_bytes_), &faults_);
    next_send_ns_ = now_ns + retry_ns_;
    retry_ns_ = std::min(2 * retry_ns_, kMaxRetryNs);
    return true;
  }

  // The set-up thread: the outcome, or nullopt at the deadline.
  std::optional<Result<std::unique_ptr<Transporter>>> wait(DeadlineNs deadline) {
    std::unique_lock lock(mutex_);
    while (!outcome_) {
      const uint64_t now = monotonic_ns();
      if (now >= deadline) return std::nullopt;
      done_cv_.wait_for(lock, std::chrono::nanoseconds(std::min<uint64_t>(deadline - now, 100'000'000)));
    }
    return std::move(outcome_);
  }
  std::optional<Result<std::unique_ptr<Transporter>>> take() {
    std::lock_guard lock(mutex_);
    return std::move(outcome_);
  }
  bool greeted() const { return !request_bytes_.empty(); }

 private:
  void take_reply(const wire::Packet& packet, PortIo& io) {
    auto reply = transport::decode_reply(packet.payload);
    if (!reply) return finish(reply.status());
    const std::string server = std::to_string(request_.to_node);
    if (!reply->accepted)
      return finish(Status(StatusCode::kRejected, "node " + server + " rejected the dpdk connection from node " +
                                                      std::to_string(self_) + ": " + reply->reason));
    if (Status s = transport::check_server_proof(request_, reply->proof, key_ ? &*key_ : nullptr, nonce_); !s)
      return finish(s);
    ChannelSetup setup;
    setup.addressing = addressing_of(opened_.settings, io.mac(), packet.addressing.source_mac);
    setup.connection = connection_;
    setup.peer_node = request_.to_node;
    setup.port = opened_.port;
    auto made = make_link(engine_, link_, self_, opened_.settings, setup, nullptr, {});
    if (made) FJORD_LOG_INFO("node %u: connected %s to node %u", self_, link_.describe().c_str(), setup.peer_node);
    finish(std::move(made));
  }

  void finish(Result<std::unique_ptr<Transporter>> outcome) {
    done_ = true;
    std::lock_guard lock(mutex_);
    outcome_ = std::move(outcome);
    done_cv_.notify_all();
  }

  Engine& engine_;
  NodeId self_;
  LinkConfig link_;
  Opened opened_;
  transport::HandshakeRequest request_;
  std::optional<transport::ClusterKey> key_;
  uint32_t connection_;
  FaultInjector faults_;
  transport::AuthNonce nonce_{};
  std::vector<std::byte> request_bytes_;             // empty until greeted
  wire::MacAddress peer_mac_ = wire::kBroadcastMac;  // learned from the greeting
  uint64_t next_send_ns_ = 0;
  uint64_t retry_ns_ = kFirstRetryNs;
  bool done_ = false;  // engine thread
  std::mutex mutex_;
  std::condition_variable done_cv_;
  std::optional<Result<std::unique_ptr<Transporter>>> outcome_;
};

class DpdkFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "DPDK Ethernet: frames in UDP/IPv4 packets through a DPDK port, made reliable and ordered by the "
           "transporter (go-back-N, cumulative acks, receive-window credits)";
  }
  std::span<const config::ParamSpec> parameters() const override { return dpdk_params(); }
  Status validate(const LinkConfig& link) const override { return validate_link(link); }
  Status probe() const override {
    auto engine = Engine::start("");
    return engine ? Status::ok() : engine.status();
  }

  Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) override {
    if (Status s = transport::check_own_keys(self, links, kName); !s) return s;
    auto listener = std::make_unique<DpdkListener>(self, links);
    for (const LinkConfig& link : listener->links().all()) {
      if (link.type != kName || link.server_node != self) continue;
      if (Status s = listener->add(link); !s) return s;
    }
    if (listener->endpoint().empty())
      return Status(StatusCode::kNotFound, "node " + std::to_string(self) + " serves no dpdk link");
    return std::unique_ptr<Listener>(std::move(listener));
  }

  Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) override {
    FJORD_ASSERT(link.type == kName);
    FJORD_ASSERT(link.involves(self));
    if (link.server_node == self)
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " is the server of " + link.describe());
    auto key = transport::own_key(link, self);
    if (!key) return key.status();
    auto opened = open_end(link, self);
    if (!opened) return opened.status();
    Engine& engine = *opened->engine;
    const std::size_t port = opened->port;
    const uint16_t udp = opened->settings.local.udp_port;
    const std::string where =
        wire::format_ipv4(opened->settings.peer.ip) + ":" + std::to_string(opened->settings.peer.udp_port);
    transport::HandshakeRequest request{self, link.server_node, std::string(kName), {}, link.checksum};
    auto endpoint = std::make_shared<ConnectEndpoint>(engine, self, link, std::move(opened).value(), std::move(request),
                                                      std::move(*key));
    if (Status s = engine.bind(port, udp, endpoint); !s) return Status(s.code(), link.describe() + ": " + s.message());
    engine.notify();
    auto outcome = endpoint->wait(deadline);
    engine.retire(port, udp, endpoint.get(), nullptr, [](PortIo&) {});
    if (!outcome) outcome = endpoint->take();  // decided while we gave up
    if (outcome) return std::move(*outcome);
    return Status(StatusCode::kTimeout, "no " + std::string(endpoint->greeted() ? "reply" : "greeting") +
                                            " from node " + std::to_string(link.server_node) + " at " + where +
                                            " for " + link.describe());
  }
};

}  // namespace

Status register_dpdk_transporter(transport::TransporterRegistry& registry) {
  return registry.add(std::make_unique<DpdkFactory>());
}

}  // namespace fjord::dpdk
