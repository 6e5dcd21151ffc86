// libFuzzer target: the RDMA receive ring's record reader (rdma/src/wire.h,
// placed_record, then frame.h's scan as RdmaTransporter::poll_ring does) over
// bytes a peer's RDMA WRITEs placed. The input is a script: each step stores
// a word anywhere in the ring, places a whole record (header, frames from the
// input, trailer) where the reader looks next or a lap later, or polls. Whatever
// the words, a record the reader takes lies inside the ring's double mapping,
// starts where the reader looked, has a length a ring can hold, and the reader
// only moves forward; after a malformed frame it takes nothing more.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fjord/base/mirrored_map.h"
#include "fjord/transport/frame.h"
#include "script_input.h"
#include "wire.h"

using namespace fjord;
using namespace fjord::rdma;

using fuzz::take;

namespace {

constexpr std::size_t kCapacity = 4096;

void put_word(std::byte* ring, uint64_t at, uint64_t word) { std::memcpy(ring + at % kCapacity, &word, 8); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MirroredMap map = MirroredMap::anonymous(kCapacity, "fuzz-rdma-ring").value();
  std::byte* const ring = map.data();
  std::memset(ring, 0, map.size());
  const std::byte* const end = ring + 2 * map.size();  // the mirror
  uint64_t at = 0;                                     // where the next record starts (a stream offset)
  uint64_t seq = 1;
  bool stopped = false;
  while (size > 0) {
    switch (take(data, size, 1) % 4) {
      case 0: {  // a word anywhere, as a torn or stray write leaves it
        const uint64_t where = take(data, size, 2) % (kCapacity / 8) * 8;
        put_word(ring, where, take(data, size, 8));
        break;
      }
      case 1: {  // a whole record, as the peer places it (maybe numbered wrong, maybe a lap on)
        const uint64_t length = (take(data, size, 2) % (kCapacity / 8) + 1) * 8;
        const uint64_t number = seq + take(data, size, 1) % 3;
        const uint64_t start = at + (take(data, size, 1) % 2) * kCapacity;
        const uint64_t header = length | uint64_t{static_cast<uint32_t>(number)} << 32;
        put_word(ring, start, header);
        // The frames come from the input (a copy through the mirror: contiguous).
        const std::size_t from_input = std::min<std::size_t>(length, size);
        if (length + wire::kRecordHeaderBytes <= kCapacity) {
          std::memset(ring + (start + 8) % kCapacity, 0, length);
          std::memcpy(ring + (start + 8) % kCapacity, data, from_input);
        }
        data += from_input;
        size -= from_input;
        put_word(ring, start + 8 + length, number ^ wire::kTrailerMagic);
        break;
      }
      default: {  // the transporter polls
        if (stopped) break;
        const auto record = wire::placed_record(ring, kCapacity, at, seq);
        if (!record) break;
        if (record->frames_at != at + wire::kRecordHeaderBytes || record->length == 0 || record->length % 8 != 0 ||
            record->length + wire::kRecordHeaderBytes + wire::kRecordTrailerBytes > kCapacity)
          std::abort();
        const std::byte* frames = ring + record->frames_at % kCapacity;
        if (frames < ring || frames + record->length > end) std::abort();
        const frame::ScanResult scan = frame::scan_frames({frames, record->length});
        if (scan.whole_bytes > record->length) std::abort();
        if (scan.error != frame::FrameError::kNone || scan.whole_bytes != record->length) {
          stopped = true;  // the link fails; the whole frames before the fault were delivered
          break;
        }
        const uint64_t next = record->frames_at + record->length + wire::kRecordTrailerBytes;
        if (next <= at) std::abort();
        at = next;
        ++seq;
      }
    }
  }
  return 0;
}
