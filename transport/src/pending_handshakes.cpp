#include "fjord/transport/pending_handshakes.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/log.h"
#include "fjord/transport/handshake.h"

namespace fjord::transport {

bool handshake_message_waiting(int fd, uint32_t magic) {
  std::byte bytes[kMaxHandshakeBytes];
  const ssize_t n = ::recv(fd, bytes, sizeof bytes, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // a failed peer: say so now
  if (n == 0) return true;                                                      // the peer left
  const auto got = static_cast<std::size_t>(n);
  if (got < kHandshakePrefixBytes) return false;
  Result<std::size_t> total = handshake_message_bytes(std::span(bytes, got), magic);
  return !total || got >= *total;  // not a handshake: the handshake names what is wrong
}

PendingHandshakes::PendingHandshakes(int epoll_fd, std::string what)
    : epoll_fd_(epoll_fd),
      what_(std::move(what)),
      timer_(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {
  // Level-triggered: an expired timer keeps the set readable until
  // take_ready() reads it. Without it (no timerfd here), expired
  // connections are still closed at the next accept().
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (!timer_.valid() || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_.get(), &ev) != 0) {
    FJORD_LOG_WARN("%s: no set-up timer (%s): silent peers are closed only when another connection comes",
                   what_.c_str(), std::strerror(errno));
    timer_.reset();
  }
}

void PendingHandshakes::arm_timer(bool at_once) {
  if (!timer_.valid()) return;
  const DeadlineNs at = at_once ? 1 : std::min(next_deadline(), flood_log_.due());
  itimerspec spec{};  // all zero: off
  if (at != UINT64_MAX) {
    spec.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000ULL);
    spec.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000ULL);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  }
  (void)::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
}

bool PendingHandshakes::add(Entry entry, DeadlineNs now) {
  if (!make_room(entry.source, now)) {
    flood_log_.closed(what_, entry.source,
                      "refused a connection from " + entry.peer + ": the connections waiting (" +
                          std::to_string(pending_.size()) + ", " + std::to_string(count_of(entry.source)) +
                          " of its source) fill a bound and each has its handshake in",
                      now);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = 0;  // readiness only: take_ready() looks at every waiting connection
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, entry.conn.get(), &ev) != 0) {
    FJORD_LOG_WARN("%s: refused a connection from %s: epoll_ctl: %s", what_.c_str(), entry.peer.c_str(),
                   std::strerror(errno));
    return false;
  }
  auto counted = std::find_if(sources_.begin(), sources_.end(), [&](const auto& s) { return s.first == entry.source; });
  if (counted == sources_.end())
    sources_.emplace_back(entry.source, 1);
  else
    ++counted->second;
  pending_.push_back(std::move(entry));
  FJORD_ASSERT(pending_.size() <= kMaxPending);
  arm_timer();
  return true;
}

bool PendingHandshakes::make_room(const std::string& source, DeadlineNs now) {
  if (count_of(source) >= kMaxPendingPerSource) {
    const std::size_t own = oldest_silent(source);
    if (own == SIZE_MAX) return false;
    evict(own, "its source already had " + std::to_string(kMaxPendingPerSource) + " waiting", now);
  }
  if (pending_.size() >= kMaxPending) expire(now);
  if (pending_.size() < kMaxPending) return true;
  std::size_t victim = oldest_silent(busiest_source());
  if (victim == SIZE_MAX) victim = oldest_silent("");
  if (victim == SIZE_MAX) return false;
  evict(victim, std::to_string(kMaxPending) + " waited, the most from its source", now);
  FJORD_ASSERT(pending_.size() < kMaxPending);
  return true;
}

std::size_t PendingHandshakes::count_of(const std::string& source) const {
  for (const auto& [name, count] : sources_)
    if (name == source) return count;
  return 0;
}

std::string PendingHandshakes::busiest_source() const {
  FJORD_ASSERT(!sources_.empty());
  auto most = std::max_element(sources_.begin(), sources_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  return most->first;
}

// Oldest by deadline: every set-up gets the same budget from its accept.
std::size_t PendingHandshakes::oldest_silent(const std::string& source) {
  std::size_t oldest = SIZE_MAX;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Entry& e = pending_[i];
    if (!source.empty() && e.source != source) continue;
    if (oldest != SIZE_MAX && e.deadline >= pending_[oldest].deadline) continue;
    if (request_waiting(e)) continue;  // taken at the next take_ready
    oldest = i;
  }
  return oldest;
}

bool PendingHandshakes::request_waiting(Entry& e) {
  if (!e.setup) return handshake_message_waiting(e.conn.get(), kHandshakeRequestMagic);
  const PendingSetup::Progress progress = e.setup->advance();
  watch(e, progress == PendingSetup::Progress::kWantWrite);
  return progress == PendingSetup::Progress::kReady;
}

// Edge-triggered both ways: a set-up waiting for room to send is looked at
// again when the socket drains, and only then.
void PendingHandshakes::watch(Entry& e, bool write) {
  if (e.watching_write == write) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (write ? EPOLLOUT : 0U);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.conn.get(), &ev) == 0) e.watching_write = write;
}

void PendingHandshakes::evict(std::size_t i, const std::string& why, DeadlineNs now) {
  FJORD_ASSERT(i < pending_.size());
  Entry closed = take(i);
  flood_log_.closed(
      what_, closed.source,
      "closed a connection from " + closed.peer + " still waiting for its handshake to make room (" + why + ")", now);
}

std::optional<PendingHandshakes::Entry> PendingHandshakes::take_ready(DeadlineNs now) {
  // Edges already seen are taken; every connection is looked at below.
  epoll_event events[16];
  while (::epoll_wait(epoll_fd_, events, 16, 0) == 16) {
  }
  if (timer_.valid()) {
    uint64_t expirations;
    (void)::read(timer_.get(), &expirations, sizeof expirations);  // nothing to read when not expired
  }
  expire(now);
  flood_log_.flush(what_, now);
  std::optional<Entry> ready;
  bool more_ready = false;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (!request_waiting(pending_[i])) continue;
    if (!ready) {
      ready = take(i--);  // the last entry moved into slot i: look at it next
      continue;
    }
    more_ready = true;
    // The caller takes one a call, and polls the set before the next: the
    // edge of this one was taken above, so re-arm it (EPOLL_CTL_MOD queues
    // an edge-triggered fd that is ready now), or the set would read idle
    // while it waits and its peer would time out.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, pending_[i].conn.get(), &ev);
  }
  // A setup that read its request out of the socket (through TLS) leaves
  // it with nothing to show: the timer, due at once, keeps the set readable.
  arm_timer(more_ready);
  return ready;
}

void PendingHandshakes::expire(DeadlineNs now) {
  for (std::size_t i = 0; i < pending_.size();) {
    if (now < pending_[i].deadline || request_waiting(pending_[i])) {
      ++i;
      continue;
    }
    Entry closed = take(i);
    flood_log_.closed(what_, closed.source,
                      "closed a connection from " + closed.peer + " that sent no whole handshake in " +
                          std::to_string(kSetupBudgetNs / 1'000'000'000ULL) + " s",
                      now);
  }
}

DeadlineNs PendingHandshakes::next_deadline() const {
  DeadlineNs earliest = UINT64_MAX;
  for (const Entry& e : pending_) earliest = std::min(earliest, e.deadline);
  return earliest;
}

// Out of the epoll set first, while the entry still holds its descriptor: a
// connection set up and handed to a transporter stays open, and left in the
// set, its every edge (each burst of the link's data, its close) would make
// the listener's fd readable, waking the poller for nothing.
PendingHandshakes::Entry PendingHandshakes::take(std::size_t i) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pending_[i].conn.get(), nullptr);
  Entry out = std::move(pending_[i]);
  if (i + 1 != pending_.size()) pending_[i] = std::move(pending_.back());
  pending_.pop_back();
  auto counted = std::find_if(sources_.begin(), sources_.end(), [&](const auto& s) { return s.first == out.source; });
  FJORD_ASSERT(counted != sources_.end());
  FJORD_ASSERT(counted->second > 0);
  if (--counted->second == 0) {
    *counted = std::move(sources_.back());
    sources_.pop_back();
  }
  return out;
}

void PendingHandshakes::FloodLog::closed(const std::string& what, const std::string& source, const std::string& line,
                                         DeadlineNs now) {
  flush(what, now);
  if (now >= window_end_) {
    FJORD_LOG_WARN("%s: %s", what.c_str(), line.c_str());
    window_end_ = now + 1'000'000'000ULL;
    return;
  }
  ++counted_;
  auto named = std::find_if(sources_.begin(), sources_.end(), [&](const auto& s) { return s.first == source; });
  if (named != sources_.end())
    ++named->second;
  else if (sources_.size() < 16)
    sources_.emplace_back(source, 1);
}

void PendingHandshakes::FloodLog::flush(const std::string& what, DeadlineNs now) {
  if (counted_ == 0 || now < window_end_) return;
  auto most = std::max_element(sources_.begin(), sources_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  FJORD_LOG_WARN("%s: %zu more pending set-ups closed in the last second, most (%zu) from %s", what.c_str(), counted_,
                 most != sources_.end() ? most->second : 0, most != sources_.end() ? most->first.c_str() : "?");
  counted_ = 0;
  sources_.clear();
  // This summary opens a new second, so the next closure is counted too:
  // under a flood the log gets one line a second.
  window_end_ = now + 1'000'000'000ULL;
}

DeadlineNs PendingHandshakes::FloodLog::due() const { return counted_ == 0 ? UINT64_MAX : window_end_; }

}  // namespace fjord::transport
