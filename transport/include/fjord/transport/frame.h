// Signal framing: the on-the-wire form of one signal (a "frame").
//
// Every transporter carries a byte stream of frames. A frame is
//
//   offset size  field
//   0      1     version            kFrameVersion
//   1      1     flags              kFlagChecksum; other bits must be zero
//   2      2     signal_number      GSN, never 0
//   4      4     frame_bytes        whole frame, multiple of 8, 24..kMaxFrameBytes
//   8      2+2   receiver           block, instance
//   12     2+2   sender             block, instance
//   16     1     data_words         0..kMaxDataWords 32-bit words of fixed data
//   17     1     section_count      0..kMaxSections
//   18     2     reserved           zero
//   20     4     trace              free for the sender (signal id, transaction
//                                   id); carried unchecked
//   24     4*d   data words
//   ..     4*s   section lengths in bytes
//   ..           sections, each padded with zeros to a multiple of 4
//   ..           zero padding to a multiple of 8 (checksum slot included)
//   end-4  4     crc32c of everything before it, when kFlagChecksum is set
//
// All integers are little-endian. Sizes follow NDB (25 data words, 3
// sections, 32 KB per frame). pack_frame() never writes past its buffer and
// unpack_frame()/scan_frames() never read past theirs, whatever the bytes:
// a peer's bytes are untrusted. tests/fuzz/fuzz_frame.cpp holds them to it.
//
// Thread safety: pure functions. Hot path: yes (no allocation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/transport/types.h"

namespace fjord::frame {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "frames are little-endian; add byte swaps");

inline constexpr uint8_t kFrameVersion = 1;
inline constexpr uint8_t kFlagChecksum = 0x01;
inline constexpr uint8_t kKnownFlags = kFlagChecksum;
inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::size_t kFrameAlign = 8;
inline constexpr std::size_t kMaxDataWords = 25;
inline constexpr std::size_t kMaxSections = 3;
inline constexpr std::size_t kMaxFrameBytes = 32 * 1024;

enum class FrameError : uint8_t {
  kNone = 0,
  kIncomplete,  // fewer bytes than the header or the announced length (not an error in a stream)
  kBadVersion,
  kBadFlags,
  kZeroSignalNumber,
  kBadLength,  // not a multiple of 8, or outside 24..kMaxFrameBytes
  kTooManyDataWords,
  kTooManySections,
  kReservedNonZero,
  kLengthMismatch,  // the parts do not add up to frame_bytes
  kBadPadding,      // padding bytes are not zero
  kBadChecksum,
  kMissingChecksum,  // no checksum on a link that requires one (scan_frames' require_checksum)
};

const char* frame_error_name(FrameError error) noexcept;

struct SignalHeader {
  uint16_t signal_number = 0;
  BlockRef receiver;
  BlockRef sender;
  uint32_t trace = 0;
};

// A decoded frame; every span points into the buffer passed to unpack_frame().
struct SignalView {
  SignalHeader header;
  uint8_t data_words = 0;
  uint8_t section_count = 0;
  const std::byte* data = nullptr;  // data_words * 4 bytes, maybe unaligned: use word()
  std::span<const std::byte> sections[kMaxSections];

  // Inline: blocks read their signal's words one at a time on the hot path.
  uint32_t word(std::size_t index) const noexcept {
    FJORD_ASSERT(index < data_words);
    uint32_t v;
    std::memcpy(&v, data + 4 * index, sizeof v);
    return v;
  }
};

namespace detail {
// frame_bytes_for() over anything with a size() per section. Inline: every
// signal sent asks it once or twice.
template <class Sections, class SizeOf>
std::size_t frame_bytes_of(std::size_t data_words, const Sections& sections, bool checksum, SizeOf size_of) noexcept {
  if (data_words > kMaxDataWords || sections.size() > kMaxSections) return 0;
  std::size_t body = kHeaderBytes + 4 * (data_words + sections.size());
  for (const auto& section : sections) {
    const std::size_t n = size_of(section);
    if (n > kMaxFrameBytes) return 0;  // bounds before sums
    body += (n + 3) & ~std::size_t{3};
  }
  const std::size_t total = (body + (checksum ? 4 : 0) + kFrameAlign - 1) & ~(kFrameAlign - 1);
  return total <= kMaxFrameBytes ? total : 0;
}
}  // namespace detail

// Bytes a frame with these parts occupies. Returns 0 if the parts cannot form
// a frame (too many words or sections, or longer than kMaxFrameBytes).
inline std::size_t frame_bytes_for(std::size_t data_words, std::span<const std::size_t> section_bytes,
                                   bool checksum) noexcept {
  return detail::frame_bytes_of(data_words, section_bytes, checksum, [](std::size_t n) { return n; });
}
// The same for the sections themselves (what a sender has in hand).
inline std::size_t frame_bytes_for(std::size_t data_words, std::span<const std::span<const std::byte>> sections,
                                   bool checksum) noexcept {
  return detail::frame_bytes_of(data_words, sections, checksum,
                                [](std::span<const std::byte> section) { return section.size(); });
}

namespace detail {
// Writes the 24-byte header (the table above) at p as three little-endian
// words. pack_frame() and pack_small_frame() both write it here, so the
// header's layout is coded once.
inline void write_header(std::byte* p, const SignalHeader& header, std::size_t total, bool checksum,
                         std::size_t data_words, std::size_t section_count) noexcept {
  const uint64_t flags = checksum ? kFlagChecksum : 0;
  const uint64_t head[3] = {
      uint64_t{kFrameVersion} | flags << 8 | uint64_t{header.signal_number} << 16 | uint64_t{total} << 32,
      uint64_t{header.receiver.block} | uint64_t{header.receiver.instance} << 16 | uint64_t{header.sender.block} << 32 |
          uint64_t{header.sender.instance} << 48,
      uint64_t{data_words} | uint64_t{section_count} << 8 | uint64_t{header.trace} << 32};  // reserved: 0
  static_assert(sizeof head == kHeaderBytes);
  std::memcpy(p, head, sizeof head);
}
}  // namespace detail

// Bytes of a frame with `data_words` words, no sections and no checksum.
constexpr std::size_t small_frame_bytes(std::size_t data_words) noexcept {
  return (kHeaderBytes + 4 * data_words + kFrameAlign - 1) / kFrameAlign * kFrameAlign;
}

// pack_frame() for a signal without sections or checksum (most signals
// between blocks), inline and without its checks: the same bytes. `dest`
// holds small_frame_bytes(data.size()) bytes; the signal number is not 0
// and data.size() <= kMaxDataWords. Returns the frame's length.
inline std::size_t pack_small_frame(std::byte* dest, const SignalHeader& header,
                                    std::span<const uint32_t> data) noexcept {
  FJORD_ASSERT(header.signal_number != 0);
  FJORD_ASSERT(data.size() <= kMaxDataWords);
  const std::size_t total = small_frame_bytes(data.size());
  detail::write_header(dest, header, total, false, data.size(), 0);
  if (!data.empty()) std::memcpy(dest + kHeaderBytes, data.data(), 4 * data.size());
  if (data.size() % 2 != 0) std::memset(dest + kHeaderBytes + 4 * data.size(), 0, 4);  // padding to 8
  return total;
}

// Writes one frame at the start of dest. Returns the frame's length, or 0 if
// the parts cannot form a frame or dest is too small (nothing is written then).
std::size_t pack_frame(std::span<std::byte> dest, const SignalHeader& header, std::span<const uint32_t> data,
                       std::span<const std::span<const std::byte>> sections, bool checksum) noexcept;
// pack_frame() for a sender that already asked frame_bytes_for() and holds
// room for its answer: `total` is that answer (not 0) for these very parts
// and checksum, and dest has `total` bytes. Nothing is checked again
// (assertions aside). Returns total.
std::size_t pack_frame_sized(std::byte* dest, std::size_t total, const SignalHeader& header,
                             std::span<const uint32_t> data, std::span<const std::span<const std::byte>> sections,
                             bool checksum) noexcept;

struct PeekResult {
  FrameError error = FrameError::kIncomplete;
  std::size_t frame_bytes = 0;  // set when the header is valid (even if the body is incomplete)
};

// Validates the header at the start of bytes (version, flags, reserved bits,
// length bounds, counts) without looking at the body.
PeekResult peek_frame(std::span<const std::byte> bytes) noexcept;

// Validates and decodes the frame at the start of bytes. On kNone, `out`
// describes it and *frame_bytes (if given) is its length.
FrameError unpack_frame(std::span<const std::byte> bytes, SignalView& out, std::size_t* frame_bytes = nullptr) noexcept;

struct ScanResult {
  std::size_t whole_bytes = 0;           // length of the prefix made of whole valid frames
  uint32_t frames = 0;                   // number of frames in that prefix
  FrameError error = FrameError::kNone;  // kNone, kIncomplete (more bytes needed) or a hard error
  std::size_t error_offset = 0;          // where the frame that stopped the scan starts
};

// Walks frames from the start of bytes, fully validating each, and stops at
// the first incomplete or invalid one. Transporters call this on received
// bytes so that consumers only ever see whole, valid frames, with
// `require_checksum` set on a link configured with Checksum=1: a frame's
// checksum is optional in the format, so without it a frame that simply
// lacks one would pass unchecked on a link that promised every frame is.
ScanResult scan_frames(std::span<const std::byte> bytes, bool require_checksum = false) noexcept;

namespace detail {
// decode_validated()'s section table, for frames that have one (out of line:
// most signals between blocks have none).
void decode_sections(const std::byte* frame, std::size_t length, SignalView& out) noexcept;
}  // namespace detail

// Decodes a frame that scan_frames() already validated, or that this process
// packed itself (a job-buffer entry): no checks repeated beyond bounds
// assertions. Inline: every signal a thread executes passes through it.
// Returns the frame's length.
namespace detail {
// The fields detail::write_header() wrote, read back without checks (the
// frame was validated, or packed here), into the caller's places. Returns
// the frame's length. Locals a caller does not use fold away once inlined.
inline std::size_t read_header(const std::byte* p, SignalHeader& header, uint8_t& data_words,
                               uint8_t& section_count) noexcept {
  uint64_t head[3];
  std::memcpy(head, p, sizeof head);
  header.signal_number = static_cast<uint16_t>(head[0] >> 16);
  header.receiver = {static_cast<uint16_t>(head[1]), static_cast<uint16_t>(head[1] >> 16)};
  header.sender = {static_cast<uint16_t>(head[1] >> 32), static_cast<uint16_t>(head[1] >> 48)};
  header.trace = static_cast<uint32_t>(head[2] >> 32);
  data_words = static_cast<uint8_t>(head[2]);
  section_count = static_cast<uint8_t>(head[2] >> 8);
  return static_cast<std::size_t>(head[0] >> 32);
}
}  // namespace detail

inline std::size_t decode_validated(std::span<const std::byte> bytes, SignalView& out) noexcept {
  FJORD_ASSERT(bytes.size() >= kHeaderBytes);
  const std::byte* p = bytes.data();
  const std::size_t length = detail::read_header(p, out.header, out.data_words, out.section_count);
  FJORD_ASSERT(length <= bytes.size());
  out.data = p + kHeaderBytes;
  for (auto& section : out.sections) section = {};
  if (out.section_count != 0) detail::decode_sections(p, length, out);
  FJORD_ASSERT(kHeaderBytes + 4 * std::size_t{out.data_words} <= length);
  return length;
}

// What routing a validated frame needs, read from its header alone (no
// section table): a receive thread forwards frames by these.
struct FrameRoute {
  uint16_t signal_number = 0;
  BlockRef receiver;
  std::size_t frame_bytes = 0;
};
inline FrameRoute route_of_validated(std::span<const std::byte> bytes) noexcept {
  FJORD_ASSERT(bytes.size() >= kHeaderBytes);
  SignalHeader header;
  uint8_t data_words = 0, section_count = 0;
  const std::size_t length = detail::read_header(bytes.data(), header, data_words, section_count);
  FJORD_ASSERT(length >= kHeaderBytes);
  FJORD_ASSERT(length <= bytes.size());
  return {header.signal_number, header.receiver, length};
}

// Iterates the frames of a span that scan_frames() validated, e.g. a
// Transporter::receive() batch:  for (FrameCursor c(batch.bytes); c.next(view);) ...
class FrameCursor {
 public:
  explicit FrameCursor(std::span<const std::byte> validated) noexcept : rest_(validated) {}
  bool next(SignalView& out) noexcept {
    if (rest_.empty()) return false;
    rest_ = rest_.subspan(decode_validated(rest_, out));
    return true;
  }
  std::size_t remaining_bytes() const noexcept { return rest_.size(); }

 private:
  std::span<const std::byte> rest_;
};

}  // namespace fjord::frame
