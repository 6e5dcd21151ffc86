// ChunkArena: byte strings of any length in fixed 256-byte chunks of one
// buffer sized at start-up, freed in any order. The LDM keeps the bytes of
// requests waiting for a lock, and the filters of open scans, here: memory
// for them is bounded, and a full arena is an answer (refuse the request),
// never an allocation.
//
// A stored string is a chain of chunks, each starting with the index of the
// next; the caller keeps the first chunk's index and the string's length.
//
// Single-threaded (its LDM block). Hot path: store, load and free are
// proportional to the bytes moved; nothing allocates after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace fjord::engine::ldm {

inline constexpr uint32_t kNoChunk = UINT32_MAX;

class ChunkArena {
 public:
  static constexpr uint32_t kChunkBytes = 256;
  static constexpr uint32_t kPayloadBytes = kChunkBytes - sizeof(uint32_t);

  // Room for `capacity_bytes` (rounded down to whole chunks, at least one).
  explicit ChunkArena(std::size_t capacity_bytes);

  // Stores the concatenation of `parts`. Returns the first chunk, or
  // kNoChunk (and stores nothing) if the free chunks cannot hold it all.
  uint32_t store(std::initializer_list<std::span<const std::byte>> parts);
  // Copies the `length` bytes stored from `first` to the start of `out`.
  void load(uint32_t first, std::size_t length, std::span<std::byte> out) const;
  // Returns every chunk of the string starting at `first`.
  void free(uint32_t first);

  uint32_t chunk_count() const { return static_cast<uint32_t>(memory_.size() / kChunkBytes); }
  uint32_t free_chunks() const { return free_count_; }
  static uint32_t chunks_for(std::size_t length) {
    return length == 0 ? 1 : static_cast<uint32_t>((length + kPayloadBytes - 1) / kPayloadBytes);
  }

 private:
  std::byte* chunk(uint32_t index) { return memory_.data() + std::size_t{index} * kChunkBytes; }
  const std::byte* chunk(uint32_t index) const { return memory_.data() + std::size_t{index} * kChunkBytes; }
  uint32_t next_of(uint32_t index) const;
  void set_next(uint32_t index, uint32_t next);

  std::vector<std::byte> memory_;
  uint32_t free_head_ = kNoChunk;
  uint32_t free_count_ = 0;
};

}  // namespace fjord::engine::ldm
