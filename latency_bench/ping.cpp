#include "ping.h"

#include "fjord/base/clock.h"
#include "wire.h"

namespace fjord::bench {
namespace {

using transport::FlushStatus;
using transport::ReceiveBatch;
using transport::Transporter;
using transport::WaitResult;

constexpr uint64_t kProgressMask = 1023;  // look at the clock for progress every 1024 round trips
constexpr uint32_t kSpinsPerClockCheck = 1024;

Status link_down(const Transporter& t, uint64_t seq) {
  return Status(StatusCode::kLinkDown,
                "link went down at round trip " + std::to_string(seq) + ": " + t.down_reason().message());
}

Status send_message(Transporter& t, MessagePacker& packer, uint64_t seq) {
  std::span<std::byte> space = t.reserve(packer.frame_bytes());
  while (space.empty()) {  // only when the peer has not drained earlier bytes yet
    if (t.flush() == FlushStatus::kDown) return link_down(t, seq);
    space = t.reserve(packer.frame_bytes());
  }
  t.commit(packer.pack(space, kPingSignal, seq), 1);
  if (t.flush() == FlushStatus::kDown) return link_down(t, seq);
  return Status::ok();
}

// Returns once receive() holds at least one frame.
Status await_reply(Transporter& t, PollMode poll, uint64_t deadline_ns, uint64_t seq) {
  if (poll == PollMode::kBusy) {
    for (uint32_t spins = 1;; ++spins) {
      if (t.receive().frames != 0) return Status::ok();
      if (!t.is_up()) return link_down(t, seq);
      if (spins % kSpinsPerClockCheck == 0 && monotonic_ns() > deadline_ns) break;
    }
  } else {
    for (;;) {
      const uint64_t now = monotonic_ns();
      if (now > deadline_ns) break;
      const WaitResult r = t.wait_for_receive(deadline_ns - now, 0);
      if (r == WaitResult::kReady) return Status::ok();
      if (r == WaitResult::kDown) return link_down(t, seq);
    }
  }
  return Status(StatusCode::kTimeout, "no echo of round trip " + std::to_string(seq) + " within the timeout");
}

// Checks that the batch is exactly the echo of message `seq`, then releases it.
Status take_echo(Transporter& t, std::size_t payload_bytes, uint64_t seq) {
  const ReceiveBatch batch = t.receive();
  frame::SignalView view;
  Message m;
  const bool one = batch.frames == 1 && frame::decode_validated(batch.bytes, view) == batch.bytes.size();
  if (!one || !read_message(view, m) || m.signal != kPingSignal || m.seq != seq || m.payload.size() != payload_bytes ||
      payload_seq(m.payload, seq) != seq)
    return Status(StatusCode::kProtocolError,
                  "round trip " + std::to_string(seq) + ": the reply (" + std::to_string(batch.frames) + " frames, " +
                      std::to_string(batch.bytes.size()) + " bytes) is not the echo of the message sent");
  t.release(batch.bytes.size());
  return Status::ok();
}

}  // namespace

Status run_ping(Transporter& t, const PingParams& params, Histogram& rtt, Progress& progress) {
  const std::size_t frame_bytes = message_frame_bytes(params.payload_bytes, t.config().checksum);
  if (frame_bytes == 0)
    return Status(StatusCode::kInvalidArgument, "a " + std::to_string(params.payload_bytes) +
                                                    " B payload does not fit one frame on " + t.config().describe());
  MessagePacker packer(params.payload_bytes, t.config().checksum);
  const uint64_t total = params.warmup + params.iterations;
  for (uint64_t seq = 0; seq < total; ++seq) {
    const uint64_t start_ns = monotonic_ns();
    if (Status s = send_message(t, packer, seq); !s) return s;
    if (Status s = await_reply(t, params.poll, start_ns + params.reply_timeout_ns, seq); !s) return s;
    const uint64_t end_ns = monotonic_ns();
    if (Status s = take_echo(t, params.payload_bytes, seq); !s) return s;
    if (seq >= params.warmup) rtt.record(end_ns - start_ns);
    if ((seq & kProgressMask) == 0) progress.update(seq);
  }
  progress.update(total);
  return Status::ok();
}

}  // namespace fjord::bench
