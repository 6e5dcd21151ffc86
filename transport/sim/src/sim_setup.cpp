// Sim set-up: the factory, the process-wide endpoint table, the listener and
// connect. A connect posts an in-memory HandshakeRequest to the listener's
// inbox; accept() checks it with check_request() and answers, so refusals
// read as on real media. Slow path: blocking with deadlines, allocates.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/sim/sim.h"
#include "fjord/transport/handshake.h"
#include "sim_transporter.h"

namespace fjord::sim {
namespace {

using config::Kind;
using config::ParamSpec;
using transport::LinkConfig;
using transport::LinkTable;
using transport::Listener;
using transport::Transporter;

constexpr std::string_view kName = "sim";

const ParamSpec kSimParams[] = {
    {"SimEndpoint", Kind::kUint, 0, UINT64_MAX, "0", false,
     "rendezvous key inside the process; 0 = derived from the node ids"},
    {"Seed", Kind::kUint, 0, UINT64_MAX, "0", false, "fault-injection seed; 0 = pick one at random (logged)"},
    {"DelayPolls", Kind::kUint, 0, 1'000'000, "0", false,
     "a flushed batch is held back for up to this many receive() polls"},
    {"ShortWriteChance", Kind::kUint, 0, 100, "0", false,
     "percent chance that a flush moves only part of the committed bytes"},
    {"DisconnectChance", Kind::kUint, 0, 1'000'000, "0", false, "chance per million flushes that the link drops"},
};

std::string endpoint_key(const LinkConfig& link) {
  const uint64_t key = link.params.get_uint("SimEndpoint");
  if (key != 0) return "SimEndpoint=" + std::to_string(key);
  return "sim nodes " + std::to_string(std::min(link.node1, link.node2)) + "-" +
         std::to_string(std::max(link.node1, link.node2));
}

// One connection attempt, shared by the connecting thread and accept().
struct Attempt {
  transport::HandshakeRequest request;
  // The greeting's nonce. Sim links carry no bytes: it is drawn as the
  // attempt is made, and the proofs cover it as on the other media.
  transport::AuthNonce server_nonce{};
  std::string endpoint;
  uint64_t client_send_bytes = 0;
  // Answer, guarded by the inbox mutex.
  bool answered = false;
  bool abandoned = false;
  Status refusal;
  std::shared_ptr<SimWire> wire;
  std::optional<transport::AuthMac> server_proof;
};

// A listener's queue of attempts; outlives the listener while connects hold it.
struct Inbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Attempt>> waiting;
  bool closed = false;
  UniqueFd event;  // readable while attempts wait (Listener::fd)
};

// The process-wide rendezvous table: endpoint key -> inbox.
class EndpointTable {
 public:
  static EndpointTable& instance() {
    static EndpointTable* table = new EndpointTable();  // never destroyed: used until exit
    return *table;
  }
  Status add(const std::string& key, const std::shared_ptr<Inbox>& inbox, const std::string& link) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = inboxes_.try_emplace(key, inbox);
    if (!fresh && !it->second.expired())
      return Status(StatusCode::kAlreadyExists, key + " of " + link + " is already listened on in this process");
    it->second = inbox;
    return Status::ok();
  }
  void remove(const std::string& key, const Inbox* inbox) {
    std::lock_guard lock(mutex_);
    auto it = inboxes_.find(key);
    if (it != inboxes_.end() && it->second.lock().get() == inbox) inboxes_.erase(it);
  }
  std::shared_ptr<Inbox> find(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = inboxes_.find(key);
    return it == inboxes_.end() ? nullptr : it->second.lock();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::weak_ptr<Inbox>> inboxes_;
};

std::chrono::steady_clock::time_point to_time_point(DeadlineNs deadline) {
  const uint64_t now = monotonic_ns();
  const uint64_t left = deadline > now ? std::min<uint64_t>(deadline - now, 3600'000'000'000ULL) : 0;
  return std::chrono::steady_clock::now() + std::chrono::nanoseconds(left);
}

Result<MirroredMap> make_ring(uint64_t bytes) {
  return MirroredMap::anonymous(round_up_to_pages(std::max<uint64_t>(bytes, 2 * frame::kMaxFrameBytes)), "fjord-sim");
}

Result<UniqueFd> make_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) return io_error("eventfd", errno);
  return fd;
}

// The server's faults: its link section decides for both directions.
SimFaults faults_of(const LinkConfig& link) {
  SimFaults f;
  f.seed = link.params.get_uint("Seed");
  f.delay_polls = static_cast<uint32_t>(link.params.get_uint("DelayPolls"));
  f.short_write_percent = static_cast<uint32_t>(link.params.get_uint("ShortWriteChance"));
  f.disconnect_per_million = static_cast<uint32_t>(link.params.get_uint("DisconnectChance"));
  if (f.seed == 0) {
    f.seed = (std::random_device{}() | 1ULL) * 0x100000001ULL ^ monotonic_ns();
    if (f.seed == 0) f.seed = 1;
    FJORD_LOG_INFO("%s: Seed=0, picked seed %llu (set Seed=%llu to replay)", link.describe().c_str(),
                   static_cast<unsigned long long>(f.seed), static_cast<unsigned long long>(f.seed));
  }
  if (f.any())
    FJORD_LOG_INFO("%s: injecting faults with Seed=%llu: DelayPolls=%u ShortWriteChance=%u%% DisconnectChance=%u/1M",
                   link.describe().c_str(), static_cast<unsigned long long>(f.seed), f.delay_polls,
                   f.short_write_percent, f.disconnect_per_million);
  return f;
}

Result<std::shared_ptr<SimWire>> make_wire(const LinkConfig& server_link, uint64_t client_send_bytes) {
  auto to_server = make_ring(client_send_bytes);
  if (!to_server) return to_server.status();
  auto to_client = make_ring(server_link.send_buffer_bytes);
  if (!to_client) return to_client.status();
  auto server_event = make_eventfd();
  if (!server_event) return server_event.status();
  auto client_event = make_eventfd();
  if (!client_event) return client_event.status();
  return std::make_shared<SimWire>(faults_of(server_link), std::move(to_server).value(),
                                   std::move(server_event).value(), std::move(to_client).value(),
                                   std::move(client_event).value());
}

class SimListener final : public Listener {
 public:
  SimListener(NodeId self, LinkTable links, std::shared_ptr<Inbox> inbox, std::vector<std::string> keys)
      : self_(self), links_(std::move(links)), inbox_(std::move(inbox)), keys_(std::move(keys)) {}

  ~SimListener() override {
    for (const std::string& key : keys_) EndpointTable::instance().remove(key, inbox_.get());
    std::lock_guard lock(inbox_->mutex);
    inbox_->closed = true;
    inbox_->changed.notify_all();
  }

  int fd() const override { return inbox_->event.get(); }
  std::string endpoint() const override {
    std::string out;
    for (const std::string& k : keys_) out += (out.empty() ? "" : ", ") + k;
    return out;
  }

  Result<std::unique_ptr<Transporter>> accept(DeadlineNs deadline) override {
    std::shared_ptr<Attempt> attempt;
    {
      std::unique_lock lock(inbox_->mutex);
      inbox_->changed.wait_until(lock, to_time_point(deadline), [&] { return !inbox_->waiting.empty(); });
      if (inbox_->waiting.empty()) return Status(StatusCode::kTimeout, "no connection attempt on " + endpoint());
      attempt = std::move(inbox_->waiting.front());
      inbox_->waiting.pop_front();
      if (inbox_->waiting.empty()) {
        uint64_t tokens = 0;
        (void)!::read(inbox_->event.get(), &tokens, sizeof tokens);
      }
    }
    return handle(*attempt);
  }

 private:
  // Checks the request and answers it; returns our end or the refusal.
  Result<std::unique_ptr<Transporter>> handle(Attempt& attempt) {
    const std::string peer = "node " + std::to_string(attempt.request.from_node) + " on " + attempt.endpoint;
    std::optional<transport::AuthMac> proof;
    auto checked = check(attempt, proof);
    if (!checked) {
      const Status& refusal = checked.status();
      FJORD_LOG_WARN("node %u: rejected sim connection from %s: %s", self_, peer.c_str(), refusal.message().c_str());
      answer(attempt, Status(StatusCode::kRejected, transport::refusal_for_peer(refusal, self_)), nullptr);
      return Status(StatusCode::kRejected, "rejected sim connection from " + peer + ": " + refusal.message());
    }
    const LinkConfig& link = **checked;
    auto wire = make_wire(link, attempt.client_send_bytes);
    if (!wire) {
      answer(attempt, Status(StatusCode::kRejected, wire.status().message()), nullptr);
      return wire.status();
    }
    if (!answer(attempt, Status::ok(), *wire, proof))
      return Status(StatusCode::kTimeout, peer + " gave up before the connection was accepted");
    FJORD_LOG_INFO("node %u: accepted %s from node %u", self_, link.describe().c_str(), link.peer_of(self_));
    return std::unique_ptr<Transporter>(new SimTransporter(link, self_, std::move(wire).value(), 1));
  }

  // The request's checks in order: link table, endpoint, keys.
  Result<const LinkConfig*> check(const Attempt& attempt, std::optional<transport::AuthMac>& proof) const {
    auto checked = transport::check_request(attempt.request, self_, kName, links_);
    if (!checked) return checked;
    if (endpoint_key(**checked) != attempt.endpoint)
      return Status(StatusCode::kRejected, "node " + std::to_string(attempt.request.from_node) + " dialled " +
                                               attempt.endpoint + " but " + (*checked)->describe() + " listens on " +
                                               endpoint_key(**checked));
    auto proved =
        transport::check_client_proof(attempt.request, attempt.request.proof, attempt.server_nonce, **checked, self_);
    if (!proved) return proved.status();
    proof = *proved;
    return checked;
  }

  // False if the connecting side had already given up.
  bool answer(Attempt& attempt, Status refusal, std::shared_ptr<SimWire> wire,
              std::optional<transport::AuthMac> proof = std::nullopt) {
    std::lock_guard lock(inbox_->mutex);
    if (attempt.abandoned) return false;
    attempt.answered = true;
    attempt.refusal = std::move(refusal);
    attempt.wire = std::move(wire);
    attempt.server_proof = proof;
    inbox_->changed.notify_all();
    return true;
  }

  NodeId self_;
  LinkTable links_;
  std::shared_ptr<Inbox> inbox_;
  std::vector<std::string> keys_;
};

// Posts the attempt and waits for accept()'s answer until the deadline.
Status post_and_wait(Inbox& inbox, const std::shared_ptr<Attempt>& attempt, DeadlineNs deadline) {
  std::unique_lock lock(inbox.mutex);
  if (inbox.closed) return Status(StatusCode::kUnavailable, "the listener on " + attempt->endpoint + " closed");
  inbox.waiting.push_back(attempt);
  const uint64_t one = 1;
  (void)!::write(inbox.event.get(), &one, sizeof one);
  inbox.changed.notify_all();
  inbox.changed.wait_until(lock, to_time_point(deadline), [&] { return attempt->answered || inbox.closed; });
  if (attempt->answered) return Status::ok();
  attempt->abandoned = true;
  std::erase(inbox.waiting, attempt);
  return inbox.closed ? Status(StatusCode::kUnavailable, "the listener on " + attempt->endpoint + " closed")
                      : Status(StatusCode::kTimeout, "connect to " + attempt->endpoint + " timed out");
}

class SimFactory final : public transport::TransporterFactory {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "simulated in-process link with seeded fault injection (tests)";
  }
  std::span<const ParamSpec> parameters() const override { return kSimParams; }

  Result<std::unique_ptr<Listener>> listen(NodeId self, const LinkTable& links) override {
    if (Status s = transport::check_own_keys(self, links, kName); !s) return s;
    auto inbox = std::make_shared<Inbox>();
    inbox->event.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!inbox->event.valid()) return io_error("eventfd", errno);
    std::vector<std::string> keys;
    for (const LinkConfig* link : links.links_of(self)) {
      if (link->type != kName || link->server_node != self) continue;
      const std::string key = endpoint_key(*link);
      if (std::find(keys.begin(), keys.end(), key) != keys.end())
        return Status(StatusCode::kInvalidArgument, "two sim links of node " + std::to_string(self) + " share " + key +
                                                        "; give " + link->describe() + " its own SimEndpoint");
      if (Status s = EndpointTable::instance().add(key, inbox, link->describe()); !s) {
        for (const std::string& k : keys) EndpointTable::instance().remove(k, inbox.get());
        return s;
      }
      keys.push_back(key);
    }
    if (keys.empty()) return Status(StatusCode::kNotFound, "node " + std::to_string(self) + " serves no sim link");
    return std::unique_ptr<Listener>(new SimListener(self, links, std::move(inbox), std::move(keys)));
  }

  Result<std::unique_ptr<Transporter>> connect(NodeId self, const LinkConfig& link, DeadlineNs deadline) override {
    FJORD_ASSERT(link.type == kName);
    FJORD_ASSERT(link.involves(self));
    const NodeId server = link.server_node;
    if (server == self)
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(self) + " is the server of " + link.describe());
    auto key = transport::own_key(link, self);
    if (!key) return key.status();
    auto attempt = std::make_shared<Attempt>();
    attempt->request = {self, server, std::string(kName), {}, link.checksum};
    attempt->server_nonce = transport::random_nonce();
    if (key->has_value()) transport::add_proof(attempt->request, **key, attempt->server_nonce);
    attempt->endpoint = endpoint_key(link);
    attempt->client_send_bytes = link.send_buffer_bytes;
    std::shared_ptr<Inbox> inbox = EndpointTable::instance().find(attempt->endpoint);
    if (!inbox)
      return Status(StatusCode::kUnavailable, "nothing listens on " + attempt->endpoint + " in this process (is node " +
                                                  std::to_string(server) + " up?)");
    if (Status s = post_and_wait(*inbox, attempt, deadline); !s) return s;
    if (!attempt->refusal)
      return Status(StatusCode::kRejected, "node " + std::to_string(server) +
                                               " rejected the sim connection from node " + std::to_string(self) + ": " +
                                               attempt->refusal.message());
    if (Status s = transport::check_server_proof(attempt->request, attempt->server_proof,
                                                 key->has_value() ? &**key : nullptr, attempt->server_nonce);
        !s)
      return s;
    FJORD_LOG_INFO("node %u: connected %s to node %u", self, link.describe().c_str(), server);
    return std::unique_ptr<Transporter>(new SimTransporter(link, self, attempt->wire, 0));
  }
};

}  // namespace

Status register_sim_transporter(transport::TransporterRegistry& registry) {
  return registry.add(std::make_unique<SimFactory>());
}

}  // namespace fjord::sim
