// One frame at a time over a link, busy-polling or sleeping on the link's
// wait_fd(): what rdma_test's ConnectionsFromAnotherProcess and its helper
// process (rdma_peer) do with each new connection.
#pragma once

#include <cstdint>
#include <string>

#include "fjord/base/clock.h"
#include "link_harness.h"

namespace fjord::test {

// Sends sequenced frame `seq` (mixed sizes up to 4000 bytes) and flushes
// until it is on its way: a flush stays kPending while the peer sleeps with
// no receive posted for the wake-up, until its credit comes back.
inline std::string send_frame(transport::Transporter& t, uint64_t seq, uint64_t timeout_ns) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  while (!send_sequenced(t, seq, mixed_payload_bytes(seq) % 4000)) {
    if (!t.is_up()) return "link down: " + t.down_reason().to_string();
    if (monotonic_ns() > deadline) return "no send space for frame " + std::to_string(seq);
    (void)t.receive();
  }
  for (;;) {
    const transport::FlushStatus s = t.flush();
    if (s == transport::FlushStatus::kFlushed) return "";
    if (s == transport::FlushStatus::kDown) return "link down: " + t.down_reason().to_string();
    if (monotonic_ns() > deadline) return "frame " + std::to_string(seq) + " still pending";
    (void)t.receive();
  }
}

// Receives the next frame and checks that it is `seq`, the only one in
// flight. `sleep`: wait_for_receive() with no spin, so every frame has to
// wake the receiver through the completion channel. "" or what went wrong.
inline std::string receive_frame(transport::Transporter& t, uint64_t seq, bool sleep, uint64_t timeout_ns) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  for (;;) {
    const transport::ReceiveBatch batch = t.receive();
    if (batch.frames > 0) {
      frame::FrameCursor cursor(batch.bytes);
      frame::SignalView view;
      std::string error = cursor.next(view) ? check_sequenced(view, seq) : "a batch without a whole frame";
      if (error.empty() && cursor.next(view)) error = "more than one frame in flight";
      t.release(batch.bytes.size());
      return error;
    }
    if (!t.is_up()) return "link down: " + t.down_reason().to_string();
    const uint64_t now = monotonic_ns();
    if (now > deadline) return "frame " + std::to_string(seq) + " did not arrive";
    if (sleep) (void)t.wait_for_receive(deadline - now, 0);
  }
}

}  // namespace fjord::test
