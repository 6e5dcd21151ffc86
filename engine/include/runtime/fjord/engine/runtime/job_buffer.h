// JobBuffer: a lock-free single-producer/single-consumer queue of entries
// between two threads of one data node (NDB's job buffer, one per (producer
// thread, consumer thread) pair, plus each thread's local queue to itself).
//
// An entry is an 8-byte Envelope followed by one frame (see frame.h), so a
// frame received from a transporter is copied in unchanged. The memory is a
// MirroredMap allocated at start-up, so an entry never wraps and nothing is
// allocated afterwards.
//
// The envelope is the entry's ready mark (as in the SHM ring, docs/shm.md):
// the consumer polls the envelope at its read position, which is zero until
// the producer publishes the entry there. Finding work and reading it is
// then one cache-line transfer, not two dependent ones (a shared write index,
// then the entry it covers). The invariant that makes a zero mean "not yet":
// the envelope at the producer's write position is always zero. It starts
// zero (fresh pages) and every commit zeroes the envelope after its entry
// before publishing its own.
//
// Going back to the start (the hot window, fjord/base/hot_window.h): while
// the consumer keeps up, the producer keeps to the ring's first
// kHotWindowBytes. Once it is that far into a lap with at most a quarter of
// the window unread, it publishes a gap entry (flag kGapEntry) that covers
// the rest of the lap and goes on at the ring's start. The consumer steps
// over gaps (entry_at), so they are never seen as signals. The bytes of a
// gap not yet stepped over are left out of free_bytes()/used_bytes(), which
// congestion and the statistics read.
//
// Threads: reserve/commit by the producer only; entry_at/consume/has_data by
// the consumer only; capacity()/used_bytes() by anyone.
// Hot path: everything here.
//
// Memory orders (positions are monotonically increasing byte counts):
//   P1  producer: store-release the envelope word, after writing the frame
//       and zeroing the next envelope (relaxed).
//   C1  consumer: load-acquire the envelope word -- pairs with P1: a non-zero
//       mark means the frame bytes, and the zero after them, are visible.
//   C2  consumer: store-release read_ (after it stopped reading the bytes).
//   P2  producer: load-acquire read_ -- pairs with C2: the producer does not
//       overwrite bytes the consumer may still be reading.
// The producer caches read_ (as write_limit_, the position it may write up
// to) and reloads it (P2) only when its cached view says full, so the
// consumer's line moves only then. write_ is the producer's own position,
// published relaxed for statistics only.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/base/cache.h"
#include "fjord/base/hot_window.h"
#include "fjord/base/mirrored_map.h"
#include "fjord/base/status.h"
#include "fjord/base/tuning.h"
#include "fjord/engine/signal.h"
#include "fjord/transport/types.h"

namespace fjord::engine {

// Precedes every frame in a job buffer. Read and written as one 64-bit word.
// The sender is the runtime's word, never the frame's: the node id and kind
// of the link a frame came over, or this node for its own signals.
struct Envelope {
  uint32_t entry_bytes = 0;      // envelope + frame; never 0 once published
  NodeId sender_node = kNoNode;  // where the signal came from (self for local signals)
  SenderKind sender_kind = SenderKind::kOwnNode;
  uint8_t flags = 0;
};
static_assert(sizeof(Envelope) == 8);
// Envelope::flags: the entry is no signal, only bytes to step over (the rest
// of a lap the producer left to go back to the ring's start).
inline constexpr uint8_t kGapEntry = 1;

class JobBuffer {
 public:
  JobBuffer() = default;
  // capacity_bytes is rounded up to whole pages. numa_node >= 0 places the
  // memory on that NUMA node (the consumer's), before it is first touched.
  static Result<JobBuffer> create(std::size_t capacity_bytes, int numa_node = -1);

  JobBuffer(JobBuffer&&) noexcept;
  JobBuffer& operator=(JobBuffer&&) noexcept;

  // Bytes an entry for a frame of frame_bytes takes.
  static constexpr std::size_t entry_bytes(std::size_t frame_bytes) { return sizeof(Envelope) + frame_bytes; }

  // ---- producer ----
  // Room for a frame of `frame_bytes` (a multiple of 8): a span of at least
  // that many bytes where the frame goes, or empty if the entry does not fit.
  std::span<std::byte> reserve(std::size_t frame_bytes) noexcept {
    FJORD_ASSERT_MSG(frame_bytes % 8 == 0, "entries keep their envelopes 8-byte aligned");
    // The entry and the zeroed envelope after it must fit.
    const uint64_t need = entry_bytes(frame_bytes) + sizeof(Envelope);
    uint64_t w = write_.load(std::memory_order_relaxed);
    if (hot_.due(w)) [[unlikely]]
      w = maybe_rewind(w);
    if (w + need > write_limit_) {
      write_limit_ = read_.load(std::memory_order_acquire) + capacity_;  // P2
      if (w + need > write_limit_) return {};
    }
    return {base_ + (w & mask_) + sizeof(Envelope), static_cast<std::size_t>(write_limit_ - w - 2 * sizeof(Envelope))};
  }
  // Publishes the frame of `frame_bytes` written into the last reservation
  // (a reserve() of at least frame_bytes, nothing reserved or committed
  // since), from `sender_node` of `sender_kind`.
  void commit(std::size_t frame_bytes, NodeId sender_node, SenderKind sender_kind) noexcept {
    FJORD_ASSERT_MSG(frame_bytes % 8 == 0, "entries keep their envelopes 8-byte aligned");
    const uint64_t w = write_.load(std::memory_order_relaxed);
    const uint64_t next = w + entry_bytes(frame_bytes);
    // Within the reservation: the entry and the envelope zeroed after it lie
    // in space the consumer released.
    FJORD_ASSERT_MSG(next + sizeof(Envelope) <= write_limit_, "commit beyond the reservation");
    std::byte* const entry = base_ + (w & mask_);
    // The next envelope, through the mirror when the entry ends past the ring.
    word_at(entry + entry_bytes(frame_bytes)).store(0, std::memory_order_relaxed);
    const Envelope e{static_cast<uint32_t>(entry_bytes(frame_bytes)), sender_node, sender_kind, 0};
    word_at(entry).store(std::bit_cast<uint64_t>(e), std::memory_order_release);  // P1
    write_.store(next, std::memory_order_relaxed);
  }
  // Free bytes as the producer last saw them (may be stale-low, never high),
  // not counting a gap the consumer has yet to step over.
  std::size_t free_bytes_hint() const noexcept {
    const uint64_t read = write_limit_ - capacity_;
    const uint64_t used = write_.load(std::memory_order_relaxed) - read;
    return static_cast<std::size_t>(capacity_ - (used - pending_gap_bytes(read)));
  }
  std::size_t free_bytes() noexcept {
    write_limit_ = read_.load(std::memory_order_acquire) + capacity_;  // P2
    return free_bytes_hint();
  }

  // ---- consumer ----
  // The entry that starts `offset` bytes past the read position (an offset
  // reached by walking entry sizes from there), or empty if it is not
  // published yet. A gap there is stepped over: `offset` then moves past it
  // (and an empty answer may still leave bytes to consume()).
  std::span<const std::byte> entry_at(std::size_t& offset) noexcept {
    const uint64_t read = read_.load(std::memory_order_relaxed);
    uint64_t word = word_at(read + offset).load(std::memory_order_acquire);  // C1
    if (word == 0) return {};
    Envelope e = std::bit_cast<Envelope>(word);
    if (e.flags & kGapEntry) [[unlikely]] {
      offset += e.entry_bytes;
      word = word_at(read + offset).load(std::memory_order_acquire);  // C1 (never two gaps in a row)
      if (word == 0) return {};
      e = std::bit_cast<Envelope>(word);
    }
    return {base_ + ((read + offset) & mask_), e.entry_bytes};
  }
  // True if entry_at(0) would return an entry (a hint: no ordering).
  bool has_data() noexcept {
    return word_at(read_.load(std::memory_order_relaxed)).load(std::memory_order_relaxed) != 0;
  }
  // Gives back the bytes of whole entries the consumer is done with (an
  // offset past the last one, as entry_at walks).
  void consume(std::size_t bytes) noexcept {
    FJORD_ASSERT_MSG(bytes % 8 == 0, "whole entries only");
    read_.store(read_.load(std::memory_order_relaxed) + bytes, std::memory_order_release);  // C2
  }

  // ---- anyone ----
  std::size_t capacity() const noexcept { return static_cast<std::size_t>(capacity_); }
  // Bytes in the queue now, a gap not yet stepped over left out (racy
  // snapshot, exact when both sides are idle).
  std::size_t used_bytes() const noexcept {
    const uint64_t read = read_.load(std::memory_order_relaxed);
    const uint64_t used = write_.load(std::memory_order_relaxed) - read;
    return static_cast<std::size_t>(std::min(used - std::min(used, pending_gap_bytes(read)), capacity_));
  }
  // Where the producer goes back to the ring's start (bytes into a lap):
  // the window, or the capacity for a buffer that never goes back early.
  std::size_t hot_window_bytes() const noexcept {
    return static_cast<std::size_t>(hot_.bytes() != 0 ? hot_.bytes() : capacity_);
  }

  // The window a producer keeps to while its consumer keeps up.
  static constexpr std::size_t kHotWindowBytes = tuning::kJobBufferHotWindowBytes;

 private:
  // At `w`, where hot_ is due: goes back to the ring's start if the consumer
  // keeps up (returns the new write position), else hot_ sets when to look
  // again. Rare: once per quarter window of bytes at most.
  uint64_t maybe_rewind(uint64_t w) noexcept;
  // The last gap's bytes if a consumer at `read` has not stepped over it.
  uint64_t pending_gap_bytes(uint64_t read) const noexcept {
    return read < gap_end_.load(std::memory_order_relaxed) ? gap_bytes_.load(std::memory_order_relaxed) : 0;
  }

  std::atomic_ref<uint64_t> word_at(uint64_t position) const noexcept { return word_at(base_ + (position & mask_)); }
  static std::atomic_ref<uint64_t> word_at(std::byte* at) noexcept {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(at));
  }

  MirroredMap memory_;
  std::byte* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
  alignas(kCacheLineBytes) std::atomic<uint64_t> write_{0};  // the producer's line
  uint64_t write_limit_ = 0;  // read_ as the producer last loaded it (P2), plus capacity_
  HotWindow hot_;             // maybe_rewind() when write_ gets to hot_.due()
  // The last gap: the position after it, and its size. Written by the
  // producer; relaxed, as used_bytes() reads them from other threads.
  std::atomic<uint64_t> gap_end_{0};
  std::atomic<uint64_t> gap_bytes_{0};
  alignas(kCacheLineBytes) std::atomic<uint64_t> read_{0};  // the consumer's line
};

}  // namespace fjord::engine
