// HashIndex: one partition's primary-key index, encoded key -> RowId.
//
// Linear hashing (Litwin), as NDB's DBACC: the table grows one bucket at a
// time, splitting the bucket at the split pointer whenever the average load
// passes kSplitLoad entries per bucket, so an insert never rehashes more than
// one bucket (no pauses). Buckets are one cache line: 7 entries of
// (low 32 bits of the hash, RowId), plus a link to 64-byte overflow blocks.
// Keys are not stored: a lookup compares the stored hash bits first, then the
// row's key through the KeySource (key_equals, in place in the row; see
// key_source.h), so an entry costs
// 8 bytes however long the key is. About 13-15 bytes per row in all at the
// load factor used.
//
// Buckets live in pool pages of 512 (found through a PageDirectory), overflow
// blocks in a BlockArena: DataMemory bounds the index with the rows. The
// bucket array does not shrink when rows are erased; overflow blocks are
// returned as chains empty.
//
// Thread: the LDM thread that owns the partition. Hot path: find, insert,
// erase; nothing allocates from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fjord/base/status.h"
#include "fjord/engine/storage/block_arena.h"
#include "fjord/engine/storage/key_source.h"
#include "fjord/engine/storage/page_directory.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::storage {

class HashIndex {
 public:
  static constexpr uint32_t kEntriesPerBucket = 7;
  // Average entries per bucket above which the next bucket is split.
  static constexpr uint32_t kSplitLoad = 5;

  // `keys` gives the key of an indexed row; it must outlive the index.
  HashIndex(PagePool& pool, const KeySource& keys);
  HashIndex(const HashIndex&) = delete;
  HashIndex& operator=(const HashIndex&) = delete;

  // The row whose key is `key`, or kNoRow. `hash` is hash_key(key).
  RowId find(uint64_t hash, std::span<const std::byte> key) const;
  // Adds key -> row. kAlreadyExists if the key is present; the pool's error
  // if an overflow block or bucket page is needed and DataMemory is full
  // (nothing changes then).
  Status insert(uint64_t hash, std::span<const std::byte> key, RowId row);
  // Removes the entry for `row` (found by hash and RowId; no key compare).
  // kNotFound if there is none.
  Status erase(uint64_t hash, RowId row);

  // Hints for a find() coming soon, so a batch of lookups overlaps its
  // cache misses instead of taking them one after another; neither changes
  // anything. prefetch_bucket starts loading the bucket `hash` addresses;
  // candidates, called once that load had time to land, writes the rows of
  // that bucket (not its overflow blocks) whose stored hash bits match, at
  // most `max`, and returns how many: their rows are what find() compares.
  // prefetch_bucket returns the bucket it loads (null for an empty index),
  // which candidates may be given back instead of finding it again, while
  // the index has not changed since (no insert, erase or split).
  // `more`, when given, is set to the block after the one looked at when
  // that block is full, chains on, and listed no candidate (the key, if
  // present, is further down the chain), else to null; that block is
  // prefetched, and candidates given it back as `bucket` later looks there.
  const void* prefetch_bucket(uint32_t hash) const {
    if (segments_.end() == 0) return nullptr;
    const Bucket* b = bucket(address(hash));
    __builtin_prefetch(b);
    return b;
  }
  uint32_t candidates(uint32_t hash, RowId* out, uint32_t max, const void* bucket = nullptr,
                      const void** more = nullptr) const;

  uint64_t entry_count() const { return entries_; }
  uint32_t bucket_count() const { return (1u << level_) + split_; }
  uint64_t overflow_blocks() const { return overflow_.blocks_in_use(); }
  // Pool memory held: bucket pages, overflow pages and their directories.
  uint64_t memory_bytes() const { return segments_.memory_bytes() + overflow_.memory_bytes(); }

  // For tests: every entry sits in the bucket its hash addresses, every chain
  // is packed (only its last block has room, and is not empty unless it is
  // the bucket itself), counts add up. The message says what is wrong.
  Status check_invariants() const;

 private:
  struct Entry {
    uint32_t hash;  // low 32 bits of hash_key: addresses the bucket, filters compares
    RowId row;
  };
  struct alignas(64) Bucket {
    BlockId next;    // overflow block, or kNoBlock
    uint32_t count;  // entries used in this block
    Entry entries[kEntriesPerBucket];
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  static constexpr uint32_t kBucketsPerSegment = PagePool::kPageBytes / sizeof(Bucket);

  // Defined here, with prefetch_bucket: a key read's path inlines them.
  uint32_t address(uint32_t hash) const {
    const uint32_t low = hash & static_cast<uint32_t>((uint64_t{1} << level_) - 1);
    if (low >= split_) return low;
    return hash & static_cast<uint32_t>((uint64_t{2} << level_) - 1);  // already split: one more bit
  }
  Bucket* bucket(uint32_t index) const {
    return reinterpret_cast<Bucket*>(segments_.address(index / kBucketsPerSegment)) + index % kBucketsPerSegment;
  }
  Bucket* block(BlockId id) const { return reinterpret_cast<Bucket*>(overflow_.address(id)); }
  // The entries of `b` in use whose stored hash bits are `hash`: bit 2 + 2i
  // for entry i (the bucket's 32-bit word that holds its hash; its row is
  // the word after). With SSE2 (every x86-64) the line's sixteen words are
  // compared at once, with no branch per entry; the loop is the fallback.
  static uint32_t hash_words(const Bucket* b, uint32_t hash) {
    const uint32_t in_use = (1u << (2 + 2 * b->count)) - 1;  // the words of the header and entries in use
    constexpr uint32_t kHashWords = 0x5554;                  // words 2, 4, ..., 14
#if defined(__SSE2__)
    const __m128i h = _mm_set1_epi32(static_cast<int>(hash));
    const auto* line = reinterpret_cast<const __m128i*>(b);
    const __m128i low =
        _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(line), h), _mm_cmpeq_epi32(_mm_load_si128(line + 1), h));
    const __m128i high =
        _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(line + 2), h), _mm_cmpeq_epi32(_mm_load_si128(line + 3), h));
    const auto equal = static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(low, high)));
#else
    uint32_t equal = 0;
    for (uint32_t i = 0; i < kEntriesPerBucket; ++i) equal |= uint32_t{b->entries[i].hash == hash} << (2 + 2 * i);
#endif
    return equal & kHashWords & in_use;
  }
  // The row of the entry whose hash is word `word` of `b` (hash_words).
  static RowId row_at(const Bucket* b, uint32_t word) { return b->entries[(word - 2) / 2].row; }
  void maybe_split();
  Status split_one();
  void move_entries(Bucket* from, uint32_t from_index, Bucket* to, uint32_t new_bit);

  const KeySource& keys_;
  PageDirectory segments_;  // primary buckets, kBucketsPerSegment per page
  BlockArena overflow_;     // overflow blocks, one Bucket each
  uint32_t level_ = 0;      // buckets addressed by the low level_ bits ...
  uint32_t split_ = 0;      // ... or level_ + 1 bits below the split pointer
  uint64_t entries_ = 0;
};

// Here, inline: every key read's look-ahead calls it.
[[gnu::always_inline]] inline uint32_t HashIndex::candidates(uint32_t hash, RowId* out, uint32_t max, const void* known,
                                                             const void** more) const {
  if (more != nullptr) *more = nullptr;
  if (segments_.end() == 0) return 0;
  const Bucket* b = known != nullptr ? static_cast<const Bucket*>(known) : bucket(address(hash));
  uint32_t n = 0;
  for (uint32_t words = hash_words(b, hash); words != 0 && n < max; words &= words - 1)
    out[n++] = row_at(b, static_cast<uint32_t>(__builtin_ctz(words)));
  if (n == 0 && more != nullptr && b->next != kNoBlock) {
    const Bucket* next = block(b->next);
    __builtin_prefetch(next);
    *more = next;
  }
  return n;
}

}  // namespace fjord::engine::storage
