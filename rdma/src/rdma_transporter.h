// RdmaTransporter: the data path of one RDMA RC link (internal header).
//
// Send: frames are packed into a local send ring that mirrors the peer's
// receive ring (same size, same offsets), behind an 8-byte record header;
// flush() adds the header and an 8-byte trailer around everything committed
// and posts it as one RDMA WRITE (two at the wrap) straight into the peer's
// ring (wire.h: records). Small WRITEs go inline; only every
// signal_interval_-th work request is signalled.
//
// Receive: the receiver polls the next record's header and trailer in its
// own memory (no completion queue, no system call on the busy path); a
// complete record's frames are validated in place and handed out without a
// copy. Credits: the receiver RDMA-WRITEs {released bytes, receives posted,
// sleep count} into the sender's control region, piggy-backed on its own
// flushes or on their own when a quarter of the ring has been given back.
//
// Sleep without lost wake-ups (docs/rdma.md has the argument). A plain
// WRITE makes no completion, so a receiver that wants to sleep must make
// sure the sender will notify it:
//   sender, each flush:  P1 store posted_end (its control region),
//                        P2 seq_cst fence, P3 load the credit block's
//                        sleep_seq; if it grew, the WRITE carries immediate
//                        data (iWARP: a SEND follows) = a receive completion.
//   receiver, arm:       A1 arm the CQ, A2 RDMA WRITE credit block with
//                        sleep_seq + 1, A3 RDMA READ the sender's posted_end
//                        (executed after A2 is placed: same QP, in order),
//                        A4 sleep only if posted_end shows nothing in flight.
// Either P3 sees A2 (so the sender notifies), or P1 preceded A2's placement
// and A3 sees posted_end (so the receiver does not sleep).
//
// Threads (the contract's): one sender thread (reserve/commit/flush), one
// receiver thread (receive/release/arm/disarm). Shared between them:
//   * the send queue: both post (data from the sender; credits, sleep
//     announcements and reads from the receiver), so posting and the
//     send-queue bookkeeping sit under sq_mutex_ (uncontended in the common
//     case: the receiver posts once per quarter ring, batch or sleep);
//   * released_public_ / reposted_public_ / sleep_seq_public_: written by
//     the receiver with release stores (R1) once it is done with the bytes,
//     has posted the receives, or has armed the CQ; read with acquire loads
//     (S1) by whichever thread writes the credit block, so the peer never
//     overwrites bytes still being read;
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
  std::size_t send_buffer_used() const override { return static_cast<std::size_t>(stream_end() - peer_released_); }
  std::size_t send_buffer_capacity() const override { return ring_bytes_; }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return r_->epoll.get(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override;

  LinkInfo info() const;
  Status inject_qp_error();

 private:
  // A busy receiver looks at the receive CQ (error completions, wake-ups to
  // repost) and the rdma_cm channel (a system call) once per
  // kSlowCheckPeriodNs, reading the coarse clock once per kSlowCheckEvery
  // empty polls: a fault is seen within a few milliseconds (the coarse
  // clock moves once per kernel tick), at no measurable cost. (The precise
  // clock costs microseconds per read where the clocksource is the HPET, as
  // in the soft-RoCE guest: a message arriving during one would wait.)
  static constexpr uint32_t kSlowCheckEvery = 64;
  static constexpr uint64_t kSlowCheckPeriodNs = 1'000'000;
  // A sender that never receives looks at the rdma_cm channel once per
  // this many flushes (a send to a dead peer also fails on its own).
  static constexpr uint32_t kFlushCheckEvery = 1024;
  // How long a receiver waits for its sleep announcement's RDMA READ.
  static constexpr uint64_t kAnnounceTimeoutNs = 2'000'000'000;

  void on_down() override;

  // ---- send side --------------------------------------------------------
  // Where the bytes committed so far end, trailer included (ring positions).
  uint64_t stream_end() const { return record_open_ ? frames_end_ + wire::kRecordTrailerBytes : sent_; }
  // note_send_buffer_level() when the level may differ from kNormal.
  void note_pressure();
  // Reads the credit block the peer writes; false (link down) if it lies.
  bool refresh_credits();
  // Under sq_mutex_: reaps send completions; false on an error completion.
  bool reap_send_completions();
  uint32_t send_queue_free() const { return queue_depth_ - static_cast<uint32_t>(sq_posted_ - sq_completed_); }
  // Under sq_mutex_: fills wrs[*n] (and its sge) with a credit write:
  // kIfChanged when the receiver gave back anything not yet reported,
  // kPiggyBack (on a data flush) only if that is worth a packet, kAlways
  // for a sleep announcement, which must be placed before its READ.
  enum class CreditMode : uint8_t { kPiggyBack, kIfChanged, kAlways };
  void append_credit(ibv_send_wr* wrs, ibv_sge* sges, int* n, CreditMode mode);
  // Under sq_mutex_: the open record as 1-2 WRITEs (+ a wake-up if asked).
  void append_record(ibv_send_wr* wrs, ibv_sge* sges, int* n, bool wake);
  // Under sq_mutex_: numbers, signals and posts wrs[0..n). The last request
  // is signalled if force_signal. False on failure (the link is down).
  bool post_chain(ibv_send_wr* wrs, int n, bool force_signal = false);

  // ---- receive side -----------------------------------------------------
  // Takes the next record if it is complete; true if it did.
  bool poll_ring();
  // Drains the receive CQ (wake-ups, error completions) and reposts.
  void drain_receive_cq();
  void repost_receives();
  // Posts a credit update now (takes sq_mutex_).
  void report_credits();
  // A2 + A3 of the sleep protocol; returns the peer's posted end, or
  // nothing when the announcement could not be made.
  bool announce_sleep(uint64_t* peer_posted_end);
  void slow_checks();
  void check_cm_events();
  // "" while the device port is active, else what is wrong with it (for
  // down reasons: a vanished device looks like a disconnect or a QP error).
  std::string device_health() const;
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
  uint64_t* const posted_end_;                   // in our control region, read by the peer
  const uint64_t* const read_target_;            // where the peer's posted end lands

  // Send side (sender thread). Ring positions grow forever (offset = pos %
  // ring). sent_ <= record_start_ < frames_end_; stream_end() - peer_released_
  // <= ring_bytes_.
  uint64_t sent_ = 0;          // end of the last record handed to the device
  bool record_open_ = false;   // frames are being committed behind a header slot
  uint64_t record_start_ = 0;  // the open record's header position
  uint64_t frames_end_ = 0;    // end of its committed frames
  uint64_t record_seq_ = 1;    // number of the next record
  std::size_t reserved_ = 0;
  uint64_t peer_released_ = 0;
  uint64_t peer_receives_ = 0;  // receives the peer has posted in total (wake-up credit)
  uint64_t peer_sleep_seq_ = 0;
  uint64_t woken_seq_ = 0;  // the peer's sleep announcement we last answered
  uint64_t notifies_ = 0;   // wake-ups posted (each takes one peer receive), + repeated hellos
  uint32_t flush_cm_countdown_ = kFlushCheckEvery;
  uint64_t slowdown_used_bytes_ = 0;  // the base class's slowdown limit, scaled to the ring
  bool pressure_noted_ = false;       // the last note_send_buffer_level() saw kSlowdown or worse

  // Send queue, guarded by sq_mutex_.
  std::mutex sq_mutex_;
  uint64_t sq_posted_ = 0;
  uint64_t sq_completed_ = 0;  // every work request below this has completed
  uint64_t last_signaled_ = 0;
  uint64_t reported_released_ = 0;
  uint64_t reported_receives_ = 0;
  uint64_t reported_sleep_seq_ = 0;

  // Receive side (receiver thread). released_ <= batch_end_ <= next_record_.
  uint64_t next_record_ = 0;  // where the next record's header will be
  uint64_t expected_seq_ = 1;
  uint64_t released_ = 0;   // ring position of the first unreleased byte
  uint64_t batch_end_ = 0;  // end of the current record's frames
  uint32_t batch_frames_ = 0;
  uint64_t consumed_receives_ = 0;
  uint64_t posted_receives_ = 0;
  uint64_t credit_trigger_ = 0;  // released_ at the last credit write we asked for
  uint64_t sleep_seq_ = 0;
  bool receive_stopped_ = false;
  uint32_t receive_countdown_ = kSlowCheckEvery;
  uint64_t next_slow_check_ns_ = 0;
  std::atomic<uint64_t> released_public_{0};   // R1: store-release after the bytes are no longer read
  std::atomic<uint64_t> reposted_public_{0};   // R1: store-release after ibv_post_recv returned
  std::atomic<uint64_t> sleep_seq_public_{0};  // R1: store-release after the CQ is armed
  std::atomic<bool> credit_pending_{false};    // a credit write found no send-queue slot

  std::mutex cm_mutex_;

  // LinkInfo counters: one writer each (under sq_mutex_), relaxed readers.
  std::atomic<uint64_t> data_writes_{0}, inline_writes_{0}, signaled_{0}, posted_{0}, credit_writes_{0}, queue_full_{0},
      wakeups_{0};
};

}  // namespace fjord::rdma
