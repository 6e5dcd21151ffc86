// The benchmark's own signals between the measuring side (the "driver") and
// the echoing side (the "responder"), and the responder's loop.
//
//   ping         words {seq lo, seq hi, payload bytes}, one section of payload;
//                the responder sends the frame back unchanged
//   stream       same shape; the responder copies the payload out, checks the
//                sequence and counts, and answers nothing
//   stream end   words {messages sent lo, hi}; answered by
//   stream report words {received lo, hi, bad lo, hi, first bad seq lo, hi}
//   bye          no words; the responder's session ends
//
// The first 8 payload bytes of a message carry its sequence number (when the
// payload has 8 bytes), so a reordered or corrupted payload is noticed.
//
// Threads: a MessagePacker and a Responder belong to one thread. Hot path:
// MessagePacker::pack() and the responder's loop (no allocation after
// construction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/transport/frame.h"
#include "fjord/transport/transporter.h"
#include "options.h"

namespace fjord::bench {

enum BenchSignal : uint16_t {
  kPingSignal = 0x7B01,
  kStreamSignal = 0x7B02,
  kStreamEndSignal = 0x7B03,
  kStreamReportSignal = 0x7B04,
  kByeSignal = 0x7B05,
};
inline constexpr BlockRef kBenchBlock{900, 0};
inline constexpr std::size_t kMessageDataWords = 3;

// Frame bytes of a message with this payload, or 0 if it does not fit one frame.
std::size_t message_frame_bytes(std::size_t payload_bytes, bool checksum) noexcept;
std::size_t max_payload_bytes(bool checksum) noexcept;

// Packs ping/stream messages from a payload buffer filled once.
class MessagePacker {
 public:
  // Precondition: message_frame_bytes(payload_bytes, checksum) != 0.
  MessagePacker(std::size_t payload_bytes, bool checksum);

  std::size_t frame_bytes() const { return frame_bytes_; }
  std::size_t payload_bytes() const { return payload_.size(); }
  // Writes message `seq` at the start of dest (at least frame_bytes() long).
  // Returns frame_bytes().
  std::size_t pack(std::span<std::byte> dest, uint16_t signal, uint64_t seq) noexcept;

 private:
  std::vector<std::byte> payload_;
  std::size_t frame_bytes_;
  bool checksum_;
};

// A decoded ping/stream message.
struct Message {
  uint16_t signal = 0;
  uint64_t seq = 0;
  std::span<const std::byte> payload;
};
// False if `view` is not a ping/stream message of a consistent shape.
bool read_message(const frame::SignalView& view, Message& out) noexcept;
// The sequence number in the payload's first 8 bytes, or `seq` itself when
// the payload is shorter (nothing to check then).
uint64_t payload_seq(std::span<const std::byte> payload, uint64_t seq) noexcept;

// Sends one control signal (no payload section), flushing until the medium
// took it. kLinkDown or kTimeout. Slow path.
Status send_control(transport::Transporter& t, uint16_t signal, std::span<const uint32_t> words, uint64_t deadline_ns);

struct StreamReport {
  uint64_t received = 0;
  uint64_t bad = 0;            // out of order, wrong size, or payload not matching its number
  uint64_t first_bad_seq = 0;  // the expected number at the first bad message
};

struct SessionSummary {
  uint64_t pings = 0;
  uint64_t stream_messages = 0;
  bool said_bye = false;  // false: the link went down first
};

// Serves one driver on `t` until it says bye or the link goes down (both
// end the session normally). A frame that is not one of ours is an error.
Result<SessionSummary> serve_session(transport::Transporter& t, PollMode poll);

// Splits a 64-bit number into two words and back (low word first).
inline uint32_t low_word(uint64_t v) { return static_cast<uint32_t>(v); }
inline uint32_t high_word(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
inline uint64_t join_words(uint32_t low, uint32_t high) { return low | (uint64_t{high} << 32); }

}  // namespace fjord::bench
