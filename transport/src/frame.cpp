#include "fjord/transport/frame.h"

#include <cstring>

#include "fjord/base/assert.h"
#include "fjord/base/crc32c.h"

namespace fjord::frame {
namespace {

static_assert(kMaxFrameBytes % kFrameAlign == 0);

uint32_t load32(const std::byte* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store32(std::byte* p, uint32_t v) noexcept { std::memcpy(p, &v, sizeof v); }
void store64(std::byte* p, uint64_t v) noexcept { std::memcpy(p, &v, sizeof v); }

constexpr std::size_t align_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) / a * a; }

std::size_t total_for(std::size_t body, bool checksum) noexcept {
  return align_up(body + (checksum ? 4 : 0), kFrameAlign);
}

bool all_zero(const std::byte* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

// The header's checks, in the order peek_frame() reports them, from the
// header's first and third words (detail::write_header's layout).
[[gnu::always_inline]] inline FrameError check_header(uint64_t h0, uint64_t h2) noexcept {
  const auto length = static_cast<uint32_t>(h0 >> 32);
  if (static_cast<uint8_t>(h0) != kFrameVersion) return FrameError::kBadVersion;
  if ((static_cast<uint8_t>(h0 >> 8) & ~kKnownFlags) != 0) return FrameError::kBadFlags;
  if (static_cast<uint16_t>(h0 >> 16) == 0) return FrameError::kZeroSignalNumber;
  if (length < kHeaderBytes || length > kMaxFrameBytes || length % kFrameAlign != 0) return FrameError::kBadLength;
  if (static_cast<uint8_t>(h2) > kMaxDataWords) return FrameError::kTooManyDataWords;
  if (static_cast<uint8_t>(h2 >> 8) > kMaxSections) return FrameError::kTooManySections;
  if (static_cast<uint16_t>(h2 >> 16) != 0) return FrameError::kReservedNonZero;
  return FrameError::kNone;
}

// Full validation of a frame whose header check_header() accepted (h0, h2)
// and whose announced length is available. Decoding is decode_validated()'s.
FrameError validate_body(const std::byte* p, std::size_t frame_bytes, uint64_t h0, uint64_t h2) noexcept {
  const std::size_t data_words = static_cast<uint8_t>(h2);
  const std::size_t section_count = static_cast<uint8_t>(h2 >> 8);
  const bool checksum = ((h0 >> 8) & kFlagChecksum) != 0;
  const std::size_t lengths_at = kHeaderBytes + 4 * data_words;
  std::size_t body = lengths_at + 4 * section_count;
  if (body > frame_bytes) return FrameError::kLengthMismatch;
  // One walk over the sections: each bounded by what is left (so no sum can
  // wrap; what is left is a multiple of 4, so the section's padding is
  // inside too), its padding checked on the way and reported only if the
  // parts add up to the length (rounded as frame_bytes_for()).
  bool pads_zero = true;
  for (std::size_t i = 0; i < section_count; ++i) {
    const std::size_t n = load32(p + lengths_at + 4 * i);
    if (n > frame_bytes - body) return FrameError::kLengthMismatch;
    const std::size_t padded = align_up(n, 4);
    pads_zero = all_zero(p + body + n, padded - n) && pads_zero;
    body += padded;
  }
  if (total_for(body, checksum) != frame_bytes) return FrameError::kLengthMismatch;
  if (!pads_zero) return FrameError::kBadPadding;
  const std::size_t pad_end = checksum ? frame_bytes - 4 : frame_bytes;
  if (!all_zero(p + body, pad_end - body)) return FrameError::kBadPadding;
  if (checksum && crc32c(p, frame_bytes - 4) != load32(p + frame_bytes - 4)) return FrameError::kBadChecksum;
  return FrameError::kNone;
}

void load_header_words(const std::byte* p, uint64_t& h0, uint64_t& h2) noexcept {
  std::memcpy(&h0, p, sizeof h0);
  std::memcpy(&h2, p + 16, sizeof h2);
}

// Full validation of the frame at the start of `bytes`, its header read
// once: kIncomplete until all of it is there. Sets `length` when the header
// is good. For unpack_frame() and scan_frames().
[[gnu::always_inline]] inline FrameError check_frame(std::span<const std::byte> bytes, std::size_t& length) noexcept {
  if (bytes.size() < kHeaderBytes) return FrameError::kIncomplete;
  uint64_t h0, h2;
  load_header_words(bytes.data(), h0, h2);
  if (const FrameError error = check_header(h0, h2); error != FrameError::kNone) return error;
  length = static_cast<uint32_t>(h0 >> 32);
  return bytes.size() < length ? FrameError::kIncomplete : validate_body(bytes.data(), length, h0, h2);
}

}  // namespace

const char* frame_error_name(FrameError error) noexcept {
  switch (error) {
    case FrameError::kNone: return "ok";
    case FrameError::kIncomplete: return "incomplete frame";
    case FrameError::kBadVersion: return "unsupported frame version";
    case FrameError::kBadFlags: return "unknown frame flags";
    case FrameError::kZeroSignalNumber: return "signal number 0";
    case FrameError::kBadLength: return "frame length out of range or unaligned";
    case FrameError::kTooManyDataWords: return "too many data words";
    case FrameError::kTooManySections: return "too many sections";
    case FrameError::kReservedNonZero: return "reserved header bits set";
    case FrameError::kLengthMismatch: return "frame parts do not add up to its length";
    case FrameError::kBadPadding: return "non-zero padding";
    case FrameError::kBadChecksum: return "checksum mismatch";
    case FrameError::kMissingChecksum: return "no checksum on a link configured with Checksum=1";
  }
  return "unknown frame error";
}

std::size_t pack_frame(std::span<std::byte> dest, const SignalHeader& header, std::span<const uint32_t> data,
                       std::span<const std::span<const std::byte>> sections, bool checksum) noexcept {
  if (header.signal_number == 0) return 0;
  const std::size_t total = frame_bytes_for(data.size(), sections, checksum);
  if (total == 0 || total > dest.size()) return 0;
  return pack_frame_sized(dest.data(), total, header, data, sections, checksum);
}

std::size_t pack_frame_sized(std::byte* p, std::size_t total, const SignalHeader& header,
                             std::span<const uint32_t> data, std::span<const std::span<const std::byte>> sections,
                             bool checksum) noexcept {
  FJORD_ASSERT(header.signal_number != 0);
  FJORD_ASSERT(total >= kHeaderBytes);
  FJORD_ASSERT(total % kFrameAlign == 0);
  // Padding is zero: the frame's last 8 bytes (its end padding is at most 7,
  // or 3 before a checksum) and each section's last word are zeroed before
  // anything is copied, and the copies then overwrite what is not padding.
  // Fixed-size stores, not memsets of 0-7 bytes.
  static_assert(kHeaderBytes >= 8 && kFrameAlign == 8);
  store64(p + total - 8, 0);
  detail::write_header(p, header, total, checksum, data.size(), sections.size());

  std::size_t cursor = kHeaderBytes;
  if (!data.empty()) std::memcpy(p + cursor, data.data(), 4 * data.size());
  cursor += 4 * data.size();
  for (std::size_t i = 0; i < sections.size(); ++i)
    store32(p + cursor + 4 * i, static_cast<uint32_t>(sections[i].size()));
  cursor += 4 * sections.size();
  for (const auto& section : sections) {
    const std::size_t padded = align_up(section.size(), 4);
    if (padded != section.size()) store32(p + cursor + padded - 4, 0);
    if (!section.empty()) std::memcpy(p + cursor, section.data(), section.size());
    cursor += padded;
  }
  // `total` was frame_bytes_for() these parts: the end padding is 0-7 bytes.
  const std::size_t end = cursor + (checksum ? 4 : 0);
  FJORD_ASSERT_MSG(end <= total, "pack_frame_sized: total is not this frame's length");
  FJORD_ASSERT_MSG(total - end < kFrameAlign, "pack_frame_sized: total is not this frame's length");
  if (checksum) store32(p + total - 4, crc32c(p, total - 4));
  return total;
}

PeekResult peek_frame(std::span<const std::byte> bytes) noexcept {
  PeekResult r;
  if (bytes.size() < kHeaderBytes) return r;  // kIncomplete
  uint64_t h0, h2;
  load_header_words(bytes.data(), h0, h2);
  r.error = check_header(h0, h2);
  if (r.error == FrameError::kNone) {
    r.frame_bytes = static_cast<uint32_t>(h0 >> 32);
    if (bytes.size() < r.frame_bytes) r.error = FrameError::kIncomplete;
  }
  return r;
}

FrameError unpack_frame(std::span<const std::byte> bytes, SignalView& out, std::size_t* frame_bytes) noexcept {
  std::size_t length = 0;
  if (const FrameError error = check_frame(bytes, length); error != FrameError::kNone) return error;
  decode_validated(bytes.first(length), out);
  if (frame_bytes) *frame_bytes = length;
  return FrameError::kNone;
}

ScanResult scan_frames(std::span<const std::byte> bytes, bool require_checksum) noexcept {
  ScanResult r;
  while (r.whole_bytes < bytes.size()) {
    std::size_t length = 0;
    FrameError error = check_frame(bytes.subspan(r.whole_bytes), length);
    // The flags byte (offset 1) is known to be there once the frame is whole.
    if (error == FrameError::kNone && require_checksum &&
        (static_cast<uint8_t>(bytes[r.whole_bytes + 1]) & kFlagChecksum) == 0)
      error = FrameError::kMissingChecksum;
    if (error != FrameError::kNone) {
      r.error = error;
      r.error_offset = r.whole_bytes;
      return r;
    }
    r.whole_bytes += length;
    ++r.frames;
  }
  return r;
}

namespace detail {
void decode_sections(const std::byte* p, std::size_t length, SignalView& out) noexcept {
  FJORD_ASSERT(out.section_count <= kMaxSections);
  const std::size_t lengths_at = kHeaderBytes + 4 * std::size_t{out.data_words};
  std::size_t cursor = lengths_at + 4 * std::size_t{out.section_count};
  for (std::size_t i = 0; i < out.section_count; ++i) {
    const std::size_t n = load32(p + lengths_at + 4 * i);
    out.sections[i] = {p + cursor, n};
    cursor += align_up(n, 4);
  }
  FJORD_ASSERT(cursor <= length);
}
}  // namespace detail

}  // namespace fjord::frame
