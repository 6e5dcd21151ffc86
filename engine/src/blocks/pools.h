// Fixed-capacity structures for blocks: everything sized at start-up, so a
// block's hot path never touches the heap.
//
//   RecordPool<T>  records with a free list and 8-bit generations, so a stale
//                  reference (a late reply for a record since reused) is
//                  recognised and ignored.
//   IdMap          uint64 key -> uint32 value, open addressing with linear
//                  probing and backward-shift deletion (no tombstones).
//
// Single-threaded (one block). Hot path.
#pragma once

#include <cstdint>
#include <vector>

#include "fjord/base/assert.h"

namespace fjord::engine {

// A reference to a pool record: index in the low 24 bits, generation above.
inline constexpr uint32_t kNoRecord = UINT32_MAX;
inline uint32_t record_index(uint32_t ref) { return ref & 0xFFFFFF; }

template <typename T>
class RecordPool {
 public:
  explicit RecordPool(uint32_t capacity = 0) { reset(capacity); }
  void reset(uint32_t capacity) {
    FJORD_ASSERT(capacity < (1u << 24));
    records_.assign(capacity, T{});
    generations_.assign(capacity, 0);
    in_use_.assign(capacity, 0);
    free_.clear();
    free_.reserve(capacity);
    for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  }

  // A fresh record (value-initialised) and its reference, or kNoRecord.
  uint32_t allocate() {
    if (free_.empty()) return kNoRecord;
    const uint32_t i = free_.back();
    free_.pop_back();
    records_[i] = T{};
    in_use_[i] = 1;
    return i | uint32_t{generations_[i]} << 24;
  }
  void release(uint32_t ref) {
    const uint32_t i = record_index(ref);
    FJORD_ASSERT(valid(ref));
    in_use_[i] = 0;
    ++generations_[i];
    free_.push_back(i);
  }
  // True when ref names a record in use with the same generation.
  bool valid(uint32_t ref) const {
    const uint32_t i = record_index(ref);
    return i < records_.size() && in_use_[i] && generations_[i] == (ref >> 24);
  }
  T& operator[](uint32_t ref) {
    FJORD_ASSERT(valid(ref));
    return records_[record_index(ref)];
  }
  uint32_t capacity() const { return static_cast<uint32_t>(records_.size()); }
  uint32_t in_use() const { return capacity() - static_cast<uint32_t>(free_.size()); }
  // Reference of the record at index i if it is in use, else kNoRecord (for sweeps).
  uint32_t ref_at(uint32_t i) const { return in_use_[i] ? (i | uint32_t{generations_[i]} << 24) : kNoRecord; }

 private:
  std::vector<T> records_;
  std::vector<uint8_t> generations_;
  std::vector<uint8_t> in_use_;
  std::vector<uint32_t> free_;
};

class IdMap {
 public:
  explicit IdMap(uint32_t capacity = 0) { reset(capacity); }
  void reset(uint32_t capacity) {
    uint32_t slots = 16;
    while (slots < capacity * 2) slots *= 2;  // load factor <= 1/2
    keys_.assign(slots, kEmpty);
    values_.assign(slots, 0);
    size_ = 0;
    capacity_ = capacity;
  }
  // False if full (capacity reached) or the key exists.
  bool insert(uint64_t key, uint32_t value) {
    FJORD_ASSERT(key != kEmpty);
    if (size_ >= capacity_) return false;
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask()) {
      if (keys_[i] == key) return false;
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        values_[i] = value;
        ++size_;
        return true;
      }
    }
  }
  bool find(uint64_t key, uint32_t& value) const {
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask()) {
      if (keys_[i] == key) {
        value = values_[i];
        return true;
      }
      if (keys_[i] == kEmpty) return false;
    }
  }
  bool erase(uint64_t key) {
    std::size_t i = slot_of(key);
    for (;; i = (i + 1) & mask()) {
      if (keys_[i] == kEmpty) return false;
      if (keys_[i] == key) break;
    }
    // Backward shift: move later entries of the probe run into the hole.
    for (std::size_t j = (i + 1) & mask(); keys_[j] != kEmpty; j = (j + 1) & mask()) {
      const std::size_t home = slot_of(keys_[j]);
      const bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        keys_[i] = keys_[j];
        values_[i] = values_[j];
        i = j;
      }
    }
    keys_[i] = kEmpty;
    --size_;
    return true;
  }
  uint32_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  std::size_t mask() const { return keys_.size() - 1; }
  std::size_t slot_of(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask();
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
};

}  // namespace fjord::engine
