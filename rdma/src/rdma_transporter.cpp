// RdmaTransporter data path. Hot path: no allocation; one ibv_post_send per
// flush; an empty receive poll reads one word of the ring (and, every
// kSlowCheckEvery polls, the receive CQ and the rdma_cm channel).
#include "rdma_transporter.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"

namespace fjord::rdma {

using transport::FlushStatus;
using transport::ReceiveBatch;

namespace {

// Counters with a single writer: a relaxed load+store is an exact increment.
void count_up(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace

RdmaTransporter::RdmaTransporter(transport::LinkConfig config, NodeId self, std::unique_ptr<LinkResources> resources,
                                 const wire::RingInfo& peer)
    : Transporter(std::move(config), self),
      r_(std::move(resources)),
      peer_(peer),
      ring_bytes_(r_->params.ring_bytes),
      queue_depth_(r_->params.queue_depth),
      signal_interval_(std::max<uint32_t>(1, queue_depth_ / 4)),
      receive_batch_(std::max<uint32_t>(1, queue_depth_ / 2)),
      credit_release_bytes_(ring_bytes_ / 4),
      send_ring_(r_->send_ring.data()),
      receive_ring_(r_->receive_ring.data()),
      credit_block_(reinterpret_cast<const wire::CreditBlock*>(r_->control_at(wire::kCreditOffset))),
      posted_end_(reinterpret_cast<uint64_t*>(r_->control_at(wire::kPostedEndOffset))),
      read_target_(reinterpret_cast<const uint64_t*>(r_->control_at(wire::kReadTargetOffset))),
      peer_receives_(peer.queue_depth),
      notifies_(r_->peer_receives_used),  // repeated hellos took some of its receives, like wake-ups
      reported_receives_(queue_depth_),
      posted_receives_(queue_depth_),
      reposted_public_(queue_depth_) {
  FJORD_ASSERT(r_->send_ring.size() == ring_bytes_);
  FJORD_ASSERT(r_->receive_ring.size() == ring_bytes_);
  FJORD_ASSERT(peer_.ring_bytes == ring_bytes_);
  FJORD_ASSERT(peer_.queue_depth > 0);
  // A credit write is due before the sender could be stuck for want of one
  // frame's space: a quarter ring + the largest record <= ring (ring >= 64 KB).
  FJORD_ASSERT(credit_release_bytes_ + frame::kMaxFrameBytes + wire::kRecordHeaderBytes + wire::kRecordTrailerBytes <=
               ring_bytes_);
  // Below the slowdown level, note_send_buffer_level() would change nothing
  // (it computes the level in long double: slow where x87 is emulated), so
  // the hot path compares with the same limit computed once here.
  const auto& c = this->config();
  slowdown_used_bytes_ =
      c.send_buffer_bytes == 0
          ? c.slowdown_bytes
          : static_cast<uint64_t>(static_cast<long double>(c.slowdown_bytes) * ring_bytes_ / c.send_buffer_bytes);
  note_connect();
}

RdmaTransporter::~RdmaTransporter() = default;

// ---- send side -------------------------------------------------------------

std::span<std::byte> RdmaTransporter::reserve(std::size_t min_bytes) {
  FJORD_ASSERT(min_bytes > 0);
  FJORD_ASSERT(min_bytes <= frame::kMaxFrameBytes);
  if (!is_up() || !refresh_credits()) return {};
  // Room for frames from where the next one goes up to the ring's limit,
  // keeping the trailer's 8 bytes (and the header's, for a new record).
  const auto room = [this]() -> uint64_t {
    const uint64_t frames_at = record_open_ ? frames_end_ : sent_ + wire::kRecordHeaderBytes;
    const uint64_t limit = peer_released_ + ring_bytes_;
    const uint64_t end = frames_at + wire::kRecordTrailerBytes;
    return limit > end ? limit - end : 0;
  };
  if (room() < min_bytes) {
    (void)flush();  // may carry a credit update that unblocks the peer
    if (!is_up() || !refresh_credits() || room() < min_bytes) return {};
  }
  if (!record_open_) {
    record_open_ = true;
    record_start_ = sent_;
    frames_end_ = sent_ + wire::kRecordHeaderBytes;
  }
  reserved_ = room();
  return {send_ring_ + frames_end_ % ring_bytes_, reserved_};
}

void RdmaTransporter::commit(std::size_t bytes, uint32_t frames) {
  FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
  FJORD_ASSERT(bytes % frame::kFrameAlign == 0);
  frames_end_ += bytes;
  reserved_ = 0;
  note_commit(bytes, frames);
  note_pressure();
}

void RdmaTransporter::note_pressure() {
  const bool above = send_buffer_used() >= slowdown_used_bytes_;
  if (above || pressure_noted_) note_send_buffer_level();
  pressure_noted_ = above;
}

bool RdmaTransporter::refresh_credits() {
  // The peer's NIC writes the block while we may read it: read each word
  // once (acquire: nothing we write into the ring afterwards moves above the
  // read that allowed it), and take the block only if its check word matches.
  const uint64_t released = __atomic_load_n(&credit_block_->released_bytes, __ATOMIC_ACQUIRE);
  const uint64_t receives = __atomic_load_n(&credit_block_->reposted_receives, __ATOMIC_ACQUIRE);
  const uint64_t sleep_seq = __atomic_load_n(&credit_block_->sleep_seq, __ATOMIC_ACQUIRE);
  const uint64_t check = __atomic_load_n(&credit_block_->check, __ATOMIC_ACQUIRE);
  if (check != (released ^ receives ^ sleep_seq ^ wire::kCreditMagic)) return true;  // unwritten or torn: keep the last
  if (released <= peer_released_ && receives <= peer_receives_ && sleep_seq <= peer_sleep_seq_) return true;
  if (released > sent_ || receives > notifies_ + peer_.queue_depth) {
    fail(StatusCode::kProtocolError,
         "node " + std::to_string(remote_node()) + " returned credit for " + std::to_string(released) + " bytes and " +
             std::to_string(receives) + " posted receives, but only " + std::to_string(sent_) +
             " bytes were sent and it can have posted at most " + std::to_string(notifies_ + peer_.queue_depth) +
             " receives (queue depth " + std::to_string(peer_.queue_depth) + " + " + std::to_string(notifies_) +
             " used by wake-ups and repeated hellos)");
    return false;
  }
  peer_released_ = std::max(peer_released_, released);
  peer_receives_ = std::max(peer_receives_, receives);
  peer_sleep_seq_ = std::max(peer_sleep_seq_, sleep_seq);
  return true;
}

bool RdmaTransporter::reap_send_completions() {
  ibv_wc wcs[16];
  for (;;) {
    const int n = ibv_poll_cq(r_->send_cq.get(), 16, wcs);
    if (n < 0) {
      fail(StatusCode::kLinkDown, "polling the send completion queue failed");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (wcs[i].status != IBV_WC_SUCCESS) {
        fail(StatusCode::kLinkDown, "RDMA write to node " + std::to_string(remote_node()) +
                                        " failed: " + ibv_wc_status_str(wcs[i].status) + " (vendor error " +
                                        std::to_string(wcs[i].vendor_err) + ")");
        return false;
      }
      if (wcs[i].wr_id != kBootstrapWrId) sq_completed_ = std::max(sq_completed_, wcs[i].wr_id + 1);
    }
    if (n < 16) return true;
  }
}

void RdmaTransporter::append_credit(ibv_send_wr* wrs, ibv_sge* sges, int* n, CreditMode mode) {
  // S1: pairs with R1; the receiver finished with the bytes it released.
  const uint64_t released = released_public_.load(std::memory_order_acquire);
  const uint64_t receives = reposted_public_.load(std::memory_order_acquire);
  const uint64_t sleep_seq = sleep_seq_public_.load(std::memory_order_acquire);
  const bool changed =
      released != reported_released_ || receives != reported_receives_ || sleep_seq != reported_sleep_seq_;
  if (!changed && mode != CreditMode::kAlways) return;
  // On a data flush the credit costs a packet of its own: send it only when
  // it returns a useful amount (the receiver's own reports guarantee progress).
  if (mode == CreditMode::kPiggyBack && sleep_seq == reported_sleep_seq_ &&
      released - reported_released_ < credit_release_bytes_ / 4 && receives - reported_receives_ < receive_batch_)
    return;
  // The staging slot of work request `seq` is reused only by seq + depth,
  // which cannot be posted before seq completed: the device has read it.
  const uint64_t seq = sq_posted_ + static_cast<uint64_t>(*n);
  std::byte* slot = r_->control_at(r_->layout.staging + (seq % queue_depth_) * wire::kStagingSlotBytes);
  const wire::CreditBlock block = wire::make_credit(released, receives, sleep_seq);
  std::memcpy(slot, &block, sizeof block);
  ibv_send_wr& wr = wrs[*n];
  ibv_sge& sge = sges[*n];
  sge = {reinterpret_cast<uintptr_t>(slot), sizeof block, r_->control_mr->lkey};
  wr = {};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = sizeof block <= r_->max_inline ? IBV_SEND_INLINE : 0;
  wr.wr.rdma.remote_addr = peer_.control_addr + wire::kCreditOffset;
  wr.wr.rdma.rkey = peer_.control_rkey;
  ++*n;
  reported_released_ = released;  // if posting fails the link is down anyway
  reported_receives_ = receives;
  reported_sleep_seq_ = sleep_seq;
  count_up(credit_writes_);
}

void RdmaTransporter::append_record(ibv_send_wr* wrs, ibv_sge* sges, int* n, bool wake) {
  const wire::RecordHeader header{static_cast<uint32_t>(frames_end_ - record_start_ - wire::kRecordHeaderBytes),
                                  static_cast<uint32_t>(record_seq_)};
  const uint64_t trailer = record_seq_ ^ wire::kTrailerMagic;
  // Both land inside the mirrored ring, so neither is ever split.
  std::memcpy(send_ring_ + record_start_ % ring_bytes_, &header, sizeof header);
  std::memcpy(send_ring_ + frames_end_ % ring_bytes_, &trailer, sizeof trailer);
  const uint64_t length = frames_end_ + wire::kRecordTrailerBytes - record_start_;
  const uint64_t offset = record_start_ % ring_bytes_;
  const uint64_t first = std::min<uint64_t>(length, ring_bytes_ - offset);
  const auto add_write = [&](uint64_t local_offset, uint64_t bytes) {
    ibv_send_wr& wr = wrs[*n];
    ibv_sge& sge = sges[*n];
    sge = {reinterpret_cast<uintptr_t>(send_ring_ + local_offset), static_cast<uint32_t>(bytes), r_->send_mr->lkey};
    wr = {};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    if (bytes <= r_->max_inline) {
      wr.send_flags = IBV_SEND_INLINE;
      count_up(inline_writes_);
    }
    wr.wr.rdma.remote_addr = peer_.ring_addr + local_offset;  // the mirror: same offset on both ends
    wr.wr.rdma.rkey = peer_.ring_rkey;
    count_up(data_writes_);
    ++*n;
  };
  add_write(offset, first);
  if (first < length) add_write(0, length - first);  // the wrap: the rest lands at the ring's start
  if (!wake) return;
  if (!r_->iwarp) {
    // The peer sleeps: this WRITE also makes a receive completion there,
    // generated after all of the QP's earlier WRITEs are placed.
    ibv_send_wr& last = wrs[*n - 1];
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.imm_data = htonl(static_cast<uint32_t>(record_seq_));
    return;
  }
  // iWARP has no immediate data: a SEND after the WRITEs does the same job
  // (RDMAP delivers it only after the WRITEs before it are placed).
  const uint64_t seq = sq_posted_ + static_cast<uint64_t>(*n);
  std::byte* slot = r_->control_at(r_->layout.staging + (seq % queue_depth_) * wire::kStagingSlotBytes);
  const auto seq_lo = static_cast<uint32_t>(record_seq_);
  std::memcpy(slot, &seq_lo, sizeof seq_lo);
  ibv_send_wr& wr = wrs[*n];
  ibv_sge& sge = sges[*n];
  sge = {reinterpret_cast<uintptr_t>(slot), sizeof seq_lo, r_->control_mr->lkey};
  wr = {};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = sizeof seq_lo <= r_->max_inline ? IBV_SEND_INLINE : 0;
  ++*n;
}

bool RdmaTransporter::post_chain(ibv_send_wr* wrs, int n, bool force_signal) {
  for (int i = 0; i < n; ++i) {
    const uint64_t seq = sq_posted_ + static_cast<uint64_t>(i);
    wrs[i].wr_id = seq;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    // Selective signalling: one completion per signal_interval_ requests is
    // enough to free their slots, since a completion covers all before it.
    if (seq - last_signaled_ >= signal_interval_ || (force_signal && i == n - 1)) {
      wrs[i].send_flags |= IBV_SEND_SIGNALED;
      last_signaled_ = seq;
      count_up(signaled_);
    }
  }
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(r_->qp->qp, wrs, &bad); rc != 0) {
    fail(StatusCode::kLinkDown, std::string("ibv_post_send failed: ") + std::strerror(rc));
    return false;
  }
  sq_posted_ += static_cast<uint64_t>(n);
  count_up(posted_, static_cast<uint64_t>(n));
  return true;
}

FlushStatus RdmaTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  if (--flush_cm_countdown_ == 0) {
    flush_cm_countdown_ = kFlushCheckEvery;
    check_cm_events();
    if (!is_up()) return FlushStatus::kDown;
  }
  const bool have_record = record_open_ && frames_end_ > record_start_ + wire::kRecordHeaderBytes;
  std::lock_guard lock(sq_mutex_);
  // Completions are reaped only when half the queue is in use: a signalled
  // one arrives every signal_interval_ requests, so the CQ cannot overflow,
  // and the common flush skips a poll.
  if (send_queue_free() < queue_depth_ / 2 && !reap_send_completions()) return FlushStatus::kDown;
  if (have_record) {
    // P1: announce how far the stream will reach; P2: the fence orders that
    // store before P3, the load of the peer's sleep announcement.
    __atomic_store_n(posted_end_, frames_end_ + wire::kRecordTrailerBytes, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  }
  if (!refresh_credits()) return FlushStatus::kDown;  // P3
  const bool wake = have_record && peer_sleep_seq_ > woken_seq_;
  ibv_send_wr wrs[4];
  ibv_sge sges[4];
  int n = 0;
  const uint32_t free_slots = send_queue_free();
  if (free_slots > 0) append_credit(wrs, sges, &n, CreditMode::kPiggyBack);  // on this doorbell
  bool sending = false;
  const uint64_t length = frames_end_ + wire::kRecordTrailerBytes - record_start_;
  if (have_record) {
    const uint32_t requests =
        (record_start_ % ring_bytes_ + length > ring_bytes_ ? 2 : 1) + (wake && r_->iwarp ? 1 : 0);
    if ((wake && notifies_ >= peer_receives_) || free_slots < static_cast<uint32_t>(n) + requests) {
      count_up(queue_full_);
    } else {
      append_record(wrs, sges, &n, wake);
      sending = true;
    }
  }
  if (n > 0 && !post_chain(wrs, n)) return FlushStatus::kDown;
  if (sending) {
    note_send(static_cast<std::size_t>(length));
    sent_ = frames_end_ + wire::kRecordTrailerBytes;
    record_open_ = false;
    ++record_seq_;
    if (wake) {
      woken_seq_ = peer_sleep_seq_;
      ++notifies_;
      count_up(wakeups_);
    }
  }
  note_pressure();
  return have_record && !sending ? FlushStatus::kPending : FlushStatus::kFlushed;
}

// ---- receive side ----------------------------------------------------------

bool RdmaTransporter::poll_ring() {
  const std::optional<wire::PlacedRecord> record =
      wire::placed_record(receive_ring_, ring_bytes_, next_record_, expected_seq_);
  if (!record) return false;
  const uint64_t frames_at = record->frames_at;
  const uint64_t length = record->length;
  const std::span<const std::byte> frames(receive_ring_ + frames_at % ring_bytes_, length);
  const frame::ScanResult scan = frame::scan_frames(frames, config().checksum);
  released_ = frames_at;
  batch_end_ = frames_at + scan.whole_bytes;
  batch_frames_ = scan.frames;
  if (scan.whole_bytes > 0) note_receive(scan.whole_bytes, scan.frames);
  if (scan.error != frame::FrameError::kNone || scan.whole_bytes != length) {
    receive_stopped_ = true;  // nothing after a malformed frame can be trusted; the good ones are delivered
    const char* what = scan.error == frame::FrameError::kIncomplete ? "record ends inside a frame"
                                                                    : frame::frame_error_name(scan.error);
    fail(StatusCode::kProtocolError, "malformed frame from node " + std::to_string(remote_node()) +
                                         " at stream offset " + std::to_string(frames_at + scan.error_offset) + ": " +
                                         what);
    return scan.whole_bytes > 0;
  }
  next_record_ = frames_at + length + wire::kRecordTrailerBytes;
  ++expected_seq_;
  return true;
}

void RdmaTransporter::drain_receive_cq() {
  ibv_wc wcs[16];
  for (;;) {
    const int n = ibv_poll_cq(r_->recv_cq.get(), 16, wcs);
    if (n < 0) {
      fail(StatusCode::kLinkDown, "polling the receive completion queue failed");
      return;
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        // Flushed receives follow every error; the first one names the cause.
        fail(StatusCode::kLinkDown, std::string("receive completion in error: ") + ibv_wc_status_str(wc.status) +
                                        " (the queue pair is in the error state)" + device_health());
        continue;
      }
      const bool expected = r_->iwarp ? wc.opcode == IBV_WC_RECV : wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
      if (!expected) {
        fail(StatusCode::kProtocolError, "unexpected receive completion (opcode " + std::to_string(wc.opcode) + ")");
        return;
      }
      ++consumed_receives_;  // a wake-up: the record itself is found in the ring
    }
    if (n < 16) break;
  }
  if (consumed_receives_ + queue_depth_ - posted_receives_ >= receive_batch_ && is_up()) repost_receives();
}

void RdmaTransporter::repost_receives() {
  const auto count = static_cast<uint32_t>(consumed_receives_ + queue_depth_ - posted_receives_);
  if (Status s = post_data_receives(*r_, static_cast<uint32_t>(posted_receives_ % queue_depth_), count); !s) {
    fail(StatusCode::kLinkDown, s.message());
    return;
  }
  posted_receives_ += count;
  reposted_public_.store(posted_receives_, std::memory_order_release);  // R1
  report_credits();
}

void RdmaTransporter::report_credits() {
  std::lock_guard lock(sq_mutex_);
  if (!is_up() || !reap_send_completions()) return;
  if (send_queue_free() == 0) {
    credit_pending_.store(true, std::memory_order_relaxed);
    count_up(queue_full_);
    return;
  }
  ibv_send_wr wr[1];
  ibv_sge sge[1];
  int n = 0;
  append_credit(wr, sge, &n, CreditMode::kIfChanged);
  if (n > 0 && !post_chain(wr, n)) return;
  credit_pending_.store(false, std::memory_order_relaxed);
}

ReceiveBatch RdmaTransporter::receive() {
  if (released_ == batch_end_ && !receive_stopped_ && !poll_ring()) {
    if (credit_pending_.load(std::memory_order_relaxed)) report_credits();
    if (--receive_countdown_ == 0) {
      receive_countdown_ = kSlowCheckEvery;
      const uint64_t now = coarse_monotonic_ns();
      if (now >= next_slow_check_ns_) {
        next_slow_check_ns_ = now + kSlowCheckPeriodNs;
        slow_checks();
      }
    }
  }
  return {{receive_ring_ + released_ % ring_bytes_, static_cast<std::size_t>(batch_end_ - released_)}, batch_frames_};
}

void RdmaTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= batch_end_ - released_, "release beyond the received frames");
  if (bytes == batch_end_ - released_) {
    batch_frames_ = 0;
  } else {
    frame::FrameCursor cursor({receive_ring_ + released_ % ring_bytes_, bytes});
    frame::SignalView view;
    while (cursor.next(view)) --batch_frames_;
  }
  released_ += bytes;
  if (released_ == batch_end_ && !receive_stopped_) {
    released_ = next_record_;  // the trailer goes with the record's last frame
    batch_end_ = next_record_;
  }
  released_public_.store(released_, std::memory_order_release);  // R1: done reading these bytes
  if (released_ - credit_trigger_ >= credit_release_bytes_ && is_up()) {
    credit_trigger_ = released_;
    report_credits();
  }
}

// ---- sleeping --------------------------------------------------------------

bool RdmaTransporter::announce_sleep(uint64_t* peer_posted_end) {
  sleep_seq_public_.store(++sleep_seq_, std::memory_order_release);  // R1: the CQ is armed
  uint64_t read_seq = 0;
  {
    std::lock_guard lock(sq_mutex_);
    if (!is_up() || !reap_send_completions() || send_queue_free() < 2) return false;
    ibv_send_wr wrs[2];
    ibv_sge sges[2];
    int n = 0;
    append_credit(wrs, sges, &n, CreditMode::kAlways);  // A2: carries the new sleep_seq
    FJORD_ASSERT(n == 1);
    // A3: the responder serves this READ after placing A2 (same QP, in order).
    sges[n] = {reinterpret_cast<uintptr_t>(read_target_), sizeof(uint64_t), r_->control_mr->lkey};
    wrs[n] = {};
    wrs[n].sg_list = &sges[n];
    wrs[n].num_sge = 1;
    wrs[n].opcode = IBV_WR_RDMA_READ;
    wrs[n].wr.rdma.remote_addr = peer_.control_addr + wire::kPostedEndOffset;
    wrs[n].wr.rdma.rkey = peer_.control_rkey;
    ++n;
    read_seq = sq_posted_ + static_cast<uint64_t>(n) - 1;
    if (!post_chain(wrs, n, true)) return false;
  }
  const uint64_t deadline = monotonic_ns() + kAnnounceTimeoutNs;
  for (;;) {
    {
      std::lock_guard lock(sq_mutex_);
      if (!reap_send_completions()) return false;
      if (sq_completed_ > read_seq) break;
    }
    if (monotonic_ns() > deadline) return false;  // do not sleep; the caller polls again
    cpu_relax();
  }
  *peer_posted_end = __atomic_load_n(read_target_, __ATOMIC_ACQUIRE);
  return true;
}

bool RdmaTransporter::arm_wakeup() {
  if (released_ != batch_end_ || !is_up() || poll_ring()) return false;
  drain_receive_cq();
  if (!is_up()) return false;
  // A1: notification is one-shot and only for completions added after this
  // call; stale ones were drained just above.
  if (const int rc = ibv_req_notify_cq(r_->recv_cq.get(), 0); rc != 0) {
    fail(StatusCode::kLinkDown, std::string("ibv_req_notify_cq failed: ") + std::strerror(rc));
    return false;
  }
  uint64_t peer_posted_end = 0;
  if (!announce_sleep(&peer_posted_end)) return false;
  // A4: a record the peer posted before it could see the announcement is
  // on its way without a wake-up: poll for it instead of sleeping.
  if (peer_posted_end > next_record_ || poll_ring()) return false;
  check_cm_events();
  return is_up();
}

void RdmaTransporter::disarm_wakeup() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(r_->comp_channel.get(), &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
  slow_checks();
}

// ---- faults ----------------------------------------------------------------

void RdmaTransporter::slow_checks() {
  drain_receive_cq();
  check_cm_events();
}

void RdmaTransporter::check_cm_events() {
  std::unique_lock lock(cm_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the other side's thread is looking already
  CmEvent event;
  while (poll_event(r_->channel.get(), &event)) {
    switch (event.type) {
      case RDMA_CM_EVENT_DISCONNECTED:
        fail(StatusCode::kLinkDown,
             "node " + std::to_string(remote_node()) + " disconnected (" + event_text(event) + ")" + device_health());
        break;
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        fail(StatusCode::kLinkDown, "the RDMA device was removed (" + event_text(event) + ")");
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
      case RDMA_CM_EVENT_TIMEWAIT_EXIT: break;
      default: FJORD_LOG_DEBUG("%s: ignoring %s", config().describe().c_str(), event_text(event).c_str()); break;
    }
  }
}

std::string RdmaTransporter::device_health() const {
  ibv_port_attr port{};
  if (ibv_query_port(r_->id->verbs, r_->id->port_num, &port) != 0)
    return "; the device no longer answers (ibv_query_port: " + std::string(std::strerror(errno)) + ")";
  if (port.state != IBV_PORT_ACTIVE) return std::string("; the device port is ") + ibv_port_state_str(port.state);
  return "";
}

void RdmaTransporter::fail(StatusCode code, const std::string& what) {
  if (!is_up()) return;
  declare_down(Status(code, what + " [" + r_->where + "]"));
}

void RdmaTransporter::on_down() {
  // Moves the QP to the error state and tells the peer (DREQ); safe while
  // the other thread posts or polls (verbs calls are thread-safe).
  rdma_disconnect(r_->id.get());
}

LinkInfo RdmaTransporter::info() const {
  LinkInfo out;
  out.device = ibv_get_device_name(r_->id->verbs->device);
  out.port = r_->id->port_num;
  out.where = r_->where;
  out.iwarp = r_->iwarp;
  out.ring_bytes = ring_bytes_;
  out.queue_depth = queue_depth_;
  out.max_inline_bytes = r_->max_inline;
  out.data_writes = data_writes_.load(std::memory_order_relaxed);
  out.inline_writes = inline_writes_.load(std::memory_order_relaxed);
  out.signaled = signaled_.load(std::memory_order_relaxed);
  out.posted = posted_.load(std::memory_order_relaxed);
  out.credit_writes = credit_writes_.load(std::memory_order_relaxed);
  out.send_queue_full = queue_full_.load(std::memory_order_relaxed);
  out.wakeups = wakeups_.load(std::memory_order_relaxed);
  out.hello_repeats = r_->peer_receives_used;
  return out;
}

Status RdmaTransporter::inject_qp_error() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(r_->qp->qp, &attr, IBV_QP_STATE); rc != 0)
    return Status(StatusCode::kIoError, std::string("ibv_modify_qp(ERR): ") + std::strerror(rc));
  return Status::ok();
}

}  // namespace fjord::rdma
