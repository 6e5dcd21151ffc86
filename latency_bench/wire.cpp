#include "wire.h"

#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {

using transport::FlushStatus;
using transport::Transporter;

constexpr uint64_t kControlTimeoutNs = 10'000'000'000ULL;
constexpr uint64_t kSleepSliceNs = 1'000'000'000ULL;

// Answers one driver. Holds the stream's expected number and counters.
class Responder {
 public:
  Responder(Transporter& t, PollMode poll) : t_(t), poll_(poll), scratch_(frame::kMaxFrameBytes) {}

  Result<SessionSummary> run() {
    for (;;) {
      if (unflushed_) unflushed_ = t_.flush() == FlushStatus::kPending;
      const transport::ReceiveBatch batch = t_.receive();
      if (batch.frames == 0) {
        if (!t_.is_up()) return summary_;  // the driver went away: the session is over
        if (poll_ == PollMode::kSleep && !unflushed_) (void)t_.wait_for_receive(kSleepSliceNs, 0);
        continue;
      }
      if (Status s = handle(batch.bytes); !s) return s;
      t_.release(batch.bytes.size());
      if (unflushed_) unflushed_ = t_.flush() == FlushStatus::kPending;
      if (summary_.said_bye) return summary_;
    }
  }

 private:
  Status handle(std::span<const std::byte> bytes) {
    frame::SignalView view;
    while (!bytes.empty()) {
      const std::size_t length = frame::decode_validated(bytes, view);
      const std::span<const std::byte> whole = bytes.first(length);
      bytes = bytes.subspan(length);
      Message m;
      switch (view.header.signal_number) {
        case kPingSignal:
          if (!echo(whole)) return Status(StatusCode::kLinkDown, "link went down while echoing");
          ++summary_.pings;
          break;
        case kStreamSignal:
          if (!read_message(view, m)) return malformed(view);
          consume(m);
          break;
        case kStreamEndSignal:
          if (Status s = answer_stream_end(view); !s) return s;
          break;
        case kByeSignal: summary_.said_bye = true; return Status::ok();
        default: return malformed(view);
      }
    }
    return Status::ok();
  }

  static Status malformed(const frame::SignalView& view) {
    return Status(StatusCode::kProtocolError,
                  "unexpected signal " + std::to_string(view.header.signal_number) + " from the driver");
  }

  // Sends the frame back as it came: one copy into the transporter's memory.
  bool echo(std::span<const std::byte> whole) {
    std::span<std::byte> space = t_.reserve(whole.size());
    while (space.empty()) {
      if (t_.flush() == FlushStatus::kDown) return false;
      space = t_.reserve(whole.size());
    }
    std::memcpy(space.data(), whole.data(), whole.size());
    t_.commit(whole.size(), 1);
    unflushed_ = true;
    return true;
  }

  // What a consumer does with a message: copies the payload out of the
  // transporter's memory (as a receive thread fills a job buffer) and reads it.
  void consume(const Message& m) {
    std::memcpy(scratch_.data(), m.payload.data(), m.payload.size());
    const std::span<const std::byte> copy(scratch_.data(), m.payload.size());
    if (m.seq != expected_ || payload_seq(copy, m.seq) != m.seq) {
      if (report_.bad == 0) report_.first_bad_seq = expected_;
      ++report_.bad;
    }
    expected_ = m.seq + 1;
    ++report_.received;
    ++summary_.stream_messages;
  }

  Status answer_stream_end(const frame::SignalView& view) {
    if (view.data_words != 2) return malformed(view);
    const uint64_t sent = join_words(view.word(0), view.word(1));
    if (sent != report_.received && report_.bad == 0) {
      report_.first_bad_seq = expected_;
      report_.bad = 1;
    }
    const uint32_t words[] = {low_word(report_.received),      high_word(report_.received),
                              low_word(report_.bad),           high_word(report_.bad),
                              low_word(report_.first_bad_seq), high_word(report_.first_bad_seq)};
    report_ = {};
    expected_ = 0;
    unflushed_ = false;
    return send_control(t_, kStreamReportSignal, words, monotonic_ns() + kControlTimeoutNs);
  }

  Transporter& t_;
  PollMode poll_;
  std::vector<std::byte> scratch_;
  bool unflushed_ = false;
  uint64_t expected_ = 0;
  StreamReport report_;
  SessionSummary summary_;
};

}  // namespace

std::size_t message_frame_bytes(std::size_t payload_bytes, bool checksum) noexcept {
  const std::size_t sections[] = {payload_bytes};
  return frame::frame_bytes_for(kMessageDataWords, sections, checksum);
}

std::size_t max_payload_bytes(bool checksum) noexcept {
  // Header, the data words and one section length; the rest of a maximal
  // frame (minus the checksum slot) is payload, rounded down to whole words.
  std::size_t payload = frame::kMaxFrameBytes - frame::kHeaderBytes - 4 * kMessageDataWords - 4;
  while (payload > 0 && message_frame_bytes(payload, checksum) == 0) --payload;
  return payload;
}

MessagePacker::MessagePacker(std::size_t payload_bytes, bool checksum)
    : payload_(payload_bytes), frame_bytes_(message_frame_bytes(payload_bytes, checksum)), checksum_(checksum) {
  FJORD_ASSERT(frame_bytes_ != 0);
  for (std::size_t i = 0; i < payload_.size(); ++i) payload_[i] = static_cast<std::byte>(i * 7 + 1);
}

std::size_t MessagePacker::pack(std::span<std::byte> dest, uint16_t signal, uint64_t seq) noexcept {
  if (payload_.size() >= sizeof seq) std::memcpy(payload_.data(), &seq, sizeof seq);
  const uint32_t words[kMessageDataWords] = {low_word(seq), high_word(seq), static_cast<uint32_t>(payload_.size())};
  const std::span<const std::byte> sections[] = {payload_};
  const frame::SignalHeader header{signal, kBenchBlock, kBenchBlock, low_word(seq)};
  const std::size_t written = frame::pack_frame(dest, header, words, sections, checksum_);
  FJORD_ASSERT(written == frame_bytes_);
  return written;
}

bool read_message(const frame::SignalView& view, Message& out) noexcept {
  if (view.data_words != kMessageDataWords || view.section_count != 1) return false;
  if (view.sections[0].size() != view.word(2)) return false;
  out.signal = view.header.signal_number;
  out.seq = join_words(view.word(0), view.word(1));
  out.payload = view.sections[0];
  return true;
}

uint64_t payload_seq(std::span<const std::byte> payload, uint64_t seq) noexcept {
  if (payload.size() < sizeof seq) return seq;
  uint64_t in_payload = 0;
  std::memcpy(&in_payload, payload.data(), sizeof in_payload);
  return in_payload;
}

Status send_control(Transporter& t, uint16_t signal, std::span<const uint32_t> words, uint64_t deadline_ns) {
  const frame::SignalHeader header{signal, kBenchBlock, kBenchBlock, 0};
  while (!t.send_signal(header, words, {}, false)) {
    if (!t.is_up()) return Status(StatusCode::kLinkDown, "link down: " + t.down_reason().message());
    if (monotonic_ns() > deadline_ns) return Status(StatusCode::kTimeout, "the peer's link stayed full");
    (void)t.flush();
  }
  for (;;) {
    const FlushStatus f = t.flush();
    if (f == FlushStatus::kFlushed) return Status::ok();
    if (f == FlushStatus::kDown) return Status(StatusCode::kLinkDown, "link down: " + t.down_reason().message());
    if (monotonic_ns() > deadline_ns) return Status(StatusCode::kTimeout, "the medium did not take a control signal");
  }
}

Result<SessionSummary> serve_session(Transporter& t, PollMode poll) {
  Responder responder(t, poll);
  return responder.run();
}

}  // namespace fjord::bench
