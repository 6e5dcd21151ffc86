// SimTransporter: one end of a simulated link (internal header).
//
// Send: reserve() returns space in the pipe's ring at the committed index;
// commit() advances it; flush() is where faults are injected (a dropped
// link, a short write, a held-back batch), each decided by this direction's
// SimRandom in a fixed order, so a given seed and sequence of flushes always
// gives the same events. Receive: receive() polls the pipe (one poll counts
// down held batches), scans the delivered bytes and returns whole, validated
// frames; partial frames from short writes wait for their tail.
//
// When the link breaks (injected, closed, destroyed, malformed frame), the
// bytes flushed before the break are still delivered and returned, then the
// link is down with the wire's reason on both ends.
//
// Threads: the contract's. Hot path: no allocation (the reasons of a fault
// allocate, once).
#pragma once

#include <memory>

#include "fjord/transport/transporter.h"
#include "sim_wire.h"

namespace fjord::sim {

class SimTransporter final : public transport::Transporter {
 public:
  // side 0 = client, 1 = server: the client sends on pipe 0, the server on 1.
  SimTransporter(transport::LinkConfig config, NodeId self, std::shared_ptr<SimWire> wire, int side);
  ~SimTransporter() override;

  std::span<std::byte> reserve(std::size_t min_bytes) override;
  void commit(std::size_t bytes, uint32_t frames) override;
  transport::FlushStatus flush() override;
  std::size_t send_buffer_used() const override;
  std::size_t send_buffer_capacity() const override { return tx_.capacity(); }

  transport::ReceiveBatch receive() override;
  void release(std::size_t bytes) override;

  int wait_fd() const override { return rx_.receiver_event(); }
  bool arm_wakeup() override;
  void disarm_wakeup() override { rx_.disarm(); }

 private:
  void on_down() override;
  Status injected_disconnect() const;
  bool scan_delivered();
  void take_down_from_wire();

  std::shared_ptr<SimWire> wire_;
  SimPipe& tx_;
  SimPipe& rx_;

  // Send side (sender thread).
  SimRandom random_;
  uint64_t committed_ = 0;
  uint64_t published_ = 0;
  uint64_t flushes_ = 0;  // flushes that had bytes to move (each draws from random_)
  std::size_t reserved_ = 0;

  // Receive side (receiver thread): released_ <= scanned_ <= delivered_.
  uint64_t released_ = 0;
  uint64_t scanned_ = 0;
  uint64_t delivered_ = 0;
  uint32_t scanned_frames_ = 0;
  bool poisoned_ = false;          // after a malformed frame nothing more is read
  bool final_drain_done_ = false;  // after down: everything flushed before was delivered once
};

}  // namespace fjord::sim
