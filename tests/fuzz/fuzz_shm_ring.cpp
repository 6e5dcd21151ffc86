// libFuzzer target: the SHM ring's consumer (fjord/shm/spsc_ring.h) over
// bytes a peer process wrote. The input is a script: each step either
// stores a word anywhere in the ring (as a peer may, envelopes and gaps
// included) or polls and reads. Whatever the words, every span the consumer
// hands out lies inside the ring's mapping, its read index only moves
// forward, and once it says corrupt it stays so and hands out nothing.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fjord/base/mirrored_map.h"
#include "fjord/shm/spsc_ring.h"
#include "script_input.h"

using namespace fjord;
using namespace fjord::shm;

using fuzz::take;

namespace {

constexpr std::size_t kCapacity = 8 * 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MirroredMap map = MirroredMap::anonymous(kCapacity, "fuzz-ring").value();
  static SpscRingIndices indices;
  std::memset(map.data(), 0, map.size());
  indices.read_index.store(0);
  SpscRingConsumer consumer(&indices, map.data(), map.size());
  const std::byte* const begin = map.data();
  const std::byte* const end = map.data() + 2 * map.size();  // the mirror
  uint64_t last_read = 0;
  uint8_t sum = 0;
  while (size > 0) {
    const auto op = static_cast<uint8_t>(take(data, size, 1));
    if (op % 4 != 0) {
      // A peer's store: a word at an 8-byte offset, often an envelope or a
      // gap of a plausible length and sequence number.
      const std::size_t at = (take(data, size, 2) * 8) % map.size();
      uint64_t word = take(data, size, 8);
      if (op % 4 == 1) word = make_envelope(static_cast<uint32_t>(word), static_cast<uint32_t>(word >> 32) % 4 + 1);
      if (op % 4 == 2)
        word = make_envelope(static_cast<uint32_t>(map.size() - at - kEnvelopeBytes + word % 3 - 1) | kGapBit,
                             static_cast<uint32_t>(word >> 32) % 4 + 1);
      std::memcpy(map.data() + at, &word, sizeof word);
      continue;
    }
    const bool was_corrupt = consumer.corrupt();
    const bool ok = consumer.refresh();
    if (ok == consumer.corrupt()) std::abort();
    if (was_corrupt && ok) std::abort();
    const std::span<const std::byte> readable = consumer.readable();
    if (!ok) {
      if (!readable.empty()) std::abort();
      continue;
    }
    if (readable.data() < begin || readable.data() + readable.size() > end) std::abort();
    for (std::byte b : readable) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(b));
    if (!readable.empty()) consumer.release(1 + take(data, size, 2) % readable.size());
    const uint64_t read = indices.read_index.load();
    if (read < last_read) std::abort();
    last_read = read;
  }
  asm volatile("" : : "r"(sum));  // keeps the reads
  return 0;
}
