// OrderedIndex: one partition's ordered index, a B+tree over encoded keys
// (KeyCodec: memcmp order is the tuple order), for range and
// equality-prefix scans.
//
// Entries are (key, RowId) and unique by the RowId, so equal keys are
// allowed (non-unique indexes) and kept in RowId order. Each entry is fixed
// size: the first `inline_key_bytes` of the key (zero padded) and the RowId.
// When the whole key fits (fixed-width keys of up to 32 bytes by default,
// e.g. any integer key), the tree never looks at rows. Longer keys keep a
// prefix; when two prefixes tie the tree asks the KeySource for the row's
// key (as NDB's DBTUX compares through the row). That keeps entries small
// for VARCHAR keys without variable-size nodes.
//
// Nodes are 4 KB blocks of a BlockArena (8 per pool page). Classic
// invariants: all leaves at one depth; every node but the root at least half
// full; separator i of a node is the smallest entry of its child i+1 (so a
// separator always names a live row, which the KeySource can read: erase
// replaces a separator whose entry leaves). Leaves are linked left to right.
//
// Scans are resumable by value: a cursor holds the bounds and the last
// (key, RowId) returned, and each batch seeks past it, so rows inserted and
// erased between batches never leave it dangling. A row present for the whole
// scan is returned exactly once, in key order; rows inserted or erased during
// the scan may or may not be.
//
// Thread: the LDM thread that owns the partition. Hot path: insert, erase,
// scan_batch; nothing allocates from the heap (nodes come from pool pages).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fjord/base/status.h"
#include "fjord/engine/schema.h"
#include "fjord/engine/storage/block_arena.h"
#include "fjord/engine/storage/key_source.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::storage {

// One scan over an OrderedIndex: bounds and where the last batch stopped.
// About 3 KB, owned by the caller (the LDM's scan record); no heap.
class OrderedScanCursor {
 public:
  // Bounds are encodings of a prefix of the index columns (KeyCodec::encode
  // with fewer values than columns, or all of them). No bound: unbounded.
  void set_lower(std::span<const std::byte> key, bool inclusive) { set(lower_, key, inclusive); }
  void set_upper(std::span<const std::byte> key, bool inclusive) { set(upper_, key, inclusive); }
  // Every entry whose key starts with these column values.
  void set_equal(std::span<const std::byte> key) {
    set_lower(key, true);
    set_upper(key, true);
  }
  // Starts again from the lower bound.
  void restart() { state_ = State::kStart; }
  bool done() const { return state_ == State::kDone; }

 private:
  friend class OrderedIndex;
  struct Bound {
    bool present = false;
    bool inclusive = false;
    uint32_t length = 0;
    std::array<std::byte, kMaxKeyBytes> bytes;
  };
  enum class State : uint8_t { kStart, kResume, kDone };
  void set(Bound& bound, std::span<const std::byte> key, bool inclusive);

  Bound lower_;
  Bound upper_;
  State state_ = State::kStart;
  RowId last_row_ = kNoRow;
  uint32_t last_length_ = 0;
  std::array<std::byte, kMaxKeyBytes> last_key_;
};

class OrderedIndex {
 public:
  static constexpr uint32_t kNodeBytes = 4088;  // 8 per pool page with the page header
  static constexpr uint32_t kDefaultInlineKeyBytes = 32;
  static constexpr uint32_t kMaxInlineKeyBytes = 256;  // keeps 15+ entries per node
  static constexpr uint32_t kMaxHeight = 16;

  // `max_key_bytes` is the index's KeyCodec::max_encoded_bytes(). If it is
  // more than `inline_key_bytes`, `keys` must give each row's key (see
  // key_source.h for the contract); otherwise it may be null.
  OrderedIndex(PagePool& pool, uint32_t max_key_bytes, const KeySource* keys,
               uint32_t inline_key_bytes = kDefaultInlineKeyBytes);
  OrderedIndex(const OrderedIndex&) = delete;
  OrderedIndex& operator=(const OrderedIndex&) = delete;

  // Adds (key, row). kAlreadyExists if this row is already indexed under
  // this key; the pool's "DataMemory full" error if nodes are needed and none
  // are left (nothing changes then).
  Status insert(std::span<const std::byte> key, RowId row);
  // Removes (key, row); kNotFound if absent. Never needs memory.
  Status erase(std::span<const std::byte> key, RowId row);

  // Up to out.size() RowIds in (key, RowId) order within the cursor's bounds,
  // continuing after the last batch. cursor.done() is then true when no
  // entry within the bounds follows the last one returned: always when fewer
  // than out.size() came back, and also when a full batch took the last one.
  std::size_t scan_batch(OrderedScanCursor& cursor, std::span<RowId> out) const;

  uint64_t entry_count() const { return entries_; }
  uint32_t height() const { return height_; }
  uint64_t node_count() const { return arena_.blocks_in_use(); }
  // Pool memory held: node pages and their directory.
  uint64_t memory_bytes() const { return arena_.memory_bytes(); }
  // True when whole keys are kept in the tree (no KeySource calls).
  bool keys_inline() const { return max_key_bytes_ <= prefix_bytes_; }
  uint32_t leaf_capacity() const { return leaf_capacity_; }
  uint32_t internal_capacity() const { return internal_capacity_; }

  // For tests: sortedness, equal leaf depth, fill, separators equal to their
  // right subtree's smallest entry, the leaf chain and the entry count.
  Status check_invariants() const;

 private:
  struct NodeHeader {
    uint16_t count;  // entries (leaf) or separators (internal)
    uint16_t level;  // 0 = leaf
    BlockId next;    // leaf: the next leaf, or kNoBlock
  };
  // A key to compare with entries; `tie` decides when the key equals an
  // entry's key or is a prefix of it.
  struct SearchKey {
    enum class Tie : uint8_t { kRow, kBeforeAll, kAfterAll };
    const std::byte* bytes;
    uint32_t length;
    Tie tie;
    RowId row;
  };
  struct PathStep {
    BlockId node;
    uint32_t index;  // child followed (internal) or entry position (leaf)
  };
  struct Path {
    std::array<PathStep, kMaxHeight> steps;
    uint32_t depth = 0;  // steps in use; the last is the leaf
  };
  class Checker;

  // Node layout.
  NodeHeader& header(BlockId node) const { return *reinterpret_cast<NodeHeader*>(arena_.address(node)); }
  std::byte* entry(BlockId leaf, uint32_t i) const {
    return arena_.address(leaf) + sizeof(NodeHeader) + std::size_t{i} * entry_bytes_;
  }
  BlockId* children(BlockId node) const {
    return reinterpret_cast<BlockId*>(arena_.address(node) + sizeof(NodeHeader));
  }
  std::byte* separator(BlockId node, uint32_t i) const {
    return arena_.address(node) + separators_offset_ + std::size_t{i} * entry_bytes_;
  }
  RowId row_of(const std::byte* entry) const;
  uint32_t min_count(BlockId node) const;

  // Comparison (ordered_index_scan.cpp).
  int compare(const SearchKey& key, const std::byte* entry) const;
  int compare_key(const SearchKey& key, const std::byte* entry) const;
  uint32_t child_for(BlockId node, const SearchKey& key) const;
  uint32_t leaf_lower_bound(BlockId leaf, const SearchKey& key) const;
  void descend(const SearchKey& key, Path& path) const;
  // The entry's key as a search key (callback for a non-inline key).
  SearchKey search_key_of(const std::byte* entry, std::span<std::byte> buffer) const;

  // Insert (ordered_index.cpp).
  Status reserve_nodes(const Path& path, std::array<BlockId, kMaxHeight + 1>& spare, uint32_t& count);
  void insert_into_leaf(Path& path, const std::byte* new_entry, std::array<BlockId, kMaxHeight + 1>& spare,
                        uint32_t& spare_count);
  void split_leaf(BlockId leaf, uint32_t pos, const std::byte* new_entry, BlockId right);
  void insert_separator(Path& path, uint32_t depth, const std::byte* sep, BlockId right,
                        std::array<BlockId, kMaxHeight + 1>& spare, uint32_t& spare_count);
  void split_internal(BlockId node, uint32_t pos, const std::byte* sep, BlockId child, BlockId right, std::byte* up);
  void grow_root(const std::byte* sep, BlockId right, BlockId new_root);

  // Erase (ordered_index.cpp).
  void fix_separator_of_first(const Path& path, RowId erased);
  void rebalance(Path& path);
  void borrow_from_left(BlockId parent, uint32_t index);
  void borrow_from_right(BlockId parent, uint32_t index);
  void merge_children(BlockId parent, uint32_t left_index);
  void remove_separator(BlockId node, uint32_t i);

  BlockArena arena_;
  const KeySource* keys_;
  const uint32_t max_key_bytes_;
  const uint32_t prefix_bytes_;  // of each key kept in an entry
  const uint32_t entry_bytes_;   // prefix_bytes_ + the RowId
  uint32_t leaf_capacity_ = 0;
  uint32_t internal_capacity_ = 0;
  uint32_t separators_offset_ = 0;
  BlockId root_ = kNoBlock;
  uint32_t height_ = 0;  // levels; 1 = the root is a leaf
  uint64_t entries_ = 0;
};

}  // namespace fjord::engine::storage
