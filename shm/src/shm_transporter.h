// ShmTransporter: the data path of one shared-memory link (internal header).
//
// Send: reserve() returns space directly in the ring the peer reads (zero
// copy); commit() grows the open batch privately; flush() publishes it with
// one store-release of its envelope and wakes the peer if it sleeps.
// Receive: receive() polls the next batch's envelope (one load of the line
// the batch starts on) and returns the batch's whole, validated frames;
// release() hands the space back with one store-release. In steady state
// the sender touches only the lines it writes and the receiver only the
// lines it reads (fjord/shm/spsc_ring.h).
//
// Sleeping: wait_for_receive() spins, then sleeps on the futex word of our
// ring (fjord/shm/wakeup.h); wait_fd() is an epoll fd holding our eventfd
// (written by the peer when we armed in fd mode) and the Unix socket.
//
// Death: the Unix socket of the handshake stays open as a life line; the
// kernel closes the peer's end when its process dies, however it dies. An
// orderly close also sets our "closed" word in the shared header. Busy
// polling reads the peer's closed word on every empty poll (a line nobody
// writes, so it costs a cache hit) and polls the life line only every
// kLifeLineEmptyPolls empty polls; sleeping checks it on every wake-up.
//
// Threads: the contract's (one sender thread, one receiver thread; state(),
// stats(), close() from any thread). Hot path: reserve, commit, flush,
// receive, release make no system call and allocate nothing, except a
// futex/eventfd wake when the peer sleeps and the bounded life-line poll.
#pragma once

#include <memory>

#include "fjord/base/fd.h"
#include "fjord/shm/shm.h"
#include "fjord/shm/spsc_ring.h"
#include "fjord/shm/wakeup.h"
#include "fjord/transport/transporter.h"
#include "shm_segment.h"

namespace fjord::shm {

class ShmTransporter final : public transport::Transporter {
 public:
  // Everything set-up hands over once the handshake and fd passing are done.
  struct Resources {
    Side side = kClientSide;
    UniqueFd life_line;      // the connected Unix stream socket
    Segment segment;         // mapped; its memfd may already be closed
    UniqueFd receive_event;  // eventfd the peer writes to wake us (fd mode)
    UniqueFd send_event;     // the peer's eventfd, written to wake it
  };

  static Result<std::unique_ptr<transport::Transporter>> create(transport::LinkConfig config, NodeId self,
                                                                Resources resources);
  ~ShmTransporter() override;

  std::span<std::byte> reserve(std::size_t min_bytes) override;
  void commit(std::size_t bytes, uint32_t frames) override;
  transport::FlushStatus flush() override;
  std::size_t send_buffer_used() const override;
  std::size_t send_buffer_capacity() const override { return tx_.capacity(); }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return epoll_.get(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override;
  transport::WaitResult wait_for_receive(uint64_t timeout_ns, uint64_t spin_ns) override;

 private:
  ShmTransporter(transport::LinkConfig config, NodeId self, Resources resources, UniqueFd epoll);

  void on_down() override;

  // Receiver thread.
  void take_batch();
  void poll_ring();
  void note_empty_poll();
  void peer_gone();
  void drain_after_down();
  void poison(Status reason);
  bool ring_empty_after_recheck();

  // Either thread.
  bool peer_closed() const;
  bool life_line_alive() const;
  Status peer_gone_reason() const;
  void wake(WakeupWord& word, int event_fd) const;

  // Sender thread.
  void on_ring_full();
  void note_fill_level();

  Side side_;
  UniqueFd life_line_;
  Segment segment_;
  UniqueFd receive_event_;
  UniqueFd send_event_;
  UniqueFd epoll_;
  SegmentHeader& header_;
  uint64_t spin_config_ns_;  // ShmSpintime

  // Send side (sender thread). mutable: send_buffer_used() is const in the
  // contract but refreshes the cached read index when pressure is high.
  mutable SpscRingProducer tx_;
  std::size_t pressure_refresh_bytes_;  // refresh the cached read index above this fill
  bool above_slowdown_fill_ = false;    // the last pressure level computed was not kNormal
  uint32_t full_reserves_ = 0;

  // Receive side (receiver thread).
  SpscRingConsumer rx_;
  std::size_t scanned_bytes_ = 0;  // rx_.readable() once validated: whole frames not yet released
  uint32_t scanned_frames_ = 0;
  uint32_t empty_polls_ = 0;
  bool rx_poisoned_ = false;  // a malformed frame or envelope: read nothing more
  bool drained_ = false;      // after down: the ring was read up to its first empty envelope
};

}  // namespace fjord::shm
