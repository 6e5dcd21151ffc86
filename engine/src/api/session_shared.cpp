// API: a Session's life, and how the sessions of one shared cluster
// connection send, receive and wait (shared_link.h has the waking protocol).
// None of this runs on a Connection's paths beyond one test of shared_.
#include <algorithm>
#include <thread>

#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "shared_link.h"

namespace fjord::api {

using namespace engine::protocol;
using engine::block_numbers::kApi;

namespace {
uint64_t ms(uint32_t v) { return uint64_t{v} * 1'000'000; }
// The longest a sleeping session or a waiting poll owner goes without
// looking at its deadline. Wakes do not depend on it: it bounds a wait.
constexpr uint64_t kWaitSliceNs = 50'000'000;
// Every index an answer can name has a mailbox (0, a Connection's own, is
// never open).
static_assert(detail::kSessionMask == ClusterConnection::kMaxSessions);
}  // namespace

Session::Session(ClusterConnection& cluster, uint32_t index, std::unique_ptr<ClusterConnection> owned)
    : owned_cluster_(std::move(owned)),
      cluster_(cluster),
      index_(index),
      shared_(cluster.shared_),
      options_(cluster.options_),
      self_(cluster.self_),
      data_node_(cluster.data_node_),
      tc_instances_(cluster.tc_instances_),
      ldm_instances_(cluster.ldm_instances_),
      link_(cluster.link_.get()) {
  FJORD_ASSERT(index <= ClusterConnection::kMaxSessions);
  FJORD_ASSERT(link_ != nullptr);
  tx_id_base_ = uint64_t{self_} << 48 | uint64_t{index_} << 40;
  if (shared_) mailbox_ = cluster.shared_link_->mailboxes[index].get();
}

// A Connection's session leaves everything to its cluster connection, which
// closes the link (the node then rolls back what the program left open).
// A shared one's link stays: the session rolls back its own.
Session::~Session() {
  if (!shared_) return;
  close_everything_open();
  detail::SharedLink& shared = *cluster_.shared_link_;
  const std::lock_guard lock(shared.sessions_mutex);
  FJORD_ASSERT(shared.sessions[index_] == this);
  shared.sessions[index_] = nullptr;
  mailbox_->set_open(false);
}

void Session::close_everything_open() {
  for (auto& tx : transactions_)
    if (tx->state_ != Transaction::State::kIdle) tx->close();
  for (auto& tx : refused_)
    if (tx->state_ != Transaction::State::kIdle) tx->close();
  for (auto& scan : scans_)
    if (!scan->closed_) scan->close();
}

// ---- waiting -------------------------------------------------------------------------

bool Session::wait_shared(bool (*done)(const void*), const void* context, uint32_t timeout_ms) {
  detail::SharedLink& shared = *cluster_.shared_link_;
  const uint64_t deadline = monotonic_ns() + ms(timeout_ms);
  // Every way out of the wait passes a hand-off of the poll right on.
  const auto leave = [&](bool result) {
    if (!polling_) shared.pass_poll_right_on();
    return result;
  };
  for (;;) {
    drain_mailbox();
    if (done(context)) return leave(true);
    if (!link_->is_up()) {
      fail_everything(not_connected());
      return leave(done(context));
    }
    if (monotonic_ns() > deadline) return leave(false);
    // A wait inside a callback of this session's own poll keeps the right.
    if (polling_ || shared.try_take_poll_right()) {
      const bool outer = polling_;
      polling_ = true;
      // Frames handed over before the right was taken are in the mailbox:
      // drained first (none come while this session owns the right).
      drain_mailbox();
      while (!done(context) && link_->is_up() && monotonic_ns() <= deadline) poll_as_owner(deadline);
      polling_ = outer;
      if (!outer) shared.release_poll_right();
      continue;
    }
    sleep_until_woken(deadline);
  }
}

void Session::poll_as_owner(uint64_t deadline_ns) {
  if (receive_routed()) return;
  if (options_.poll_mode != PollMode::kSleep) return;
  const uint64_t now = monotonic_ns();
  if (now >= deadline_ns) return;
  (void)link_->wait_for_receive(std::min(deadline_ns - now, kWaitSliceNs), uint64_t{options_.spin_us} * 1000);
}

// Each answer names its session in bits 24..30 of its first word (api_conn,
// or a schema request's id): this session's are dispatched here, the
// others' handed over a run at a time (consecutive frames for one session:
// one lock of its mailbox, one look at whether it sleeps). No lock is held
// across a dispatch (a callback may make or destroy a session).
bool Session::receive_routed() {
  const transport::ReceiveBatch batch = link_->receive();
  detail::SharedLink& shared = *cluster_.shared_link_;
  if (batch.bytes.empty()) {
    if (shared.unflushed.load(std::memory_order_relaxed)) (void)flush_shared();
    return false;
  }
  frame::FrameCursor cursor(batch.bytes);
  engine::Signal signal;
  signal.sender_node = data_node_;
  std::size_t at = 0;
  // The run not yet handed over: bytes [run_at, at) for session run_owner.
  uint32_t run_owner = index_;
  std::size_t run_at = 0;
  while (cursor.next(signal.view)) {
    const std::size_t end = batch.bytes.size() - cursor.remaining_bytes();
    const uint32_t owner = signal.word_count() > 0 ? detail::session_of(signal.word(0)) : index_;
    if (owner != run_owner) {
      if (run_owner != index_) shared.mailboxes[run_owner]->deliver(batch.bytes.subspan(run_at, at - run_at));
      run_owner = owner;
      run_at = at;
    }
    if (owner == index_) dispatch(signal);
    at = end;
  }
  if (run_owner != index_) shared.mailboxes[run_owner]->deliver(batch.bytes.subspan(run_at, at - run_at));
  link_->release(batch.bytes.size());
  return true;
}

// With nothing handed over and the right held by another session, the
// thread yields: a poll loop sharing a CPU with the owner would otherwise
// spin through the owner's time slice.
// Receives (and routes) what waits if this session holds the right to
// receive or can take it now; false when another session holds it.
bool Session::receive_with_poll_right(detail::SharedLink& shared) {
  if (polling_) {
    (void)receive_routed();
    return true;
  }
  if (!shared.try_take_poll_right()) return false;
  polling_ = true;
  (void)receive_routed();
  polling_ = false;
  shared.release_poll_right();
  return true;
}

void Session::poll_shared_once() {
  detail::SharedLink& shared = *cluster_.shared_link_;
  const int before = completed_;
  drain_mailbox();
  if (!receive_with_poll_right(shared) && completed_ == before) {
    std::this_thread::yield();
  }
}

void Session::drain_mailbox() {
  detail::Mailbox& box = *mailbox_;
  if (!box.has_frames()) return;
  box.take(box.taken);
  frame::FrameCursor cursor(box.taken);
  engine::Signal signal;
  signal.sender_node = data_node_;
  while (cursor.next(signal.view)) dispatch(signal);
}

void Session::sleep_until_woken(uint64_t deadline_ns) {
  detail::Mailbox& box = *mailbox_;
  detail::SharedLink& shared = *cluster_.shared_link_;
  // What ends the sleep: an answer handed over, the poll right free (this
  // session's answers may be on the link), the link down.
  const auto woken = [&] {
    return box.has_frames() || !shared.poll_owned.load(std::memory_order_acquire) || !link_->is_up();
  };
  const uint64_t spin_end = monotonic_ns() + uint64_t{options_.spin_us} * 1000;
  while (monotonic_ns() < spin_end)
    if (woken()) return;
  shared.sleepers.fetch_add(1, std::memory_order_relaxed);  // ordered by S1 in begin_sleep
  box.begin_sleep();
  const uint64_t now = monotonic_ns();
  if (!woken() && now < deadline_ns) box.sleep(std::min(deadline_ns - now, kWaitSliceNs));
  box.end_sleep();
  shared.sleepers.fetch_sub(1, std::memory_order_relaxed);
}

// ---- sending -------------------------------------------------------------------------

Status Session::pack_frame_shared(const SignalOut& out, uint16_t block, uint16_t instance, bool then_flush) {
  const bool checksum = link_->config().checksum;
  const std::size_t bytes = frame::frame_bytes_for(out.word_count, out.section_list(), checksum);
  if (bytes == 0) return Status(StatusCode::kInvalidArgument, "request too large for one 32 KB frame");
  detail::SharedLink& shared = *cluster_.shared_link_;
  shared.send_mutex.lock();
  std::span<std::byte> space = link_->reserve(bytes);
  if (space.empty()) {
    shared.send_mutex.unlock();
    if (Status s = wait_for_room_shared(bytes, space); !s) return s;  // on success, locked again
  }
  const std::lock_guard lock(shared.send_mutex, std::adopt_lock);
  frame::pack_frame_sized(space.data(), bytes, {out.number, {block, instance}, {kApi, 0}, 0}, out.data(),
                          out.section_list(), checksum);
  link_->commit(bytes, 1);
  // Only a flush that took everything out clears the flag: a partial one
  // or a link down is left to flush_shared(), which reports the latter.
  const bool flushed = then_flush && link_->flush() == transport::FlushStatus::kFlushed;
  shared.unflushed.store(!flushed, std::memory_order_relaxed);
  return Status::ok();
}

// The send lock is not held while waiting: the others may receive (and
// the poll owner must, for the node to read what fills the buffer).
Status Session::wait_for_room_shared(std::size_t bytes, std::span<std::byte>& space) {
  detail::SharedLink& shared = *cluster_.shared_link_;
  const uint64_t deadline = monotonic_ns() + ms(options_.request_timeout_ms);
  for (;;) {
    if (!link_->is_up()) return link_->down_reason();
    shared.send_mutex.lock();
    shared.unflushed.store(link_->flush() == transport::FlushStatus::kPending, std::memory_order_relaxed);
    space = link_->reserve(bytes);
    if (!space.empty()) {
      FJORD_ASSERT(space.size() >= bytes);  // all or nothing
      return Status::ok();
    }
    shared.send_mutex.unlock();
    if (!receive_with_poll_right(shared)) {
      std::this_thread::yield();
    }
    drain_mailbox();
    if (monotonic_ns() > deadline) return Status(StatusCode::kTimeout, "send buffer to the data node stayed full");
  }
}

// Nothing committed is left unflushed (the flag is this thread's own store
// or one made under the send lock after a flush that took out everything
// committed before it): no lock to take.
Status Session::flush_shared() {
  detail::SharedLink& shared = *cluster_.shared_link_;
  if (!shared.unflushed.load(std::memory_order_relaxed) && link_->is_up()) return Status::ok();
  transport::FlushStatus flushed;
  {
    const std::lock_guard lock(shared.send_mutex);
    flushed = link_->flush();
    shared.unflushed.store(flushed == transport::FlushStatus::kPending, std::memory_order_relaxed);
  }
  if (flushed == transport::FlushStatus::kDown) {
    fail_everything(link_->down_reason());
    return link_->down_reason();
  }
  return Status::ok();
}

}  // namespace fjord::api
