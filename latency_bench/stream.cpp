#include "stream.h"

#include <algorithm>

#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {

using transport::FlushStatus;
using transport::Transporter;
using transport::WaitResult;

constexpr uint64_t kProgressMask = 4095;
constexpr uint32_t kMaxBackoffPauses = 64;  // ~1-3 us of PAUSE at most between retries

Status link_down(const Transporter& t, uint64_t seq) {
  return Status(StatusCode::kLinkDown,
                "link went down after " + std::to_string(seq) + " messages: " + t.down_reason().message());
}

// Sends messages 0..count-1 as fast as the link takes them.
Status send_all(Transporter& t, MessagePacker& packer, const StreamParams& p, uint64_t count, uint64_t& full_waits,
                Progress& progress) {
  const std::size_t frame_bytes = packer.frame_bytes();
  uint64_t last_progress_ns = monotonic_ns();
  uint32_t backoff = 1;
  for (uint64_t seq = 0; seq < count;) {
    const std::span<std::byte> space = t.reserve(frame_bytes);
    if (space.empty()) {
      ++full_waits;
      if (t.flush() == FlushStatus::kDown || !t.is_up()) return link_down(t, seq);
      if ((full_waits & 1023) == 0 && monotonic_ns() - last_progress_ns > p.timeout_ns)
        return Status(StatusCode::kTimeout,
                      "the link stayed full for the timeout after " + std::to_string(seq) + " messages");
      // Back off before asking again (docs/transport.md: a full peer is
      // retried with back-off): re-reading the consumer's index at full
      // speed steals the cache line it must write to make room.
      for (uint32_t i = 0; i < backoff; ++i) cpu_relax();
      backoff = std::min(backoff * 2, kMaxBackoffPauses);
      continue;
    }
    backoff = 1;
    const uint64_t frames = std::min<uint64_t>({space.size() / frame_bytes, p.batch, count - seq});
    for (uint64_t i = 0; i < frames; ++i) packer.pack(space.subspan(i * frame_bytes), kStreamSignal, seq + i);
    t.commit(frames * frame_bytes, static_cast<uint32_t>(frames));
    if (t.flush() == FlushStatus::kDown) return link_down(t, seq);
    if (((seq ^ (seq + frames)) & ~kProgressMask) != 0) {
      last_progress_ns = monotonic_ns();
      progress.update(seq + frames);
    }
    seq += frames;
  }
  return Status::ok();
}

Result<StreamReport> await_report(Transporter& t, PollMode poll, uint64_t deadline_ns) {
  for (;;) {
    const transport::ReceiveBatch batch = t.receive();
    if (batch.frames != 0) {
      frame::SignalView view;
      const std::size_t length = frame::decode_validated(batch.bytes, view);
      if (view.header.signal_number != kStreamReportSignal || view.data_words != 6)
        return Status(StatusCode::kProtocolError,
                      "expected the stream report, got signal " + std::to_string(view.header.signal_number));
      const StreamReport r{join_words(view.word(0), view.word(1)), join_words(view.word(2), view.word(3)),
                           join_words(view.word(4), view.word(5))};
      t.release(length);
      return r;
    }
    if (!t.is_up()) return link_down(t, 0);
    const uint64_t now = monotonic_ns();
    if (now > deadline_ns) return Status(StatusCode::kTimeout, "no stream report within the timeout");
    if (poll == PollMode::kSleep) (void)t.wait_for_receive(deadline_ns - now, 0);
  }
}

// One stream of `count` messages, timed from the first reserve to the report.
Result<StreamResult> one_stream(Transporter& t, MessagePacker& packer, const StreamParams& p, uint64_t count,
                                Progress& progress) {
  StreamResult r;
  r.messages = count;
  r.payload_bytes = packer.payload_bytes();
  r.frame_bytes = packer.frame_bytes();
  const uint64_t start_ns = monotonic_ns();
  if (Status s = send_all(t, packer, p, count, r.full_waits, progress); !s) return s;
  const uint32_t words[] = {low_word(count), high_word(count)};
  if (Status s = send_control(t, kStreamEndSignal, words, monotonic_ns() + p.timeout_ns); !s) return s;
  auto report = await_report(t, p.poll, monotonic_ns() + p.timeout_ns);
  if (!report) return report.status();
  r.elapsed_ns = monotonic_ns() - start_ns;
  r.report = *report;
  if (r.report.received != count || r.report.bad != 0)
    return Status(StatusCode::kProtocolError, "the peer received " + std::to_string(r.report.received) + " of " +
                                                  std::to_string(count) + " messages, " + std::to_string(r.report.bad) +
                                                  " bad (first at message " + std::to_string(r.report.first_bad_seq) +
                                                  ")");
  return r;
}

}  // namespace

Result<StreamResult> run_stream(Transporter& t, const StreamParams& params, Progress& progress) {
  if (message_frame_bytes(params.payload_bytes, t.config().checksum) == 0)
    return Status(StatusCode::kInvalidArgument, "a " + std::to_string(params.payload_bytes) +
                                                    " B payload does not fit one frame on " + t.config().describe());
  MessagePacker packer(params.payload_bytes, t.config().checksum);
  if (params.warmup > 0) {
    auto warm = one_stream(t, packer, params, params.warmup, progress);
    if (!warm) return warm.status();
  }
  return one_stream(t, packer, params, params.messages, progress);
}

}  // namespace fjord::bench
