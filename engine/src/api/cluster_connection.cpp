// API: the cluster connection (one per API node id per process), its
// registration with the data node and the sessions made from it.
#include <algorithm>
#include <thread>

#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/engine/cluster_config.h"
#include "shared_link.h"

namespace fjord::api {

using namespace engine::protocol;
using engine::block_numbers::kApi;
using engine::block_numbers::kDict;

namespace {
uint64_t ms(uint32_t v) { return uint64_t{v} * 1'000'000; }

Status check_options(const ConnectOptions& options) {
  if (!options.registry) return Status(StatusCode::kInvalidArgument, "ConnectOptions.registry is required");
  // A transaction's handle on the wire holds its slot in 16 bits.
  if (options.max_transactions == 0 || options.max_transactions > detail::kMaxTransactionSlots)
    return Status(StatusCode::kInvalidArgument, "ConnectOptions.max_transactions is " +
                                                    std::to_string(options.max_transactions) + ", expected 1.." +
                                                    std::to_string(detail::kMaxTransactionSlots));
  return Status::ok();
}
}  // namespace

ClusterConnection::ClusterConnection(ConnectOptions options, bool shared)
    : options_(std::move(options)), shared_(shared) {
  if (shared_) shared_link_ = std::make_unique<detail::SharedLink>(kMaxSessions + 1);
}

ClusterConnection::~ClusterConnection() {
  if (shared_link_) {
    const std::lock_guard lock(shared_link_->sessions_mutex);
    for (const Session* s : shared_link_->sessions)
      FJORD_ASSERT_MSG(s == nullptr, "a ClusterConnection destroyed before a Session made from it");
  }
  if (link_) link_->close("API node " + std::to_string(self_) + " disconnected");
}

Result<std::unique_ptr<ClusterConnection>> ClusterConnection::open(const ConnectOptions& options, bool shared) {
  if (Status s = check_options(options); !s) return s;
  std::unique_ptr<ClusterConnection> c(new ClusterConnection(options, shared));
  if (Status s = c->establish(); !s) return s;
  return c;
}

Result<std::unique_ptr<ClusterConnection>> ClusterConnection::connect(const ConnectOptions& options) {
  return open(options, true);
}

Result<std::unique_ptr<Connection>> Connection::connect(const ConnectOptions& options) {
  auto cluster = ClusterConnection::open(options, false);
  if (!cluster) return cluster.status();
  ClusterConnection& c = **cluster;
  return std::unique_ptr<Connection>(new Connection(c, std::move(cluster).value()));
}

Result<std::unique_ptr<Session>> ClusterConnection::new_session() {
  FJORD_ASSERT_MSG(shared_, "new_session() of a Connection's own cluster connection");
  if (!link_->is_up()) return not_connected();
  detail::SharedLink& shared = *shared_link_;
  const std::lock_guard lock(shared.sessions_mutex);
  uint32_t index = 1;  // 0 is never handed out: a Connection's own session
  while (index <= kMaxSessions && shared.sessions[index] != nullptr) ++index;
  if (index > kMaxSessions)
    return Status(StatusCode::kResourceExhausted, "API node " + std::to_string(self_) + " has " +
                                                      std::to_string(kMaxSessions) +
                                                      " sessions already: destroy one before making another");
  // Built under the lock (it takes none itself), so that the slot is never
  // seen half-made.
  std::unique_ptr<Session> session(new Session(*this, index, nullptr));
  shared.sessions[index] = session.get();
  shared.mailboxes[index]->set_open(true);
  return session;
}

void ClusterConnection::close(const std::string& why) {
  if (link_) link_->close(why);
  if (shared_link_) shared_link_->wake_all();
}

Status ClusterConnection::not_connected() const {
  return Status(StatusCode::kLinkDown, "not connected to data node " + std::to_string(data_node_) +
                                           (link_ ? ": " + link_->down_reason().message() : std::string()));
}

Status ClusterConnection::establish() {
  // The config's warnings (NDB parameters with no effect here) are the data
  // node's to log: a program connects many times.
  auto cluster = !options_.config_path.empty()
                     ? engine::load_cluster_config_file(options_.config_path, *options_.registry)
                     : engine::load_cluster_config_text(options_.config_text, "<config text>", *options_.registry);
  if (!cluster) return cluster.status();
  self_ = options_.node_id;
  if (self_ == kNoNode) {
    auto apis = cluster->of_kind(engine::NodeKind::kApi);
    if (apis.empty()) return Status(StatusCode::kNotFound, cluster->path + ": no [api] section for this program");
    self_ = apis.front()->id;
  }
  const engine::NodeDef* me = cluster->node(self_);
  if (!me || me->kind != engine::NodeKind::kApi)
    return Status(StatusCode::kInvalidArgument,
                  "node " + std::to_string(self_) + " is not an [api] node in " + cluster->path);
  const auto data_nodes = cluster->of_kind(engine::NodeKind::kData);
  data_node_ = data_nodes.front()->id;
  const transport::LinkConfig* link = cluster->links.find(self_, data_node_);
  FJORD_ASSERT(link != nullptr);  // default links join every API node to every data node
  transport::TransporterFactory* factory = options_.registry->find(link->type);
  if (!factory) return Status(StatusCode::kNotFound, "transporter '" + link->type + "' is not built in");
  if (Status s = factory->probe(); !s) return Status(s.code(), link->describe() + ": " + s.message());
  // The data node may still be starting: retry until the connect timeout.
  // It may also drop the link before answering the registration: it still
  // holds a link from this node id, the previous connection's if it has not
  // let that go yet (a program that reconnects at once). A closed link's
  // end reaches the node within milliseconds, so that is retried for
  // kTakenIdGraceMs only: an id another connection holds fails then, not
  // at the connect timeout.
  constexpr uint64_t kTakenIdGraceMs = 2000;
  const uint64_t deadline = monotonic_ns() + ms(options_.connect_timeout_ms);
  uint64_t first_drop_ns = 0;
  Status last;
  while (monotonic_ns() < deadline) {
    auto t = factory->connect(self_, *link, std::min<uint64_t>(deadline, monotonic_ns() + 2'000'000'000ULL));
    if (t) {
      link_ = std::move(t).value();
      if (Status s = register_node(); s || s.code() != StatusCode::kLinkDown) return s;
      const std::string why = link_->down_reason().message();
      link_.reset();
      last = Status(StatusCode::kLinkDown, "data node " + std::to_string(data_node_) +
                                               " dropped the link before answering the registration (is API node " +
                                               std::to_string(self_) + " already connected?): " + why);
      const uint64_t now = monotonic_ns();
      if (first_drop_ns == 0) first_drop_ns = now;
      if (now - first_drop_ns >= ms(kTakenIdGraceMs))
        return Status(StatusCode::kAlreadyExists,
                      "API node " + std::to_string(self_) + " is already connected to data node " +
                          std::to_string(data_node_) + ": for " + std::to_string(kTakenIdGraceMs) +
                          " ms the node dropped every new link from this id before registering it (last: " + why + ")");
    } else {
      last = t.status();
      // Refused by the node, or this end's own settings unusable (its key
      // file, its TLS credentials): retrying will not help.
      const StatusCode code = t.status().code();
      if (code == StatusCode::kRejected || code == StatusCode::kInvalidArgument) return last;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status(StatusCode::kUnavailable, "cannot reach data node " + std::to_string(data_node_) + " over " +
                                              link->describe() + ": " + last.message());
}

// Learns the data node's TC and LDM instance counts. kLinkDown if the node
// dropped the link first.
Status ClusterConnection::register_node() {
  if (!send_registration()) return not_connected();
  const uint64_t deadline = monotonic_ns() + ms(options_.request_timeout_ms);
  while (!registered_) {
    if (!receive_registration()) return not_connected();
    if (registered_) break;
    const uint64_t now = monotonic_ns();
    if (now > deadline)
      return Status(StatusCode::kTimeout,
                    "data node " + std::to_string(data_node_) + " did not answer the registration");
    if (link_->flush() == transport::FlushStatus::kDown) return not_connected();
    (void)link_->wait_for_receive(std::min<uint64_t>(deadline - now, 100'000'000), 0);
  }
  return Status::ok();
}

bool ClusterConnection::send_registration() {
  const SignalOut out = encode(ApiRegReq{1});
  const bool checksum = link_->config().checksum;
  const std::size_t bytes = frame::frame_bytes_for(out.word_count, out.section_list(), checksum);
  if (!link_->is_up()) return false;
  std::span<std::byte> space = link_->reserve(bytes);
  if (space.empty()) return false;  // a new link's buffer is empty: only a link down has no room
  frame::pack_frame_sized(space.data(), bytes, {out.number, {kDict, 0}, {kApi, 0}, 0}, out.data(), out.section_list(),
                          checksum);
  link_->commit(bytes, 1);
  return link_->flush() != transport::FlushStatus::kDown;
}

bool ClusterConnection::receive_registration() {
  const transport::ReceiveBatch batch = link_->receive();
  if (batch.bytes.empty()) return link_->is_up();
  frame::FrameCursor cursor(batch.bytes);
  engine::Signal s;
  s.sender_node = data_node_;
  while (cursor.next(s.view)) {
    if (s.number() != gsn::kApiRegConf) continue;  // nothing else is asked yet
    auto m = decode_api_reg_conf(s);
    if (!m) {
      FJORD_LOG_WARN("API node %u: malformed ApiRegConf from data node %u: %s", self_, data_node_,
                     m.status().message().c_str());
      continue;
    }
    tc_instances_ = m->tc_instances;
    ldm_instances_ = m->ldm_instances;
    registered_ = true;
  }
  link_->release(batch.bytes.size());
  return true;
}

}  // namespace fjord::api
