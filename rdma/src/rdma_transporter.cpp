// RdmaTransporter data path. Hot path: no allocation; one ibv_post_send per
// flush, one ibv_poll_cq per empty receive poll, no system call in either on
// providers with user-space doorbells (rxe rings its doorbell with a write).
#include "rdma_transporter.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

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
      peer_receives_(peer.queue_depth),
      reported_receives_(queue_depth_),
      posted_receives_(queue_depth_),
      reposted_public_(queue_depth_) {
  FJORD_ASSERT(r_->send_ring.size() == ring_bytes_ && r_->receive_ring.size() == ring_bytes_);
  FJORD_ASSERT(peer_.ring_bytes == ring_bytes_ && peer_.queue_depth > 0);
  // A credit write is due before the sender could be stuck for want of one
  // frame's space: a quarter ring <= ring - largest frame (ring >= 64 KB).
  FJORD_ASSERT(credit_release_bytes_ + frame::kMaxFrameBytes <= ring_bytes_);
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
  FJORD_ASSERT(min_bytes > 0 && min_bytes <= frame::kMaxFrameBytes);
  if (!is_up() || !refresh_credits()) return {};
  std::size_t free_bytes = ring_bytes_ - send_buffer_used();
  if (free_bytes < min_bytes) {
    (void)flush();  // may carry a credit update that unblocks the peer
    if (!is_up() || !refresh_credits()) return {};
    free_bytes = ring_bytes_ - send_buffer_used();
    if (free_bytes < min_bytes) return {};
  }
  reserved_ = free_bytes;
  return {send_ring_ + committed_ % ring_bytes_, free_bytes};
}

void RdmaTransporter::commit(std::size_t bytes, uint32_t frames) {
  FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
  committed_ += bytes;
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
  const uint64_t check = __atomic_load_n(&credit_block_->check, __ATOMIC_ACQUIRE);
  if (check != (released ^ receives ^ wire::kCreditMagic)) return true;  // not written yet, or torn: keep the last
  if (released <= peer_released_ && receives <= peer_receives_) return true;
  if (released > sent_ || receives > notifies_ + peer_.queue_depth) {
    fail(StatusCode::kProtocolError, "node " + std::to_string(remote_node()) + " returned credit for " +
                                         std::to_string(released) + " bytes and " + std::to_string(receives) +
                                         " receives, but only " + std::to_string(sent_) + " bytes were sent");
    return false;
  }
  peer_released_ = std::max(peer_released_, released);
  peer_receives_ = std::max(peer_receives_, receives);
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

void RdmaTransporter::append_credit(ibv_send_wr* wrs, ibv_sge* sges, int* n, bool piggy_back) {
  // S1: pairs with R1; the receiver finished with the bytes it released.
  const uint64_t released = released_public_.load(std::memory_order_acquire);
  const uint64_t receives = reposted_public_.load(std::memory_order_acquire);
  if (released == reported_released_ && receives == reported_receives_) return;
  // On a data flush the credit costs a packet of its own: send it only when
  // it returns a useful amount (the receiver's own reports guarantee progress).
  if (piggy_back && released - reported_released_ < credit_release_bytes_ / 4 &&
      receives - reported_receives_ < receive_batch_)
    return;
  // The staging slot of work request `seq` is reused only by seq + depth,
  // which cannot be posted before seq completed: the device has read it.
  const uint64_t seq = sq_posted_ + static_cast<uint64_t>(*n);
  std::byte* slot = r_->control_at(r_->layout.staging + (seq % queue_depth_) * wire::kStagingSlotBytes);
  const wire::CreditBlock block = wire::make_credit(released, receives);
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
  reported_released_ = released;  // undone by the caller if posting fails (the link is then down anyway)
  reported_receives_ = receives;
  count_up(credit_writes_);
}

void RdmaTransporter::append_data(ibv_send_wr* wrs, ibv_sge* sges, int* n) {
  const uint64_t length = committed_ - sent_;
  const uint64_t offset = sent_ % ring_bytes_;
  const uint64_t first = std::min<uint64_t>(length, ring_bytes_ - offset);
  const uint32_t stream_end = static_cast<uint32_t>(committed_);  // what the receive completion will announce
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
  if (!r_->iwarp) {
    // The last WRITE announces the new stream end; its receive completion
    // is generated after all of the QP's earlier WRITEs are placed.
    ibv_send_wr& last = wrs[*n - 1];
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.imm_data = htonl(stream_end);
    return;
  }
  // iWARP has no immediate data: a SEND after the WRITEs does the same job
  // (RDMAP delivers it only after the WRITEs before it are placed).
  const uint64_t seq = sq_posted_ + static_cast<uint64_t>(*n);
  std::byte* slot = r_->control_at(r_->layout.staging + (seq % queue_depth_) * wire::kStagingSlotBytes);
  std::memcpy(slot, &stream_end, sizeof stream_end);
  ibv_send_wr& wr = wrs[*n];
  ibv_sge& sge = sges[*n];
  sge = {reinterpret_cast<uintptr_t>(slot), sizeof stream_end, r_->control_mr->lkey};
  wr = {};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = sizeof stream_end <= r_->max_inline ? IBV_SEND_INLINE : 0;
  ++*n;
}

bool RdmaTransporter::post_chain(ibv_send_wr* wrs, int n) {
  for (int i = 0; i < n; ++i) {
    const uint64_t seq = sq_posted_ + static_cast<uint64_t>(i);
    wrs[i].wr_id = seq;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    // Selective signalling: one completion per signal_interval_ requests is
    // enough to free their slots, since a completion covers all before it.
    if (seq - last_signaled_ >= signal_interval_) {
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
    flush_cm_countdown_ = kCmCheckEvery;
    check_cm_events();
    if (!is_up()) return FlushStatus::kDown;
  }
  std::lock_guard lock(sq_mutex_);
  // Completions are reaped only when half the queue is in use: a signalled
  // one arrives every signal_interval_ requests, so the CQ cannot overflow,
  // and the common flush skips a poll. Credits are re-read only when the
  // last known ones do not allow a notification.
  if (send_queue_free() < queue_depth_ / 2 && !reap_send_completions()) return FlushStatus::kDown;
  if (notifies_ >= peer_receives_ && !refresh_credits()) return FlushStatus::kDown;
  ibv_send_wr wrs[4];
  ibv_sge sges[4];
  int n = 0;
  const bool data_waiting = sent_ < committed_;
  const uint64_t length = committed_ - sent_;
  const uint32_t data_requests = (length > ring_bytes_ - sent_ % ring_bytes_ ? 2 : 1) + (r_->iwarp ? 1 : 0);
  const uint32_t free_slots = send_queue_free();
  if (free_slots > 0) append_credit(wrs, sges, &n, true);  // piggy-backed on this doorbell
  bool sending = false;
  if (data_waiting) {
    if (notifies_ < peer_receives_ && free_slots >= static_cast<uint32_t>(n) + data_requests) {
      append_data(wrs, sges, &n);
      sending = true;
    } else {
      count_up(queue_full_);
    }
  }
  if (n > 0 && !post_chain(wrs, n)) return FlushStatus::kDown;
  if (sending) {
    note_send(static_cast<std::size_t>(length));
    sent_ = committed_;
    ++notifies_;
  }
  note_pressure();
  return sent_ == committed_ ? FlushStatus::kFlushed : FlushStatus::kPending;
}

// ---- receive side ----------------------------------------------------------

void RdmaTransporter::poll_receive_cq() {
  ibv_wc wcs[16];
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
                                      " (the queue pair is in the error state)");
      continue;
    }
    uint32_t stream_end = 0;
    if (!r_->iwarp && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      stream_end = ntohl(wc.imm_data);
    } else if (r_->iwarp && wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof stream_end && wc.wr_id < queue_depth_) {
      std::memcpy(&stream_end, r_->control_at(r_->layout.doorbells + wc.wr_id * wire::kDoorbellSlotBytes),
                  sizeof stream_end);
    } else {
      receive_stopped_ = true;
      fail(StatusCode::kProtocolError, "unexpected receive completion (opcode " + std::to_string(wc.opcode) + ", " +
                                           std::to_string(wc.byte_len) + " bytes)");
      return;
    }
    ++consumed_receives_;
    // The announced end must lie within the space we gave the peer.
    const uint32_t delta = stream_end - static_cast<uint32_t>(filled_);
    if (delta > ring_bytes_ - (filled_ - released_)) {
      receive_stopped_ = true;
      fail(StatusCode::kProtocolError, "node " + std::to_string(remote_node()) + " announced " + std::to_string(delta) +
                                           " new bytes but only " +
                                           std::to_string(ring_bytes_ - (filled_ - released_)) + " were free");
      return;
    }
    filled_ += delta;
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
  append_credit(wr, sge, &n, false);
  if (n > 0 && !post_chain(wr, n)) return;
  credit_pending_.store(false, std::memory_order_relaxed);
}

void RdmaTransporter::scan_received() {
  if (scanned_ == filled_ || receive_stopped_) return;
  const std::span<const std::byte> fresh(receive_ring_ + scanned_ % ring_bytes_,
                                         static_cast<std::size_t>(filled_ - scanned_));
  const frame::ScanResult scan = frame::scan_frames(fresh);
  if (scan.whole_bytes > 0) {
    scanned_ += scan.whole_bytes;
    scanned_frames_ += scan.frames;
    note_receive(scan.whole_bytes, scan.frames);
  }
  if (scan.error != frame::FrameError::kNone && scan.error != frame::FrameError::kIncomplete) {
    receive_stopped_ = true;  // nothing after a malformed frame can be trusted
    fail(StatusCode::kProtocolError, "malformed frame from node " + std::to_string(remote_node()) +
                                         " at stream offset " + std::to_string(scanned_) + ": " +
                                         frame::frame_error_name(scan.error));
  }
}

ReceiveBatch RdmaTransporter::receive() {
  if (scanned_ == released_ && !receive_stopped_) {
    poll_receive_cq();
    scan_received();
    if (scanned_ == released_) {
      if (credit_pending_.load(std::memory_order_relaxed)) report_credits();
      if (--receive_cm_countdown_ == 0) {
        receive_cm_countdown_ = kCmCheckEvery;
        check_cm_events();
      }
    }
  }
  return {{receive_ring_ + released_ % ring_bytes_, static_cast<std::size_t>(scanned_ - released_)}, scanned_frames_};
}

void RdmaTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= scanned_ - released_, "release beyond the received frames");
  if (bytes == scanned_ - released_) {
    scanned_frames_ = 0;
  } else {
    frame::FrameCursor cursor({receive_ring_ + released_ % ring_bytes_, bytes});
    frame::SignalView view;
    while (cursor.next(view)) --scanned_frames_;
  }
  released_ += bytes;
  released_public_.store(released_, std::memory_order_release);  // R1: done reading these bytes
  if (released_ - credit_trigger_ >= credit_release_bytes_ && is_up()) {
    credit_trigger_ = released_;
    report_credits();
  }
}

// ---- sleeping --------------------------------------------------------------

bool RdmaTransporter::arm_wakeup() {
  if (scanned_ != released_ || !is_up()) return false;
  if (credit_pending_.load(std::memory_order_relaxed)) report_credits();
  poll_receive_cq();
  scan_received();
  if (scanned_ != released_ || !is_up()) return false;
  // Notification is one-shot and only for completions added after this
  // call, so poll once more afterwards: a completion that slipped in between
  // the poll above and the arming is caught here, one after it wakes us.
  if (const int rc = ibv_req_notify_cq(r_->recv_cq.get(), 0); rc != 0) {
    fail(StatusCode::kLinkDown, std::string("ibv_req_notify_cq failed: ") + std::strerror(rc));
    return false;
  }
  poll_receive_cq();
  scan_received();
  check_cm_events();
  return scanned_ == released_ && is_up();
}

void RdmaTransporter::disarm_wakeup() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(r_->comp_channel.get(), &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
  check_cm_events();
}

// ---- faults ----------------------------------------------------------------

void RdmaTransporter::check_cm_events() {
  std::unique_lock lock(cm_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the other side's thread is looking already
  for (;;) {
    auto event = poll_event(r_->channel.get());
    if (!event) return;
    switch (event->type) {
      case RDMA_CM_EVENT_DISCONNECTED:
        fail(StatusCode::kLinkDown,
             "node " + std::to_string(remote_node()) + " disconnected (" + event_text(*event) + ")");
        break;
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        fail(StatusCode::kLinkDown, "the RDMA device was removed (" + event_text(*event) + ")");
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
      case RDMA_CM_EVENT_TIMEWAIT_EXIT: break;
      default: FJORD_LOG_DEBUG("%s: ignoring %s", config().describe().c_str(), event_text(*event).c_str()); break;
    }
  }
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
