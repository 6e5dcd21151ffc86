// RdmaTransporter: the data path of one RDMA RC link (internal header).
//
// Send: frames are packed into a local send ring that mirrors the peer's
// receive ring (same size, same offsets); flush() posts one RDMA WRITE of
// everything committed (two at the wrap) straight into the peer's ring. The
// last WRITE carries immediate data = the low 32 bits of the stream end, so
// the peer gets one receive completion per flush; on iWARP, which has no
// immediate data, a 4-byte SEND follows the WRITEs instead. Small WRITEs go
// inline; only every signal_interval_-th work request is signalled.
//
// Receive: each receive completion says how far the stream now reaches; the
// frames are validated in place and handed out without a copy. Credits: the
// receiver RDMA-WRITEs {released bytes, receives posted} into the sender's
// control region, piggy-backed on its own flushes or on their own when a
// quarter of the ring or of the receive queue has been given back.
//
// Threads (the contract's): one sender thread (reserve/commit/flush), one
// receiver thread (receive/release/arm/disarm). Shared between them:
//   * the send queue: both post (data from the sender, credits from the
//     receiver), so posting and the send-queue bookkeeping sit under
//     sq_mutex_ (uncontended in the common case: the receiver posts once per
//     quarter ring);
//   * released_public_ / reposted_public_: written by the receiver with
//     release stores (R1) after it is done with the bytes and has posted the
//     receives; read with acquire loads (S1) by whichever thread writes the
//     credit, so the peer can never overwrite bytes still being read;
//   * the rdma_cm channel: drained under cm_mutex_ (try-lock) by both.
// Hot path: reserve/commit/flush/receive/release allocate nothing.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "fjord/rdma/rdma.h"
#include "fjord/transport/transporter.h"
#include "verbs.h"

namespace fjord::rdma {

class RdmaTransporter final : public transport::Transporter {
 public:
  RdmaTransporter(transport::LinkConfig config, NodeId self, std::unique_ptr<LinkResources> resources,
                  const wire::RingInfo& peer);
  ~RdmaTransporter() override;

  std::span<std::byte> reserve(std::size_t min_bytes) override;
  void commit(std::size_t bytes, uint32_t frames) override;
  transport::FlushStatus flush() override;
  std::size_t send_buffer_used() const override { return static_cast<std::size_t>(committed_ - peer_released_); }
  std::size_t send_buffer_capacity() const override { return ring_bytes_; }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return r_->epoll.get(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override;

  LinkInfo info() const;
  Status inject_qp_error();

 private:
  // How many empty polls between two looks at the rdma_cm channel (a
  // syscall): often enough to notice a disconnect within microseconds of
  // polling, rarely enough to cost nothing measurable.
  static constexpr uint32_t kCmCheckEvery = 4096;

  void on_down() override;

  // ---- send side --------------------------------------------------------
  // note_send_buffer_level() when the level may differ from kNormal.
  void note_pressure();
  // Reads the credit block the peer writes; false (link down) if it lies.
  bool refresh_credits();
  // Under sq_mutex_: reaps send completions; false on an error completion.
  bool reap_send_completions();
  uint32_t send_queue_free() const { return queue_depth_ - static_cast<uint32_t>(sq_posted_ - sq_completed_); }
  // Under sq_mutex_: fills wrs[*n] (and its sge) with a credit write if the
  // receiver has given back anything not yet reported (when piggy-backing on
  // data: only if it is worth a packet).
  void append_credit(ibv_send_wr* wrs, ibv_sge* sges, int* n, bool piggy_back);
  void append_data(ibv_send_wr* wrs, ibv_sge* sges, int* n);
  // Under sq_mutex_: numbers, signals and posts wrs[0..n). False on failure.
  bool post_chain(ibv_send_wr* wrs, int n);

  // ---- receive side -----------------------------------------------------
  void poll_receive_cq();
  void scan_received();
  void repost_receives();
  // Posts a credit update now (takes sq_mutex_).
  void report_credits();
  void check_cm_events();
  void fail(StatusCode code, const std::string& what);

  std::unique_ptr<LinkResources> r_;
  const wire::RingInfo peer_;
  const uint32_t ring_bytes_;
  const uint32_t queue_depth_;           // our send queue and our posted receives
  const uint32_t signal_interval_;       // signal one work request in this many
  const uint32_t receive_batch_;         // receives reposted (and reported) together
  const uint64_t credit_release_bytes_;  // released bytes that trigger a credit write
  std::byte* const send_ring_;
  std::byte* const receive_ring_;
  const wire::CreditBlock* const credit_block_;  // in our control region, written by the peer

  // Send side (sender thread). committed_ - peer_released_ <= ring_bytes_.
  uint64_t committed_ = 0;
  uint64_t sent_ = 0;  // handed to the device
  std::size_t reserved_ = 0;
  uint64_t peer_released_ = 0;
  uint64_t peer_receives_ = 0;  // receives the peer has posted in total (notify credit)
  uint64_t notifies_ = 0;       // WRITE_WITH_IMM / doorbell SENDs posted (each takes one)
  uint32_t flush_cm_countdown_ = kCmCheckEvery;
  uint64_t slowdown_used_bytes_ = 0;  // the base class's slowdown limit, scaled to the ring
  bool pressure_noted_ = false;       // the last note_send_buffer_level() saw kSlowdown or worse

  // Send queue, guarded by sq_mutex_.
  std::mutex sq_mutex_;
  uint64_t sq_posted_ = 0;
  uint64_t sq_completed_ = 0;  // every work request below this has completed
  uint64_t last_signaled_ = 0;
  uint64_t reported_released_ = 0;
  uint64_t reported_receives_ = 0;

  // Receive side (receiver thread). released_ <= scanned_ <= filled_.
  uint64_t filled_ = 0;
  uint64_t scanned_ = 0;
  uint64_t released_ = 0;
  uint32_t scanned_frames_ = 0;
  uint64_t consumed_receives_ = 0;
  uint64_t posted_receives_ = 0;
  uint64_t credit_trigger_ = 0;  // released_ at the last credit write we asked for
  bool receive_stopped_ = false;
  uint32_t receive_cm_countdown_ = kCmCheckEvery;
  std::atomic<uint64_t> released_public_{0};  // R1: store-release after the bytes are no longer read
  std::atomic<uint64_t> reposted_public_{0};  // R1: store-release after ibv_post_recv returned
  std::atomic<bool> credit_pending_{false};   // a credit write found no send-queue slot

  std::mutex cm_mutex_;

  // LinkInfo counters: one writer each (under sq_mutex_), relaxed readers.
  std::atomic<uint64_t> data_writes_{0}, inline_writes_{0}, signaled_{0}, posted_{0}, credit_writes_{0}, queue_full_{0};
};

}  // namespace fjord::rdma
