// ChunkArena: chained fixed-size chunks (see chunk_arena.h).
#include "chunk_arena.h"

#include <algorithm>
#include <cstring>

#include "fjord/base/assert.h"

namespace fjord::engine::ldm {

ChunkArena::ChunkArena(std::size_t capacity_bytes)
    : memory_(std::max<std::size_t>(capacity_bytes / kChunkBytes, 1) * kChunkBytes) {
  const uint32_t chunks = chunk_count();
  for (uint32_t i = chunks; i > 0; --i) set_next(i - 1, i == chunks ? kNoChunk : i);
  free_head_ = 0;
  free_count_ = chunks;
}

uint32_t ChunkArena::next_of(uint32_t index) const {
  uint32_t next;
  std::memcpy(&next, chunk(index), sizeof next);
  return next;
}

void ChunkArena::set_next(uint32_t index, uint32_t next) { std::memcpy(chunk(index), &next, sizeof next); }

uint32_t ChunkArena::store(std::initializer_list<std::span<const std::byte>> parts) {
  std::size_t length = 0;
  for (std::span<const std::byte> part : parts) length += part.size();
  const uint32_t needed = chunks_for(length);
  if (needed > free_count_) return kNoChunk;
  // Take the first `needed` chunks of the free list as they are linked.
  const uint32_t first = free_head_;
  uint32_t last = first;
  for (uint32_t i = 1; i < needed; ++i) last = next_of(last);
  free_head_ = next_of(last);
  free_count_ -= needed;
  set_next(last, kNoChunk);
  uint32_t at_chunk = first;
  std::size_t at = 0;  // bytes used in at_chunk's payload
  for (std::span<const std::byte> part : parts) {
    while (!part.empty()) {
      if (at == kPayloadBytes) {
        at_chunk = next_of(at_chunk);
        at = 0;
      }
      const std::size_t n = std::min<std::size_t>(part.size(), kPayloadBytes - at);
      std::memcpy(chunk(at_chunk) + sizeof(uint32_t) + at, part.data(), n);
      part = part.subspan(n);
      at += n;
    }
  }
  return first;
}

void ChunkArena::load(uint32_t first, std::size_t length, std::span<std::byte> out) const {
  FJORD_ASSERT(out.size() >= length);
  std::size_t done = 0;
  for (uint32_t c = first; done < length; c = next_of(c)) {
    FJORD_ASSERT(c != kNoChunk);
    const std::size_t n = std::min<std::size_t>(length - done, kPayloadBytes);
    std::memcpy(out.data() + done, chunk(c) + sizeof(uint32_t), n);
    done += n;
  }
}

void ChunkArena::free(uint32_t first) {
  FJORD_ASSERT(first < chunk_count());
  uint32_t last = first;
  uint32_t count = 1;
  for (uint32_t next = next_of(last); next != kNoChunk; next = next_of(last)) {
    last = next;
    ++count;
  }
  set_next(last, free_head_);
  free_head_ = first;
  free_count_ += count;
  FJORD_ASSERT(free_count_ <= chunk_count());
}

}  // namespace fjord::engine::ldm
