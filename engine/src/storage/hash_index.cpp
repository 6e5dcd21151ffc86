// HashIndex: linear hashing over pool pages (see hash_index.h).
#include "fjord/engine/storage/hash_index.h"

#include <array>
#include <cstring>
#include <string>

namespace fjord::engine::storage {

HashIndex::HashIndex(PagePool& pool, const KeySource& keys)
    : keys_(keys), segments_(pool), overflow_(pool, sizeof(Bucket), alignof(Bucket)) {}

RowId HashIndex::find(uint64_t hash, std::span<const std::byte> key) const {
  if (segments_.end() == 0) return kNoRow;
  const auto hash32 = static_cast<uint32_t>(hash);
  for (const Bucket* b = bucket(address(hash32));;) {
    for (uint32_t words = hash_words(b, hash32); words != 0; words &= words - 1) {
      const RowId row = row_at(b, static_cast<uint32_t>(__builtin_ctz(words)));
      if (keys_.key_equals(row, key)) return row;
    }
    if (b->next == kNoBlock) return kNoRow;
    b = block(b->next);
  }
}

Status HashIndex::insert(uint64_t hash, std::span<const std::byte> key, RowId row) {
  FJORD_ASSERT(row != kNoRow);
  if (segments_.end() == 0) {
    Result<uint32_t> first = segments_.add_page();
    if (!first.is_ok()) return first.status();
    *bucket(0) = Bucket{kNoBlock, 0, {}};
  }
  if (find(hash, key) != kNoRow) return Status(StatusCode::kAlreadyExists, "the key is already in the hash index");
  const auto hash32 = static_cast<uint32_t>(hash);
  Bucket* last = bucket(address(hash32));
  while (last->next != kNoBlock) last = block(last->next);
  if (last->count == kEntriesPerBucket) {
    Result<BlockId> added = overflow_.allocate();
    if (!added.is_ok()) return added.status();
    *block(added.value()) = Bucket{kNoBlock, 0, {}};
    last->next = added.value();
    last = block(added.value());
  }
  last->entries[last->count++] = Entry{hash32, row};
  ++entries_;
  maybe_split();
  return Status::ok();
}

Status HashIndex::erase(uint64_t hash, RowId row) {
  const auto hash32 = static_cast<uint32_t>(hash);
  if (segments_.end() != 0) {
    Bucket* head = bucket(address(hash32));
    for (Bucket* b = head;; b = block(b->next)) {
      for (uint32_t i = 0; i < b->count; ++i) {
        if (b->entries[i].row != row || b->entries[i].hash != hash32) continue;
        // Keep the chain packed: the chain's last entry fills the hole.
        Bucket* before_last = nullptr;
        Bucket* last = head;
        while (last->next != kNoBlock) {
          before_last = last;
          last = block(last->next);
        }
        b->entries[i] = last->entries[--last->count];
        if (last->count == 0 && before_last != nullptr) {
          overflow_.free(before_last->next);
          before_last->next = kNoBlock;
        }
        --entries_;
        return Status::ok();
      }
      if (b->next == kNoBlock) break;
    }
  }
  return Status(StatusCode::kNotFound, "row " + std::to_string(row) + " is not in the hash index");
}

void HashIndex::maybe_split() {
  if (entries_ <= uint64_t{kSplitLoad} * bucket_count() || level_ >= 31) return;
  // A split that cannot get a page is skipped: the insert stands and the
  // chains are a little longer until a later insert splits.
  (void)split_one();
}

Status HashIndex::split_one() {
  const uint32_t new_bit = 1u << level_;
  const uint32_t from_index = split_;
  const uint32_t to_index = new_bit + split_;
  if (to_index / kBucketsPerSegment == segments_.end()) {
    Result<uint32_t> segment = segments_.add_page();
    if (!segment.is_ok()) return segment.status();
    FJORD_ASSERT(segment.value() == to_index / kBucketsPerSegment);
  }
  uint32_t moving = 0;
  for (const Bucket* b = bucket(from_index);; b = block(b->next)) {
    for (uint32_t i = 0; i < b->count; ++i) moving += (b->entries[i].hash & new_bit) != 0 ? 1 : 0;
    if (b->next == kNoBlock) break;
  }
  // Take every overflow block the new chain needs before moving anything.
  Bucket* to = bucket(to_index);
  *to = Bucket{kNoBlock, 0, {}};
  Bucket* tail = to;
  for (uint32_t i = 0; moving > kEntriesPerBucket && i < (moving - 1) / kEntriesPerBucket; ++i) {
    Result<BlockId> added = overflow_.allocate();
    if (!added.is_ok()) {
      for (BlockId id = to->next; id != kNoBlock;) {
        const BlockId next = block(id)->next;
        overflow_.free(id);
        id = next;
      }
      return added.status();
    }
    *block(added.value()) = Bucket{kNoBlock, 0, {}};
    tail->next = added.value();
    tail = block(added.value());
  }
  move_entries(bucket(from_index), from_index, to, new_bit);
  if (++split_ == new_bit) {
    ++level_;
    split_ = 0;
  }
  return Status::ok();
}

// Moves the entries with `new_bit` set from the chain at `from` to the empty
// chain at `to` (which has room for them all), packing the old chain in place
// and returning the overflow blocks it no longer needs.
void HashIndex::move_entries(Bucket* from, uint32_t from_index, Bucket* to, uint32_t new_bit) {
  Bucket* write = from;
  uint32_t written = 0;  // entries kept in `write`
  for (Bucket* read = from;;) {
    const uint32_t count = read->count;
    for (uint32_t r = 0; r < count; ++r) {
      const Entry e = read->entries[r];  // read before the write below can reach it
      if ((e.hash & new_bit) != 0) {
        if (to->count == kEntriesPerBucket) to = block(to->next);
        to->entries[to->count++] = e;
        continue;
      }
      if (written == kEntriesPerBucket) {
        write->count = kEntriesPerBucket;
        write = block(write->next);
        written = 0;
      }
      write->entries[written++] = e;
    }
    if (read->next == kNoBlock) break;
    read = block(read->next);
  }
  write->count = written;
  FJORD_ASSERT(written > 0 || write == bucket(from_index));
  for (BlockId id = write->next; id != kNoBlock;) {
    const BlockId next = block(id)->next;
    overflow_.free(id);
    id = next;
  }
  write->next = kNoBlock;
}

Status HashIndex::check_invariants() const {
  const auto fail = [](uint32_t index, const std::string& what) {
    return Status(StatusCode::kInternal, "hash bucket " + std::to_string(index) + ": " + what);
  };
  if (segments_.end() == 0) return entries_ == 0 ? Status::ok() : fail(0, "entries but no buckets");
  uint64_t total = 0;
  for (uint32_t index = 0; index < bucket_count(); ++index) {
    const Bucket* head = bucket(index);
    for (const Bucket* b = head;; b = block(b->next)) {
      if (b->count > kEntriesPerBucket) return fail(index, "count " + std::to_string(b->count));
      if (b->next != kNoBlock && b->count != kEntriesPerBucket) return fail(index, "a block before the last has room");
      if (b != head && b->count == 0) return fail(index, "an empty overflow block");
      for (uint32_t i = 0; i < b->count; ++i) {
        if (address(b->entries[i].hash) != index) return fail(index, "holds an entry of another bucket");
      }
      total += b->count;
      if (b->next == kNoBlock) break;
    }
  }
  if (total != entries_)
    return fail(0, "entries add up to " + std::to_string(total) + " not " + std::to_string(entries_));
  return Status::ok();
}

}  // namespace fjord::engine::storage
