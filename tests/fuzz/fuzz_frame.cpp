// libFuzzer target: the frame unpacker and stream scanner on arbitrary bytes.
// Properties: never reads past the input (ASan), and scan/unpack/cursor agree:
// every frame scan_frames() accepts unpacks, decodes to the same view, and
// re-packs to the same bytes; with checksums required, the same frames up
// to the first that has none.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fjord/transport/frame.h"

using namespace fjord::frame;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so ASan catches any over-read.
  std::vector<std::byte> input(size);
  if (size) std::memcpy(input.data(), data, size);
  const std::span<const std::byte> bytes(input);

  SignalView single;
  std::size_t single_len = 0;
  const FrameError single_error = unpack_frame(bytes, single, &single_len);

  const ScanResult scan = scan_frames(bytes);
  if (scan.whole_bytes > size) std::abort();
  if (scan.frames > 0 && single_error != FrameError::kNone) std::abort();  // first frame must agree

  FrameCursor cursor(bytes.first(scan.whole_bytes));
  SignalView view;
  std::size_t offset = 0;
  uint32_t frames = 0;
  while (cursor.next(view)) {
    SignalView checked;
    std::size_t len = 0;
    if (unpack_frame(bytes.subspan(offset), checked, &len) != FrameError::kNone) std::abort();
    if (checked.header.signal_number != view.header.signal_number || checked.data_words != view.data_words ||
        checked.section_count != view.section_count)
      std::abort();
    // Re-pack: identical bytes.
    std::vector<uint32_t> words(view.data_words);
    for (std::size_t i = 0; i < words.size(); ++i) words[i] = view.word(i);
    std::span<const std::byte> sections[kMaxSections];
    for (std::size_t i = 0; i < view.section_count; ++i) sections[i] = view.sections[i];
    std::vector<std::byte> repacked(len);
    const bool checksum = (static_cast<uint8_t>(input[offset + 1]) & kFlagChecksum) != 0;
    if (pack_frame(repacked, view.header, words, {sections, view.section_count}, checksum) != len) std::abort();
    if (std::memcmp(repacked.data(), input.data() + offset, len) != 0) std::abort();
    offset += len;
    ++frames;
  }
  if (frames != scan.frames || offset != scan.whole_bytes) std::abort();

  // A link that requires checksums accepts a prefix of the same frames: up
  // to the first without one, which is then the error (or the same stop).
  const ScanResult strict = scan_frames(bytes, true);
  if (strict.whole_bytes > scan.whole_bytes || strict.frames > scan.frames) std::abort();
  if (strict.frames < scan.frames) {
    if (strict.error != FrameError::kMissingChecksum) std::abort();
    if ((static_cast<uint8_t>(input[strict.whole_bytes + 1]) & kFlagChecksum) != 0) std::abort();
  } else if (strict.whole_bytes != scan.whole_bytes || strict.error != scan.error) {
    std::abort();
  }
  return 0;
}
