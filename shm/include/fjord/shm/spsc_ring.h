// A single-producer/single-consumer ring of byte batches in shared memory.
//
// What it is for: moving a byte stream from one process (or thread) to
// another with no copy and no system call, at the latency of a cache-line
// mailbox. The ring's bytes live in a region mapped twice back to back
// (fjord::MirroredMap), so every batch is one contiguous span, even across
// the end of the ring.
//
// The stream is a sequence of batches. Each batch starts on a cache line
// with an 8-byte envelope; the committed bytes follow; padding fills the
// batch to the next cache line, where the next envelope goes:
//
//   line-aligned                                           line-aligned
//   | envelope: u32 bytes, u32 sequence | bytes ... | pad | envelope (0 until published) ...
//
// The envelope is the batch's ready mark: the producer writes it last, with
// one store-release, and the consumer polls it. Before that store the
// producer zeroes the next batch's envelope slot, so whatever a previous lap
// left there (frame bytes, an old envelope) reads "not ready" until the next
// batch is really published. The consumer therefore reads only the line it
// is about to need; there is no write index at all. A small batch and its
// envelope share their first line, so a message of up to 56 bytes moves one
// cache line, exactly as a mailbox does.
//
// After publishing, the producer also zeroes the first word of the lines
// the next batches will use (kZeroAheadBytes, free space only). That is not
// needed for correctness (the next envelope slot is zeroed on every
// publish); it makes those lines the producer's own before they are on the
// latency path, so a published batch costs the consumer one line transfer
// for its envelope line and the rest stream behind it.
//
// The consumer, on finding a batch, prefetches its further lines (up to
// kPrefetchBatchBytes) before it reads any of them, so they cross from the
// producer's cache together rather than one dependent miss after another.
//
// Going back to the start (the hot window, fjord/base/hot_window.h, as the
// job buffers do): once the producer is kHotWindowBytes into a lap with at
// most a quarter of that unread, it publishes a gap (an envelope whose
// length has kGapBit, running exactly to the lap's end, its next slot zeroed
// first as Z1 does for a batch) and goes on at the ring's start. The consumer
// steps over a gap and releases it at once; a gap of any other length is
// corrupt. used_bytes() leaves out a gap not yet stepped over, so the
// pressure levels do not see one.
//
// The consumer's read index (shared, on its own line) returns space to the
// producer. The producer caches it and re-reads it only when its cached view
// says the ring is too full, so in steady state it never touches that line.
//
// Offsets are free-running 64-bit byte counters (2^64 bytes at 100 GB/s is
// 5 years); a position in the ring is the counter modulo the capacity,
// tracked incrementally (no division). The capacity is a multiple of the
// cache line and at most 2^31 bytes (the envelope's length is 32 bits).
//
// Memory orders (DPDK style: each pair names both ends):
//   Z1 (producer zeroes the next envelope slot, relaxed store) is ordered
//      before P1 by P1's release: a consumer that sees this batch ready also
//      sees the next slot empty, never a previous lap's bytes.
//   P1 (producer publishes a batch: store-release of its envelope) pairs with
//      C1 (consumer polls the envelope: load-acquire): the batch's bytes, and
//      Z1, are visible to the consumer once C1 reads the envelope.
//   C2 (consumer releases bytes: store-release of read_index) pairs with P2
//      (producer re-reads read_index: load-acquire): the consumer's reads of
//      released bytes happen before the producer, after P2, overwrites them.
// A sleeping consumer needs a seq_cst fence after P1 on the producer side
// (fjord/shm/wakeup.h); P1/C1 is the pair the sleep protocol re-checks.
//
// Threads: one producer thread and one consumer thread at a time (they may
// be in different processes). Every method is on the hot path: no system
// call, no allocation, no lock.
//
// The other side is trusted to follow the protocol but not to be correct:
// an envelope with the wrong sequence or an impossible length, or a read
// index that moves backwards or past the published bytes, latches corrupt()
// (the caller takes the link down); nothing here reads or writes outside the
// mapping whatever the shared memory holds.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/assert.h"
#include "fjord/base/cache.h"
#include "fjord/base/hot_window.h"
#include "fjord/base/tuning.h"

namespace fjord::shm {

inline constexpr std::size_t kEnvelopeBytes = 8;
inline constexpr std::size_t kBatchAlignBytes = kCacheLineBytes;
// The ring's knobs (why each has its value: fjord/base/tuning.h).
// Bytes past the next envelope whose lines the producer takes ahead of use.
inline constexpr std::size_t kZeroAheadBytes = tuning::kShmZeroAheadBytes;
// Lines of a newly seen batch the consumer asks for at once.
inline constexpr std::size_t kPrefetchBatchBytes = tuning::kShmPrefetchBatchBytes;
// The hot window: while the consumer keeps up, the producer goes back to the
// ring's start once it is this far into a lap (see "Going back to the start").
inline constexpr std::size_t kHotWindowBytes = tuning::kShmHotWindowBytes;
// An envelope's length with this bit set is a gap: no frames, only the rest
// of the lap to step over (a length never reaches it: rings are <= 2^31 bytes
// and a batch leaves at least a line free).
inline constexpr uint32_t kGapBit = 1u << 31;
static_assert(kEnvelopeBytes <= kBatchAlignBytes);
static_assert(kZeroAheadBytes % kBatchAlignBytes == 0);

// The envelope word: the batch's length in the low half, its sequence number
// (1, 2, ... modulo 2^32) in the high half. Never 0 for a published batch,
// as the length is at least 1.
constexpr uint64_t make_envelope(uint32_t bytes, uint32_t sequence) noexcept {
  return static_cast<uint64_t>(sequence) << 32 | bytes;
}
constexpr uint32_t envelope_bytes(uint64_t envelope) noexcept { return static_cast<uint32_t>(envelope); }
constexpr uint32_t envelope_sequence(uint64_t envelope) noexcept { return static_cast<uint32_t>(envelope >> 32); }

constexpr uint64_t align_to_batch(uint64_t offset) noexcept {
  return (offset + kBatchAlignBytes - 1) & ~uint64_t{kBatchAlignBytes - 1};
}

// The shared part of one ring besides its bytes. Place it in shared memory,
// zero-initialised (or constructed), with the ring's bytes zeroed, before
// either side attaches.
struct SpscRingIndices {
  // Written by the consumer only (C2); read by the producer (P2).
  alignas(kCacheLineBytes) std::atomic<uint64_t> read_index{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "indices must be lock-free to work across processes");
static_assert(sizeof(SpscRingIndices) == kCacheLineBytes, "one cache line");

namespace detail {
// A ring's capacity: at least two batch lines, whole lines, and at most 2^31
// bytes (the envelope's length is 32 bits, its top bit marks a gap).
inline void assert_valid_capacity(std::size_t capacity) noexcept {
  FJORD_ASSERT(capacity >= 2 * kBatchAlignBytes);
  FJORD_ASSERT(capacity % kBatchAlignBytes == 0);
  FJORD_ASSERT(capacity <= (1ULL << 31));
}
inline std::atomic<uint64_t>& envelope_at(std::byte* p) noexcept {
  FJORD_ASSERT(reinterpret_cast<uintptr_t>(p) % alignof(std::atomic<uint64_t>) == 0);
  return *reinterpret_cast<std::atomic<uint64_t>*>(p);
}
inline const std::atomic<uint64_t>& envelope_at(const std::byte* p) noexcept {
  FJORD_ASSERT(reinterpret_cast<uintptr_t>(p) % alignof(std::atomic<uint64_t>) == 0);
  return *reinterpret_cast<const std::atomic<uint64_t>*>(p);
}
}  // namespace detail

// The writing side. Not copyable (two producers would corrupt the ring).
class SpscRingProducer {
 public:
  SpscRingProducer() = default;
  // `data` is the start of a mirrored mapping of 2 * capacity bytes whose
  // halves are the same memory, line-aligned; the ring must be empty.
  SpscRingProducer(SpscRingIndices* indices, std::byte* data, std::size_t capacity) noexcept
      : indices_(indices), data_(data), capacity_(capacity), hot_(capacity, kHotWindowBytes) {
    FJORD_ASSERT(indices != nullptr);
    FJORD_ASSERT(data != nullptr);
    detail::assert_valid_capacity(capacity);
    FJORD_ASSERT(reinterpret_cast<uintptr_t>(data) % kBatchAlignBytes == 0);
    corrupt_ = indices->read_index.load(std::memory_order_acquire) != 0;  // P2: the ring starts empty
  }
  SpscRingProducer(const SpscRingProducer&) = delete;
  SpscRingProducer& operator=(const SpscRingProducer&) = delete;
  SpscRingProducer(SpscRingProducer&&) noexcept = default;
  SpscRingProducer& operator=(SpscRingProducer&&) noexcept = default;

  // Returns all the space the open batch may still grow by (at least
  // min_bytes) as one writable span, or an empty span when less is free even
  // after re-reading the consumer's index (or the index is corrupt). The span
  // stays valid until the next reserve() or commit(); bytes written past what
  // is committed are never shown to the consumer.
  std::span<std::byte> reserve(std::size_t min_bytes) noexcept {
    FJORD_ASSERT(min_bytes > 0);
    if (corrupt_) return {};
    std::size_t free_bytes = growable_bytes();
    if (free_bytes < min_bytes) {
      if (!refresh()) return {};
      free_bytes = growable_bytes();
      if (free_bytes < min_bytes) return {};
    }
    reserved_ = free_bytes;
    return {data_ + open_position_ + kEnvelopeBytes + batch_bytes_, free_bytes};
  }

  // Appends the first `bytes` of the last reservation to the open batch. The
  // consumer sees them after the next publish().
  void commit(std::size_t bytes) noexcept {
    FJORD_ASSERT_MSG(bytes <= reserved_, "commit beyond the reservation");
    batch_bytes_ += bytes;
    reserved_ = 0;
  }

  // Closes the open batch and makes it visible to the consumer. Returns its
  // length in bytes (0: nothing committed since the last publish, no store).
  std::size_t publish() noexcept {
    if (batch_bytes_ == 0) return 0;
    const std::size_t bytes = batch_bytes_;
    const uint64_t next = align_to_batch(open_ + kEnvelopeBytes + bytes);
    std::byte* const open = data_ + open_position_;
    std::byte* const next_envelope = open + (next - open_);
    // Z1: the caller may have written anything into its reservation beyond
    // the commit, and earlier laps left bytes here: "not ready" it must be.
    detail::envelope_at(next_envelope).store(0, std::memory_order_relaxed);
    // P1: store-release; pairs with C1. The batch's bytes and Z1 are visible
    // to a consumer that loads this envelope with acquire.
    detail::envelope_at(open).store(make_envelope(static_cast<uint32_t>(bytes), ++sequence_),
                                    std::memory_order_release);
    zero_ahead(next, next_envelope);
    open_position_ += next - open_;
    if (open_position_ >= capacity_) open_position_ -= capacity_;
    open_ = next;
    batch_bytes_ = 0;
    if (hot_.due(open_)) [[unlikely]]
      maybe_rewind();
    return bytes;
  }

  // Re-reads the consumer's index. Returns false (and latches corrupt()) if
  // it moved backwards or past the published batches.
  bool refresh() noexcept {
    // P2: load-acquire; pairs with C2. After it, the consumer's reads of the
    // bytes below `read` are finished, so they may be handed out again.
    const uint64_t read = indices_->read_index.load(std::memory_order_acquire);
    if (read - cached_read_ > open_ - cached_read_) {
      corrupt_ = true;
      return false;
    }
    cached_read_ = read;
    return true;
  }

  // Stream bytes the consumer had not released at the last refresh (an upper
  // bound: it may have released more since), envelopes and padding included.
  // A gap the consumer had not stepped over is left out: it is space the
  // consumer frees as soon as it polls, not a backlog.
  std::size_t used_bytes() const noexcept {
    const uint64_t end = batch_bytes_ == 0 ? open_ : open_ + kEnvelopeBytes + batch_bytes_;
    const uint64_t gap = cached_read_ < gap_end_ ? gap_bytes_ : 0;
    return static_cast<std::size_t>(end - cached_read_ - gap);
  }
  std::size_t unpublished_bytes() const noexcept { return batch_bytes_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // Stream offset of the open batch's envelope (everything before it is published).
  uint64_t published_index() const noexcept { return open_; }
  uint32_t published_batches() const noexcept { return sequence_; }  // gaps included
  // The consumer's index was found corrupt; the ring must not be used.
  bool corrupt() const noexcept { return corrupt_; }

 private:
  // The open batch may end at most where the envelope after it still fits in
  // space the consumer released: align_to_batch(end) + 8 <= read + capacity.
  std::size_t growable_bytes() const noexcept {
    const uint64_t last_envelope = (cached_read_ + capacity_ - kEnvelopeBytes) & ~uint64_t{kBatchAlignBytes - 1};
    const uint64_t end = open_ + kEnvelopeBytes + batch_bytes_;
    return last_envelope > end ? static_cast<std::size_t>(last_envelope - end) : 0;
  }

  // Where hot_ is due, with no batch open: if the producer is past the window
  // and the consumer has at most a quarter of it left to read, publishes a
  // gap over the rest of the lap and goes on at the ring's start; else hot_
  // sets when to look again.
  void maybe_rewind() noexcept {
    const bool back = hot_.go_back_now(open_, open_position_, [this]() -> uint64_t {
      // The consumer's line is read (P2) only when the cached view says behind.
      if (open_ - cached_read_ <= hot_.max_unread_bytes()) return open_ - cached_read_;
      return refresh() ? open_ - cached_read_ : UINT64_MAX;
    });
    if (!back) return;
    const std::size_t rest = capacity_ - open_position_;  // the gap: envelope and the rest of the lap
    const uint64_t lap_end = open_ + rest;
    // The next envelope goes at the lap's end, in space the consumer released
    // (it read past the window's first quarter of this lap).
    FJORD_ASSERT(lap_end + kEnvelopeBytes <= cached_read_ + capacity_);
    // Z1 for the slot at the ring's start, then P1 for the gap (as publish()).
    detail::envelope_at(data_).store(0, std::memory_order_relaxed);
    detail::envelope_at(data_ + open_position_)
        .store(make_envelope(static_cast<uint32_t>(rest - kEnvelopeBytes) | kGapBit, ++sequence_),
               std::memory_order_release);
    gap_end_ = lap_end;
    gap_bytes_ = rest;
    open_ = lap_end;
    open_position_ = 0;
    zero_ahead(open_, data_);
    hot_.went_back(open_);
  }

  // Takes the lines after `next` (free space only) before they are needed:
  // one relaxed store of 0 each, to the word a later envelope may occupy.
  // Ordered after P1, so it never delays this batch.
  void zero_ahead(uint64_t next, std::byte* next_envelope) noexcept {
    const uint64_t limit = std::min(next + kBatchAlignBytes + kZeroAheadBytes,
                                    cached_read_ + capacity_ - kEnvelopeBytes + 1);  // envelope + 8 <= read + capacity
    uint64_t line = std::max(zeroed_, next + kBatchAlignBytes);
    for (; line < limit; line += kBatchAlignBytes)
      detail::envelope_at(next_envelope + (line - next)).store(0, std::memory_order_relaxed);
    zeroed_ = std::max(zeroed_, line);
  }

  SpscRingIndices* indices_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  uint64_t open_ = 0;              // stream offset of the open batch's envelope slot
  std::size_t open_position_ = 0;  // open_ % capacity_
  std::size_t batch_bytes_ = 0;    // bytes committed to the open batch
  uint64_t cached_read_ = 0;       // the consumer's index as last read (P2)
  uint64_t zeroed_ = 0;            // lines below this offset were taken ahead
  std::size_t reserved_ = 0;       // size of the outstanding reservation
  HotWindow hot_;                  // maybe_rewind() once open_ gets to hot_.due()
  uint64_t gap_end_ = 0;           // the last gap: the offset after it ...
  uint64_t gap_bytes_ = 0;         // ... and its length, envelope included
  uint32_t sequence_ = 0;          // of the last published batch
  bool corrupt_ = false;
};

// The reading side. Not copyable (two consumers would corrupt the ring).
class SpscRingConsumer {
 public:
  SpscRingConsumer() = default;
  SpscRingConsumer(SpscRingIndices* indices, const std::byte* data, std::size_t capacity) noexcept
      : indices_(indices), data_(data), capacity_(capacity) {
    FJORD_ASSERT(indices != nullptr);
    FJORD_ASSERT(data != nullptr);
    detail::assert_valid_capacity(capacity);
    FJORD_ASSERT(reinterpret_cast<uintptr_t>(data) % kBatchAlignBytes == 0);
  }
  SpscRingConsumer(const SpscRingConsumer&) = delete;
  SpscRingConsumer& operator=(const SpscRingConsumer&) = delete;
  SpscRingConsumer(SpscRingConsumer&&) noexcept = default;
  SpscRingConsumer& operator=(SpscRingConsumer&&) noexcept = default;

  // The unreleased bytes of the batch in hand (empty if none), as one
  // contiguous span. Reads only private state.
  std::span<const std::byte> readable() const noexcept {
    return {data_ + batch_position_ + kEnvelopeBytes + released_, batch_bytes_ - released_};
  }

  // With no batch in hand, polls the next envelope and takes the batch if it
  // is published. Returns false (and latches corrupt()) if the envelope is
  // malformed: wrong sequence, or a length the ring cannot hold.
  bool refresh() noexcept {
    if (batch_bytes_ != 0 || corrupt_) return !corrupt_;
    // C1: load-acquire; pairs with P1. The batch's bytes, and the zeroed
    // envelope slot after it, are visible once this load sees the envelope.
    uint64_t envelope = detail::envelope_at(data_ + batch_position_).load(std::memory_order_acquire);
    if (envelope == 0) return true;
    if (envelope_bytes(envelope) & kGapBit) [[unlikely]] {
      // A gap ends exactly at the lap's end: step over it to the ring's start.
      if (envelope_sequence(envelope) != sequence_ + 1 ||
          (envelope_bytes(envelope) & ~kGapBit) + kEnvelopeBytes != capacity_ - batch_position_) {
        corrupt_ = true;
        return false;
      }
      batch_ += capacity_ - batch_position_;
      batch_position_ = 0;
      ++sequence_;
      // C2 as in release(): the gap's bytes are free again.
      indices_->read_index.store(batch_, std::memory_order_release);
      envelope = detail::envelope_at(data_).load(std::memory_order_acquire);  // C1
      if (envelope == 0) return true;
    }
    const uint32_t bytes = envelope_bytes(envelope);
    // The producer may end a batch where the next envelope still fits in the
    // space we had released (all of the ring but the line we poll). A gap
    // here, at the ring's start, is refused: as long as a lap, it would be
    // the gap just stepped over, whose sequence number is not the next.
    if (envelope_sequence(envelope) != sequence_ + 1 || bytes == 0 ||
        bytes > capacity_ - kBatchAlignBytes - kEnvelopeBytes) {
      corrupt_ = true;
      return false;
    }
    batch_bytes_ = bytes;
    // Ask for the batch's further lines now, all at once: read in order they
    // would cross from the producer's cache one after another.
    const std::byte* const first = data_ + batch_position_;
    const std::size_t end = std::min<std::size_t>(kEnvelopeBytes + bytes, kPrefetchBatchBytes);
    for (std::size_t line = kBatchAlignBytes; line < end; line += kBatchAlignBytes) __builtin_prefetch(first + line);
    return true;
  }

  // Gives the first `bytes` of readable() back to the producer; the batch is
  // finished when all of it is released.
  void release(std::size_t bytes) noexcept {
    FJORD_ASSERT_MSG(bytes <= batch_bytes_ - released_, "release beyond the readable bytes");
    if (bytes == 0) return;
    released_ += bytes;
    uint64_t read = batch_ + kEnvelopeBytes + released_;
    if (released_ == batch_bytes_) {
      read = align_to_batch(read);
      batch_position_ += read - batch_;
      if (batch_position_ >= capacity_) batch_position_ -= capacity_;
      batch_ = read;
      batch_bytes_ = released_ = 0;
      ++sequence_;
    }
    // C2: store-release; pairs with P2. Our reads of the released bytes are
    // complete before the producer can see the space as free.
    indices_->read_index.store(read, std::memory_order_release);
  }

  std::size_t capacity() const noexcept { return capacity_; }
  // Stream offset of the first unreleased byte.
  uint64_t read_index() const noexcept { return batch_ + (batch_bytes_ == 0 ? 0 : kEnvelopeBytes + released_); }
  bool corrupt() const noexcept { return corrupt_; }

 private:
  SpscRingIndices* indices_ = nullptr;
  const std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  uint64_t batch_ = 0;              // stream offset of the envelope of the batch in hand, or of the next one
  std::size_t batch_position_ = 0;  // batch_ % capacity_
  std::size_t batch_bytes_ = 0;     // length of the batch in hand; 0 = none
  std::size_t released_ = 0;        // of the batch in hand
  uint32_t sequence_ = 0;           // of the last batch finished
  bool corrupt_ = false;
};

}  // namespace fjord::shm
