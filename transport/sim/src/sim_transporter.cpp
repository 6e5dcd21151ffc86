// SimTransporter data path and fault injection.
#include "sim_transporter.h"

#include <algorithm>

namespace fjord::sim {

using transport::FlushStatus;
using transport::ReceiveBatch;

namespace {

// Each direction draws from its own generator, so one side's flushes never
// shift the other side's decisions.
uint64_t direction_seed(uint64_t seed, int direction) {
  return seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(direction + 1));
}

}  // namespace

SimTransporter::SimTransporter(transport::LinkConfig config, NodeId self, std::shared_ptr<SimWire> wire, int side)
    : Transporter(std::move(config), self),
      wire_(std::move(wire)),
      tx_(wire_->pipe(side)),
      rx_(wire_->pipe(1 - side)),
      random_(direction_seed(wire_->faults().seed, side)) {
  FJORD_ASSERT(side == 0 || side == 1);
  FJORD_ASSERT(tx_.capacity() >= 2 * frame::kMaxFrameBytes);
  FJORD_ASSERT(rx_.capacity() >= 2 * frame::kMaxFrameBytes);
  note_connect();
}

SimTransporter::~SimTransporter() {
  // The peer must see the link go down, as it would see a closed socket.
  declare_down(
      Status(StatusCode::kLinkDown, "the transporter of node " + std::to_string(local_node()) + " was destroyed"));
}

// ---- send side ------------------------------------------------------------

std::span<std::byte> SimTransporter::reserve(std::size_t min_bytes) {
  FJORD_ASSERT(min_bytes > 0);
  FJORD_ASSERT(min_bytes <= frame::kMaxFrameBytes);
  if (!is_up()) return {};
  if (wire_->broken()) {
    take_down_from_wire();
    return {};
  }
  const std::size_t free_bytes = tx_.capacity() - send_buffer_used();
  if (free_bytes < min_bytes) return {};
  reserved_ = free_bytes;
  return {tx_.ring_data() + committed_ % tx_.capacity(), free_bytes};
}

void SimTransporter::commit(std::size_t bytes, uint32_t frames) {
  FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
  committed_ += bytes;
  reserved_ = 0;
  note_commit(bytes, frames);
  note_send_buffer_level();
}

// Fault injection, in a fixed order of draws per flush that has bytes to
// move: drop the link? move only part? hold the batch back how long?
FlushStatus SimTransporter::flush() {
  if (!is_up()) return FlushStatus::kDown;
  if (wire_->broken()) {
    take_down_from_wire();
    return FlushStatus::kDown;
  }
  const uint64_t pending = committed_ - published_;
  if (pending == 0) return FlushStatus::kFlushed;
  const SimFaults& faults = wire_->faults();
  ++flushes_;
  if (faults.disconnect_per_million != 0 && random_.below(1'000'000) < faults.disconnect_per_million) {
    wire_->break_link(injected_disconnect());
    take_down_from_wire();
    return FlushStatus::kDown;
  }
  uint64_t moved = pending;
  if (faults.short_write_percent != 0 && pending > 1 && random_.below(100) < faults.short_write_percent)
    moved = 1 + random_.below(pending - 1);
  const auto hold = faults.delay_polls == 0 ? 0 : static_cast<uint32_t>(random_.below(faults.delay_polls + 1ULL));
  published_ += moved;
  tx_.publish(published_, hold);
  note_send(moved);
  note_send_buffer_level();
  return moved == pending ? FlushStatus::kFlushed : FlushStatus::kPending;
}

std::size_t SimTransporter::send_buffer_used() const { return static_cast<std::size_t>(committed_ - tx_.released()); }

Status SimTransporter::injected_disconnect() const {
  const SimFaults& f = wire_->faults();
  return Status(StatusCode::kLinkDown, "sim fault injection dropped " + config().describe() + " at flush " +
                                           std::to_string(flushes_) + " of node " + std::to_string(local_node()) +
                                           " (Seed=" + std::to_string(f.seed) +
                                           ", DisconnectChance=" + std::to_string(f.disconnect_per_million) +
                                           " per million; set Seed=" + std::to_string(f.seed) + " to replay)");
}

// ---- receive side ---------------------------------------------------------

ReceiveBatch SimTransporter::receive() {
  if (scanned_ == released_) {
    if (is_up()) {
      const bool broken = wire_->broken();
      // A broken wire first hands over everything flushed before the break.
      delivered_ = rx_.poll(broken);
      if (!scan_delivered() && broken) {
        take_down_from_wire();
        final_drain_done_ = true;
      }
    } else if (!final_drain_done_) {
      final_drain_done_ = true;
      delivered_ = rx_.poll(true);
      (void)scan_delivered();
    }
  }
  return {{rx_.ring_data() + released_ % rx_.capacity(), static_cast<std::size_t>(scanned_ - released_)},
          scanned_frames_};
}

// Validates delivered bytes after the scanned ones. True if whole frames
// were added; a malformed frame takes the link down.
bool SimTransporter::scan_delivered() {
  if (poisoned_ || scanned_ == delivered_) return false;
  const std::span<const std::byte> fresh(rx_.ring_data() + scanned_ % rx_.capacity(),
                                         static_cast<std::size_t>(delivered_ - scanned_));
  const frame::ScanResult scan = frame::scan_frames(fresh, config().checksum);
  if (scan.whole_bytes != 0) {
    scanned_ += scan.whole_bytes;
    scanned_frames_ += scan.frames;
    note_receive(scan.whole_bytes, scan.frames);
  }
  if (scan.error != frame::FrameError::kNone && scan.error != frame::FrameError::kIncomplete) {
    poisoned_ = true;
    declare_down(Status(StatusCode::kProtocolError, "malformed frame from node " + std::to_string(remote_node()) +
                                                        " at stream offset " + std::to_string(scanned_) + ": " +
                                                        frame::frame_error_name(scan.error)));
  }
  return scan.whole_bytes != 0;
}

void SimTransporter::release(std::size_t bytes) {
  FJORD_ASSERT_MSG(bytes <= scanned_ - released_, "release beyond the received frames");
  if (bytes == scanned_ - released_) {
    scanned_frames_ = 0;
  } else {
    frame::FrameCursor cursor({rx_.ring_data() + released_ % rx_.capacity(), bytes});
    frame::SignalView view;
    while (cursor.next(view)) --scanned_frames_;
  }
  released_ += bytes;
  rx_.release(released_);
}

bool SimTransporter::arm_wakeup() {
  if (scanned_ != released_ || !is_up()) return false;
  if (wire_->broken()) {
    (void)receive();  // hands over what is left, then takes the link down
    return false;
  }
  if (rx_.arm(delivered_)) return true;
  delivered_ = rx_.poll(false);  // arm() delivered everything held
  (void)scan_delivered();
  return false;
}

// ---- down -----------------------------------------------------------------

void SimTransporter::take_down_from_wire() { declare_down(wire_->reason()); }

void SimTransporter::on_down() {
  // Any thread. The first break names the cause; later ones are ignored.
  wire_->break_link(Status(StatusCode::kLinkDown, "node " + std::to_string(local_node()) +
                                                      " took the sim link down: " + down_reason().message()));
  rx_.wake_receiver();  // our own receiver, if it sleeps on wait_fd()
}

}  // namespace fjord::sim
