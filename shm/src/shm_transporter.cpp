// ShmTransporter data path. Hot path: no allocation, no system call while
// both sides poll; a futex or eventfd wake only when the peer sleeps; a
// life-line poll once per kLifeLineEmptyPolls empty polls.
#include "shm_transporter.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/clock.h"

namespace fjord::shm {

using transport::FlushStatus;
using transport::ReceiveBatch;
using transport::WaitResult;

namespace {

Side other(Side side) { return side == kClientSide ? kServerSide : kClientSide; }

// The fill above which send_buffer_used() re-reads the consumer's index: the
// slowdown limit, scaled to the ring as Transporter::send_pressure() does.
std::size_t pressure_refresh_bytes(const transport::LinkConfig& config, std::size_t capacity) {
  if (config.send_buffer_bytes == 0) return 0;
  return static_cast<std::size_t>(static_cast<long double>(config.slowdown_bytes) * capacity /
                                  config.send_buffer_bytes);
}

}  // namespace

Result<std::unique_ptr<transport::Transporter>> ShmTransporter::create(transport::LinkConfig config, NodeId self,
                                                                       Resources resources) {
  FJORD_ASSERT(resources.life_line.valid());
  FJORD_ASSERT(resources.receive_event.valid());
  FJORD_ASSERT(resources.send_event.valid());
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return io_error("epoll_create1", errno);
  // Level-triggered: readable while a wake-up token is unread or the life
  // line has hung up (which then stays so: a dead link keeps waking waiters).
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = resources.receive_event.get();
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, resources.receive_event.get(), &event) != 0)
    return io_error("epoll_ctl add eventfd", errno);
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = resources.life_line.get();
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, resources.life_line.get(), &event) != 0)
    return io_error("epoll_ctl add life line", errno);
  return std::unique_ptr<transport::Transporter>(
      new ShmTransporter(std::move(config), self, std::move(resources), std::move(epoll)));
}

ShmTransporter::ShmTransporter(transport::LinkConfig config, NodeId self, Resources resources, UniqueFd epoll)
    : Transporter(std::move(config), self),
      side_(resources.side),
      life_line_(std::move(resources.life_line)),
      segment_(std::move(resources.segment)),
      receive_event_(std::move(resources.receive_event)),
      send_event_(std::move(resources.send_event)),
      epoll_(std::move(epoll)),
      header_(segment_.header()),
      spin_config_ns_(this->config().params.get_uint("ShmSpintime") * 1000),
      tx_(&header_.rings[side_].indices, segment_.ring_data(side_), segment_.ring_bytes()),
      pressure_refresh_bytes_(pressure_refresh_bytes(this->config(), segment_.ring_bytes())),
      rx_(&header_.rings[other(side_)].indices, segment_.ring_data(other(side_)), segment_.ring_bytes()) {
  FJORD_ASSERT(segment_.ring_bytes() >= 2 * frame::kMaxFrameBytes);
  note_connect();
}

ShmTransporter::~ShmTransporter() {
  // An orderly close, so the peer reads a reason rather than only the life
  // line's hang-up. on_down() runs here, while this is still a ShmTransporter.
  declare_down(
      Status(StatusCode::kLinkDown, "the transporter of node " + std::to_string(local_node()) + " was destroyed"));
}

// ---- send side ------------------------------------------------------------

std::span<std::byte> ShmTransporter::reserve(std::size_t min_bytes) {
  FJORD_ASSERT(min_bytes > 0);
  FJORD_ASSERT(min_bytes <= frame::kMaxFrameBytes);
  if (!is_up()) return {};
  std::span<std::byte> space = tx_.reserve(min_bytes);
  if (space.empty()) on_ring_full();
  return space;
}

void ShmTransporter::on_ring_full() {
  if (tx_.corrupt()) {
    declare_down(Status(StatusCode::kProtocolError, "node " + std::to_string(remote_node()) +
                                                        " moved the read index of our shared ring inconsistently"));
    return;
  }
  // A full ring with unpublished bytes: publish them so the reader can
  // drain; the caller retries reserve() after its own flush anyway.
  if (tx_.unpublished_bytes() != 0) (void)flush();
  if (peer_closed()) {
    declare_down(peer_gone_reason());
    return;
  }
  if (++full_reserves_ < kLifeLineFullReserves) return;
  full_reserves_ = 0;
  if (!life_line_alive()) declare_down(peer_gone_reason());
}

void ShmTransporter::commit(std::size_t bytes, uint32_t frames) {
  tx_.commit(bytes);
  full_reserves_ = 0;
  note_commit(bytes, frames);
  note_fill_level();
}

// The pressure level can only leave kNormal above the slowdown fill, and only
// return to it from above: below that fill, with the level known to be
// normal, there is nothing to recompute (the common case, a few instructions).
void ShmTransporter::note_fill_level() {
  if (tx_.used_bytes() < pressure_refresh_bytes_ && !above_slowdown_fill_) return;
  note_send_buffer_level();
  above_slowdown_fill_ = tx_.used_bytes() >= pressure_refresh_bytes_;
}

FlushStatus ShmTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  // A peer that closed will never read: say so rather than publish into the
  // void. Checked before publishing, so kFlushed always means the bytes were
  // published while the peer was there to read them.
  if (peer_closed()) {
    declare_down(peer_gone_reason());
    return FlushStatus::kDown;
  }
  const std::size_t published = tx_.publish();  // P1 inside
  if (published != 0) {
    note_send(published);
    wake(header_.rings[side_].reader_wakeup, send_event_.get());
  }
  note_fill_level();  // above the slowdown fill this re-reads the reader's progress
  return FlushStatus::kFlushed;
}

std::size_t ShmTransporter::send_buffer_used() const {
  // Above the slowdown fill the pressure level matters, so look at the
  // reader's real progress; below it the cached view is good enough and
  // touches nothing shared.
  if (tx_.used_bytes() >= pressure_refresh_bytes_) (void)tx_.refresh();
  return tx_.used_bytes();
}

void ShmTransporter::wake(WakeupWord& word, int event_fd) const {
  switch (take_sleeper(word)) {  // FP + L2
    case SleepState::kAwake: return;
    case SleepState::kFutex: futex_wake(word); return;
    case SleepState::kEventFd: {
      const uint64_t one = 1;
      // EAGAIN only if the counter is saturated: the reader is woken anyway.
      (void)!::write(event_fd, &one, sizeof one);
      return;
    }
  }
}

// ---- receive side ---------------------------------------------------------

ReceiveBatch ShmTransporter::receive() {
  if (scanned_bytes_ == 0) {
    if (is_up())
      poll_ring();
    else if (!drained_)
      drain_after_down();
  }
  return {rx_.readable().first(scanned_bytes_), scanned_frames_, scanned_bytes_ != 0};
}

void ShmTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= scanned_bytes_, "release beyond the received frames");
  if (bytes == scanned_bytes_) {
    scanned_frames_ = 0;
  } else {
    // A partial release: count the frames given back (their lengths are valid).
    frame::FrameCursor cursor(rx_.readable().first(bytes));
    frame::SignalView view;
    while (cursor.next(view)) --scanned_frames_;
  }
  scanned_bytes_ -= bytes;
  rx_.release(bytes);  // C2 inside
}

// Validates the batch just taken from the ring: it must be whole frames,
// end to end (a sender publishes only whole frames). Takes the link down
// otherwise.
void ShmTransporter::take_batch() {
  const std::span<const std::byte> batch = rx_.readable();
  const frame::ScanResult scan = frame::scan_frames(batch, config().checksum);
  if (scan.whole_bytes != batch.size()) {
    poison(Status(StatusCode::kProtocolError,
                  "malformed frame from node " + std::to_string(remote_node()) + " at stream offset " +
                      std::to_string(rx_.read_index() + scan.whole_bytes) + ": " + frame::frame_error_name(scan.error) +
                      (scan.error == frame::FrameError::kIncomplete ? " (its batch ends inside it)" : "")));
    return;
  }
  scanned_bytes_ = batch.size();
  scanned_frames_ = scan.frames;
  note_receive(scan.whole_bytes, scan.frames);
}

void ShmTransporter::poison(Status reason) {
  rx_poisoned_ = true;  // nothing after a malformed frame can be trusted
  declare_down(std::move(reason));
}

// One busy poll: the next batch's envelope (C1), a single load while empty.
void ShmTransporter::poll_ring() {
  if (rx_poisoned_) return;
  if (!rx_.refresh()) {
    poison(Status(StatusCode::kProtocolError,
                  "node " + std::to_string(remote_node()) + " wrote a malformed batch envelope into its shared ring"));
    return;
  }
  if (rx_.readable().empty()) {
    note_empty_poll();
    return;
  }
  empty_polls_ = 0;
  take_batch();
}

void ShmTransporter::note_empty_poll() {
  if (peer_closed()) {
    peer_gone();
    return;
  }
  if (++empty_polls_ < kLifeLineEmptyPolls) return;
  empty_polls_ = 0;
  if (!life_line_alive()) peer_gone();
}

// The peer closed or died: whatever it published before is still ours.
void ShmTransporter::peer_gone() {
  declare_down(peer_gone_reason());
  drain_after_down();
}

// After the link went down: take the batches the peer published before,
// one per call, until the first empty envelope; then read nothing more.
void ShmTransporter::drain_after_down() {
  if (rx_poisoned_ || !rx_.refresh() || rx_.readable().empty()) {
    drained_ = true;
    return;
  }
  take_batch();
}

bool ShmTransporter::peer_closed() const {
  // Relaxed on the fast path: the peer writes this line once, so reading it
  // costs a cache hit. Acquire when set, pairing with the release in
  // on_down(): the reason text and everything the peer published before
  // closing are then visible.
  const std::atomic<uint32_t>& closed = header_.sides[other(side_)].closed;
  if (closed.load(std::memory_order_relaxed) == 0) return false;
  return closed.load(std::memory_order_acquire) != 0;
}

bool ShmTransporter::life_line_alive() const {
  // Nothing is ever sent on the life line after set-up, so any event (data,
  // EOF, hang-up, error) means the peer's end is gone or misbehaving.
  pollfd p{life_line_.get(), POLLIN | POLLRDHUP, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, 0);
  } while (rc < 0 && errno == EINTR);
  return rc == 0;
}

Status ShmTransporter::peer_gone_reason() const {
  const std::string peer = "node " + std::to_string(remote_node());
  if (peer_closed()) {
    const SideShared& theirs = header_.sides[other(side_)];
    std::string reason(theirs.reason, strnlen(theirs.reason, kCloseReasonBytes));
    for (char& c : reason)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    return Status(StatusCode::kLinkDown, peer + " closed the shm link: " + reason);
  }
  return Status(StatusCode::kLinkDown,
                peer + " is gone: its process closed its end of the shm life line (exited or was killed)");
}

// ---- waiting --------------------------------------------------------------

// L1 of the wake-up protocol, after announce_sleep(): is there still nothing
// to read? Takes the link down if the peer is gone.
bool ShmTransporter::ring_empty_after_recheck() {
  poll_ring();
  if (scanned_bytes_ != 0 || !is_up()) return false;
  if (peer_closed()) {
    peer_gone();
    return false;
  }
  return true;
}

bool ShmTransporter::arm_wakeup() {
  if (scanned_bytes_ != 0 || !is_up()) return false;
  WakeupWord& mine = header_.rings[other(side_)].reader_wakeup;
  announce_sleep(mine, SleepState::kEventFd);  // S1 + FC
  if (ring_empty_after_recheck()) {
    // About to sleep anyway, so a system call is cheap here: a dead peer
    // must not leave an epoll loop waking forever on the hung-up socket.
    if (life_line_alive()) return true;
    peer_gone();
  }
  (void)cancel_sleep(mine);
  return false;
}

void ShmTransporter::disarm_wakeup() {
  (void)cancel_sleep(header_.rings[other(side_)].reader_wakeup);
  // Always drain: a waker that took the sleeper may write its token after a
  // drain, leaving one stale token; the next disarm removes it, so a stale
  // token costs at most one spurious wake-up, never a busy loop.
  uint64_t tokens = 0;
  (void)!::read(receive_event_.get(), &tokens, sizeof tokens);
}

WaitResult ShmTransporter::wait_for_receive(uint64_t timeout_ns, uint64_t spin_ns) {
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
  const uint64_t spin = std::max(spin_ns, spin_config_ns_);
  const uint64_t spin_until = spin > deadline - start ? deadline : start + spin;
  for (;;) {
    if (receive().frames != 0) return WaitResult::kReady;
    if (!is_up()) return WaitResult::kDown;
    if (monotonic_ns() >= spin_until) break;
    cpu_relax();
  }
  WakeupWord& mine = header_.rings[other(side_)].reader_wakeup;
  for (;;) {
    announce_sleep(mine, SleepState::kFutex);  // S1 + FC
    if (ring_empty_after_recheck()) {          // L1
      const uint64_t now = monotonic_ns();
      if (now >= deadline) {
        (void)cancel_sleep(mine);
        return WaitResult::kTimeout;
      }
      futex_sleep(mine, std::min(deadline - now, kSleepSliceNs));
    }
    (void)cancel_sleep(mine);
    if (receive().frames != 0) return WaitResult::kReady;
    if (!is_up()) return WaitResult::kDown;
    // Woken with nothing to read: a timeout slice or a spurious wake-up.
    // The peer may have died without closing: ask the life line.
    if (!life_line_alive()) {
      peer_gone();
      return receive().frames != 0 ? WaitResult::kReady : WaitResult::kDown;
    }
    if (monotonic_ns() >= deadline) return WaitResult::kTimeout;
  }
}

// ---- down -----------------------------------------------------------------

void ShmTransporter::on_down() {
  // Any thread, at most once. Only shared-memory stores, wake-ups and
  // shutdown(2): all safe while our sender or receiver thread is busy.
  SideShared& mine = header_.sides[side_];
  const std::string reason = down_reason().message();
  const std::size_t n = std::min(reason.size(), kCloseReasonBytes - 1);
  std::memcpy(mine.reason, reason.data(), n);
  mine.reason[n] = '\0';
  // Release; pairs with the acquire in the peer's peer_closed(): the reason
  // and everything we published are visible once the peer sees the word.
  mine.closed.store(1, std::memory_order_release);
  wake(header_.rings[side_].reader_wakeup, send_event_.get());            // the peer, if it sleeps on our ring
  wake(header_.rings[other(side_)].reader_wakeup, receive_event_.get());  // our own receiver, if it sleeps
  // The peer's life line sees EOF; our epoll fd becomes readable too.
  ::shutdown(life_line_.get(), SHUT_RDWR);
}

}  // namespace fjord::shm
