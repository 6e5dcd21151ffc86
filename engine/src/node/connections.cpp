// The data node's connection thread: accepts links, connects to the data
// nodes it is a client of, serves the control socket (fjord-stats) and logs
// statistics periodically when asked. Slow path.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/engine/storage/page_pool.h"
#include "node_internal.h"

namespace fjord::engine {
namespace {

std::string percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "0.0%";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

// The kind the configuration gives the node id a handshake proved. The
// handshake accepts only ids of the link table, whose nodes all exist; a
// node id without one would get the kind that may send nothing.
SenderKind DataNode::Impl::peer_kind(NodeId peer) const {
  const NodeDef* def = cluster.node(peer);
  if (def == nullptr) return SenderKind::kMgmNode;
  switch (def->kind) {
    case NodeKind::kData: return SenderKind::kDataNode;
    case NodeKind::kApi: return SenderKind::kApiNode;
    case NodeKind::kMgm: return SenderKind::kMgmNode;
  }
  return SenderKind::kMgmNode;  // not reached: the least trusted kind
}

Status DataNode::Impl::open_listeners() {
  epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd.valid() || !wake_fd.valid()) return io_error("epoll/eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kWakeTag;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &ev);
  for (transport::TransporterFactory* factory : options.registry->all()) {
    bool serves = false;
    for (const transport::LinkConfig* link : cluster.links.links_of(self))
      serves |= link->type == factory->name() && link->server_node == self;
    if (!serves) continue;
    if (Status s = factory->probe(); !s)
      return Status(s.code(), "node " + std::to_string(self) + " serves " + std::string(factory->name()) +
                                  " links, but " + s.message());
    auto listener = factory->listen(self, cluster.links);
    if (!listener) return listener.status();
    ev.data.u32 = static_cast<uint32_t>(listeners.size());
    if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, (*listener)->fd(), &ev) != 0) return io_error("epoll_ctl", errno);
    FJORD_LOG_INFO("node %u: accepting %s links on %s", self, std::string(factory->name()).c_str(),
                   (*listener)->endpoint().c_str());
    listeners.push_back(std::move(listener).value());
  }
  return Status::ok();
}

void DataNode::Impl::wake() {
  const uint64_t one = 1;
  if (wake_fd.valid()) [[maybe_unused]]
    ssize_t n = ::write(wake_fd.get(), &one, sizeof one);
}

void DataNode::Impl::connection_loop() {
  uint64_t next_stats_ns = 0, next_connect_ns = 0;
  while (!stopping.load()) {
    epoll_event events[8];
    const int n = ::epoll_wait(epoll_fd.get(), events, 8, 200);
    for (int i = 0; i < n; ++i) {
      const uint32_t tag = events[i].data.u32;
      if (tag == kWakeTag) {
        uint64_t drained;
        [[maybe_unused]] ssize_t r = ::read(wake_fd.get(), &drained, sizeof drained);
      } else if (tag == kControlTag) {
        accept_control();
      } else if (tag >= kControlClientTag && tag - kControlClientTag < kMaxControlClients) {
        read_control(tag - kControlClientTag);
      } else if (tag < listeners.size()) {
        accept_on(*listeners[tag]);
      }
    }
    connect_to_servers(next_connect_ns);
    const uint64_t now = monotonic_ns();
    const uint32_t interval = stats_interval_s.load();
    expire_control(now);
    if (interval > 0 && now >= next_stats_ns) {
      if (next_stats_ns != 0) {
        std::istringstream lines(stats_text());
        for (std::string line; std::getline(lines, line);) FJORD_LOG_INFO("%s", line.c_str());
      }
      next_stats_ns = now + uint64_t{interval} * 1'000'000'000ULL;
    }
  }
  for (std::size_t slot = 0; slot < kMaxControlClients; ++slot) close_control(slot);
  for (auto& l : listeners) ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, l->fd(), nullptr);
  listeners.clear();
  // A stopped node answers no control client: one that connects now is
  // refused at once rather than left waiting, and the name is free for
  // another node in this process.
  if (control_fd.valid()) {
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, control_fd.get(), nullptr);
    control_fd.reset();
  }
  if (control_name[0] != '@') ::unlink(control_name.c_str());
}

// The set-ups that are ready now, without waiting for one that is not (a
// listener keeps a peer whose handshake has not all arrived for later, and
// its epoll set wakes this loop when more of it comes). At most 16 a call:
// an error may repeat, and the listener's fd stays readable while more wait.
void DataNode::Impl::accept_on(transport::Listener& listener) {
  for (int taken = 0; taken < 16; ++taken) {
    auto t = listener.accept(monotonic_ns());
    if (!t) {
      if (t.status().code() == StatusCode::kTimeout) return;
      log_setup_error(t.status());
      continue;
    }
    const NodeId peer = (*t)->remote_node();
    if (Status s = runtime->attach_link(std::move(t).value(), peer_kind(peer)); !s)
      FJORD_LOG_WARN("node %u: dropped a second connection from node %u: %s", self, peer, s.message().c_str());
  }
}

// Rejections name their reason. Under a flood of connections that fail
// their set-up (peers that connect and leave), at most one line a second:
// the others are counted in the next.
void DataNode::Impl::log_setup_error(const Status& error) {
  const uint64_t now = monotonic_ns();
  if (now < setup_log_quiet_until_ns) {
    ++setup_errors_not_logged;
    return;
  }
  if (setup_errors_not_logged == 0)
    FJORD_LOG_WARN("node %u: %s", self, error.message().c_str());
  else
    FJORD_LOG_WARN("node %u: %s (and %llu more failed set-ups not logged)", self, error.message().c_str(),
                   static_cast<unsigned long long>(setup_errors_not_logged));
  setup_errors_not_logged = 0;
  setup_log_quiet_until_ns = now + 1'000'000'000ULL;
}

// Data node <-> data node links where this node is the client.
void DataNode::Impl::connect_to_servers(uint64_t& next_try_ns) {
  const uint64_t now = monotonic_ns();
  if (now < next_try_ns) return;
  next_try_ns = now + 1'000'000'000ULL;
  for (const transport::LinkConfig* link : cluster.links.links_of(self)) {
    const NodeId peer = link->peer_of(self);
    const NodeDef* other = cluster.node(peer);
    if (link->server_node == self || !other || other->kind != NodeKind::kData || runtime->link_up(peer)) continue;
    transport::TransporterFactory* f = options.registry->find(link->type);
    if (!f) continue;
    auto t = f->connect(self, *link, now + 1'000'000'000ULL);
    if (t) (void)runtime->attach_link(std::move(t).value(), SenderKind::kDataNode);
  }
}

namespace {
// Sends a control reply and ends the connection's sending side, then takes
// what the client sent beyond its command: closing a Unix socket with
// unread bytes would reset the connection and lose the reply.
void finish_control(int fd, const std::string& reply) {
  std::size_t sent = 0;
  while (sent < reply.size()) {
    const ssize_t n = ::send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
}
}  // namespace

// A control connection is accepted at once and read as its bytes come (the
// connection thread never waits on one): the command is its first line, or
// all it sent before closing its side. One reply, then the node closes it.
void DataNode::Impl::accept_control() {
  for (;;) {
    // Out of descriptors, a waiting client is closed unserved rather than
    // left to keep the socket readable (fjord/base/acceptor.h).
    UniqueFd conn = control_acceptor.take(control_fd.get());
    if (!conn.valid()) return;
    ucred cred{};
    socklen_t cred_len = sizeof cred;
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
        (cred.uid != ::getuid() && cred.uid != 0)) {
      FJORD_LOG_WARN("node %u: control request from uid %u refused (the node runs as uid %u)", self, cred.uid,
                     ::getuid());
      continue;
    }
    std::size_t slot = 0;
    while (slot < kMaxControlClients && control_clients[slot].fd.valid()) ++slot;
    if (slot == kMaxControlClients) {
      finish_control(conn.get(), "error: too many control connections waiting for their command; try again\n");
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u32 = kControlClientTag + static_cast<uint32_t>(slot);
    if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, conn.get(), &ev) != 0) continue;
    control_clients[slot] = {std::move(conn), {}, monotonic_ns() + kControlTimeoutNs};
  }
}

void DataNode::Impl::read_control(std::size_t slot) {
  ControlClient& client = control_clients[slot];
  if (!client.fd.valid()) return;
  bool ended = false;
  char buf[kMaxControlLine + 1];
  for (;;) {
    const ssize_t got = ::recv(client.fd.get(), buf, sizeof buf, 0);
    if (got > 0) {
      client.line.append(buf, static_cast<std::size_t>(got));
      if (client.line.find('\n') != std::string::npos || client.line.size() > kMaxControlLine) break;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno != EAGAIN) return close_control(slot);  // the client is gone
    ended = got == 0;
    break;
  }
  const std::size_t newline = client.line.find('\n');
  std::string reply;
  if (newline <= kMaxControlLine) {  // a whole line (npos is not)
    std::string command = client.line.substr(0, newline);
    if (!command.empty() && command.back() == '\r') command.pop_back();
    reply = control_reply(command);
  } else if (client.line.size() > kMaxControlLine) {
    reply = "error: a command is one line of at most " + std::to_string(kMaxControlLine) + " bytes\n";
  } else if (ended) {
    reply = control_reply(client.line);  // a client that closed its side without a newline
  } else {
    return;  // more to come
  }
  // The reply is small (a few KB for many threads) against a socket's
  // buffer; a client that never reads gets what fits.
  finish_control(client.fd.get(), reply);
  close_control(slot);
}

void DataNode::Impl::close_control(std::size_t slot) {
  ControlClient& client = control_clients[slot];
  if (!client.fd.valid()) return;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, client.fd.get(), nullptr);
  client = {};
}

// A connection that sent no whole command in kControlTimeoutNs is closed
// (its slot is wanted; it gets no reply).
void DataNode::Impl::expire_control(uint64_t now_ns) {
  for (std::size_t slot = 0; slot < kMaxControlClients; ++slot)
    if (control_clients[slot].fd.valid() && now_ns >= control_clients[slot].deadline_ns) {
      FJORD_LOG_WARN("node %u: a control connection sent no command in %llu s; closed", self,
                     static_cast<unsigned long long>(kControlTimeoutNs / 1'000'000'000ULL));
      close_control(slot);
    }
}

std::string DataNode::Impl::control_reply(const std::string& command) {
  if (command == "stats") return stats_text();
  if (command == "stats json") return stats_json() + "\n";
  // "stats xml" is a mistake to name, not an unknown command.
  if (command.rfind("stats ", 0) == 0) return "error: stats takes nothing or 'json', got '" + command.substr(6) + "'\n";
  if (command == "layout") return layout_text();
  if (command == "ping") return "pong " + std::to_string(self) + "\n";
  if (command == "log-stats" || command.rfind("log-stats ", 0) == 0) {
    const std::string arg = command.size() > 10 ? command.substr(10) : std::string();
    char* end = nullptr;
    const unsigned long seconds = std::strtoul(arg.c_str(), &end, 10);
    if (arg.empty() || arg[0] < '0' || arg[0] > '9' || end != arg.c_str() + arg.size() || seconds > 86400)
      return "error: log-stats takes seconds in 0..86400, got '" + arg + "'\n";
    stats_interval_s = static_cast<uint32_t>(seconds);
    wake();
    return seconds == 0 ? "statistics logging off\n" : "statistics logged every " + std::to_string(seconds) + " s\n";
  }
  return "error: unknown command '" + command + "'; commands: stats, stats json, layout, log-stats SECONDS, ping\n";
}

std::string DataNode::Impl::layout_text() const {
  std::string out = "node " + std::to_string(self) + " thread layout (" + layout.source + "):\n";
  out += runtime->describe_threads();
  return out;
}

// One link's line of `stats`: its traffic while it is up, and the frames
// refused from its node (which outlive the link they took down).
std::string DataNode::Impl::link_text(const LinkStatsView& l) const {
  const transport::LinkStats& s = l.stats;
  std::string out = "node " + std::to_string(self) + " link to node " + std::to_string(l.node) + " (" + l.type + ", " +
                    sender_kind_name(l.peer_kind) + "): ";
  if (l.up)
    out += "sent " + std::to_string(s.bytes_sent) + " bytes in " + std::to_string(s.frames_sent) +
           " signals, mean send size " + std::to_string(s.mean_send_bytes) +
           " bytes (last 4096 sends, or all so far), received " + std::to_string(s.bytes_received) + " bytes in " +
           std::to_string(s.frames_received) + " signals, mean receive size " + std::to_string(s.mean_receive_bytes) +
           " bytes, slowdowns " + std::to_string(s.slowdown_count) + ", overloads " + std::to_string(s.overload_count) +
           ", send pressure " + l.pressure + ", ";
  else
    out += "down, ";
  out += "refused signals " + std::to_string(l.refused_signals);
  if (!l.last_refusal.empty()) out += " (last: " + l.last_refusal + ")";
  return out + "\n";
}

std::string DataNode::Impl::stats_text() const {
  std::string out;
  for (const ThreadStats& t : runtime->thread_stats()) {
    const uint64_t total = t.busy_ns + t.spin_ns + t.sleep_ns;
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.2f", t.mean_signals_per_loop);
    out += "node " + std::to_string(self) + " thread " + t.name + ": loops " + std::to_string(t.loops) + ", signals " +
           std::to_string(t.signals) + ", mean signals per loop " + mean + ", busy " + percent(t.busy_ns, total) +
           ", spin " + percent(t.spin_ns, total) + ", sleep " + percent(t.sleep_ns, total) + ", job buffer fill " +
           std::to_string(t.job_buffer_fill_percent) + "%, spills " + std::to_string(t.spill_events) +
           ", congestion stops " + std::to_string(t.congestion_stops) + "\n";
  }
  for (const LinkStatsView& l : runtime->link_stats()) out += link_text(l);
  if (pool)
    out += "node " + std::to_string(self) + " DataMemory: " + std::to_string(pool->pages_in_use()) + " of " +
           std::to_string(pool->capacity_pages()) + " pages in use\n";
  return out + block_stats_text();
}

std::string DataNode::Impl::stats_json() const {
  std::string out = "{\"node\":" + std::to_string(self) + ",\"threads\":[";
  bool first = true;
  for (const ThreadStats& t : runtime->thread_stats()) {
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.3f", t.mean_signals_per_loop);
    out += std::string(first ? "" : ",") + "{\"name\":\"" + json_escape(t.name) +
           "\",\"loops\":" + std::to_string(t.loops) + ",\"signals\":" + std::to_string(t.signals) +
           ",\"mean_signals_per_loop\":" + mean + ",\"busy_ns\":" + std::to_string(t.busy_ns) +
           ",\"spin_ns\":" + std::to_string(t.spin_ns) + ",\"sleep_ns\":" + std::to_string(t.sleep_ns) +
           ",\"job_buffer_fill_percent\":" + std::to_string(t.job_buffer_fill_percent) +
           ",\"spill_events\":" + std::to_string(t.spill_events) +
           ",\"congestion_stops\":" + std::to_string(t.congestion_stops) + "}";
    first = false;
  }
  out += "],\"links\":[";
  first = true;
  for (const LinkStatsView& l : runtime->link_stats()) {
    const transport::LinkStats& s = l.stats;
    out += std::string(first ? "" : ",") + "{\"node\":" + std::to_string(l.node) + ",\"type\":\"" +
           json_escape(l.type) + "\",\"peer_kind\":\"" + sender_kind_name(l.peer_kind) +
           "\",\"up\":" + (l.up ? "true" : "false") + ",\"bytes_sent\":" + std::to_string(s.bytes_sent) +
           ",\"frames_sent\":" + std::to_string(s.frames_sent) +
           ",\"mean_send_bytes\":" + std::to_string(s.mean_send_bytes) +
           ",\"bytes_received\":" + std::to_string(s.bytes_received) +
           ",\"frames_received\":" + std::to_string(s.frames_received) +
           ",\"mean_receive_bytes\":" + std::to_string(s.mean_receive_bytes) +
           ",\"slowdowns\":" + std::to_string(s.slowdown_count) + ",\"overloads\":" + std::to_string(s.overload_count) +
           ",\"pressure\":\"" + l.pressure + "\",\"refused_signals\":" + std::to_string(l.refused_signals) +
           ",\"last_refusal\":\"" + json_escape(l.last_refusal) + "\"}";
    first = false;
  }
  out += "]";
  if (pool)
    out += ",\"data_memory\":{\"pages_in_use\":" + std::to_string(pool->pages_in_use()) +
           ",\"pages\":" + std::to_string(pool->capacity_pages()) + "}";
  out += block_stats_json() + "}";
  return out;
}

}  // namespace fjord::engine
