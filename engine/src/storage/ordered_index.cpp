// OrderedIndex: B+tree insert and erase (see ordered_index.h). Searching,
// scans and the invariant checker are in ordered_index_scan.cpp.
#include "fjord/engine/storage/ordered_index.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace fjord::engine::storage {

namespace {
using Spare = std::array<BlockId, OrderedIndex::kMaxHeight + 1>;
}  // namespace

OrderedIndex::OrderedIndex(PagePool& pool, uint32_t max_key_bytes, const KeySource* keys, uint32_t inline_key_bytes)
    : arena_(pool, kNodeBytes, 8),
      keys_(keys),
      max_key_bytes_(max_key_bytes),
      prefix_bytes_(std::min(max_key_bytes, inline_key_bytes)),
      entry_bytes_(prefix_bytes_ + static_cast<uint32_t>(sizeof(RowId))) {
  FJORD_ASSERT(max_key_bytes > 0);
  FJORD_ASSERT(max_key_bytes <= kMaxKeyBytes);
  FJORD_ASSERT(inline_key_bytes > 0);
  FJORD_ASSERT(inline_key_bytes <= kMaxInlineKeyBytes);
  FJORD_ASSERT_MSG(keys_inline() || keys != nullptr, "keys longer than the inline prefix need a KeySource");
  leaf_capacity_ = (kNodeBytes - sizeof(NodeHeader)) / entry_bytes_;
  internal_capacity_ = (kNodeBytes - sizeof(NodeHeader) - sizeof(BlockId)) / (entry_bytes_ + sizeof(BlockId));
  separators_offset_ = sizeof(NodeHeader) + (internal_capacity_ + 1) * sizeof(BlockId);
  // Half-full nodes keep at least 7 entries: a leaf never empties on one erase.
  FJORD_ASSERT(leaf_capacity_ >= 15);
  FJORD_ASSERT(internal_capacity_ >= 15);
}

RowId OrderedIndex::row_of(const std::byte* entry) const {
  RowId row;
  std::memcpy(&row, entry + prefix_bytes_, sizeof row);
  return row;
}

uint32_t OrderedIndex::min_count(BlockId node) const {
  return header(node).level == 0 ? leaf_capacity_ / 2 : internal_capacity_ / 2;
}

// ---- insert -----------------------------------------------------------------

Status OrderedIndex::insert(std::span<const std::byte> key, RowId row) {
  FJORD_ASSERT(key.size() <= max_key_bytes_);
  FJORD_ASSERT(row != kNoRow);
  if (root_ == kNoBlock) {
    Result<BlockId> root = arena_.allocate();
    if (!root.is_ok()) return root.status();
    root_ = root.value();
    header(root_) = NodeHeader{0, 0, kNoBlock};
    height_ = 1;
  }
  const SearchKey search{key.data(), static_cast<uint32_t>(key.size()), SearchKey::Tie::kRow, row};
  Path path;
  descend(search, path);
  PathStep& leaf = path.steps[path.depth - 1];
  leaf.index = leaf_lower_bound(leaf.node, search);
  if (leaf.index < header(leaf.node).count && compare(search, entry(leaf.node, leaf.index)) == 0) {
    return Status(StatusCode::kAlreadyExists,
                  "row " + std::to_string(row) + " is already in the ordered index under this key");
  }
  Spare spare;
  uint32_t spare_count = 0;
  if (Status s = reserve_nodes(path, spare, spare_count); !s) return s;
  std::array<std::byte, kMaxInlineKeyBytes + sizeof(RowId)> new_entry{};  // zero padding
  std::memcpy(new_entry.data(), key.data(), std::min<std::size_t>(key.size(), prefix_bytes_));
  std::memcpy(new_entry.data() + prefix_bytes_, &row, sizeof row);
  insert_into_leaf(path, new_entry.data(), spare, spare_count);
  FJORD_ASSERT(spare_count == 0);
  ++entries_;
  return Status::ok();
}

// Takes, before anything changes, one node for each full node on the path
// from the leaf up (each will split) and one more if the root splits.
Status OrderedIndex::reserve_nodes(const Path& path, Spare& spare, uint32_t& count) {
  uint32_t needed = 0;
  for (uint32_t d = path.depth; d-- > 0;) {
    const BlockId node = path.steps[d].node;
    const uint32_t capacity = header(node).level == 0 ? leaf_capacity_ : internal_capacity_;
    if (header(node).count < capacity) break;
    ++needed;
    if (d == 0) ++needed;  // a new root
  }
  FJORD_ASSERT_MSG(height_ + (needed > height_ ? 1 : 0) <= kMaxHeight, "B+tree too tall");
  for (; count < needed; ++count) {
    Result<BlockId> node = arena_.allocate();
    if (!node.is_ok()) {
      while (count > 0) arena_.free(spare[--count]);
      return node.status();
    }
    spare[count] = node.value();
  }
  return Status::ok();
}

void OrderedIndex::insert_into_leaf(Path& path, const std::byte* new_entry, Spare& spare, uint32_t& spare_count) {
  const BlockId leaf = path.steps[path.depth - 1].node;
  const uint32_t pos = path.steps[path.depth - 1].index;
  NodeHeader& h = header(leaf);
  if (h.count < leaf_capacity_) {
    std::memmove(entry(leaf, pos + 1), entry(leaf, pos), std::size_t{h.count - pos} * entry_bytes_);
    std::memcpy(entry(leaf, pos), new_entry, entry_bytes_);
    ++h.count;
    return;
  }
  const BlockId right = spare[--spare_count];
  split_leaf(leaf, pos, new_entry, right);
  // The right leaf's first entry is its subtree's smallest: the separator.
  insert_separator(path, path.depth - 1, entry(right, 0), right, spare, spare_count);
}

// Splits a full leaf while inserting: the cap + 1 entries are divided in two
// halves, the upper one into `right`.
void OrderedIndex::split_leaf(BlockId leaf, uint32_t pos, const std::byte* new_entry, BlockId right) {
  const uint32_t total = leaf_capacity_ + 1;
  const uint32_t left_count = total / 2;
  const auto at = [&](uint32_t k) -> const std::byte* {
    return k < pos ? entry(leaf, k) : k == pos ? new_entry : entry(leaf, k - 1);
  };
  for (uint32_t k = left_count; k < total; ++k) std::memcpy(entry(right, k - left_count), at(k), entry_bytes_);
  if (pos < left_count) {
    std::memmove(entry(leaf, pos + 1), entry(leaf, pos), std::size_t{left_count - 1 - pos} * entry_bytes_);
    std::memcpy(entry(leaf, pos), new_entry, entry_bytes_);
  }
  header(right) = NodeHeader{static_cast<uint16_t>(total - left_count), 0, header(leaf).next};
  header(leaf).count = static_cast<uint16_t>(left_count);
  header(leaf).next = right;
}

// Adds separator `sep` with `right` as the child after it to the parent of
// the node at path step `child_depth`, splitting upwards as needed.
void OrderedIndex::insert_separator(Path& path, uint32_t child_depth, const std::byte* sep, BlockId right, Spare& spare,
                                    uint32_t& spare_count) {
  if (child_depth == 0) {
    grow_root(sep, right, spare[--spare_count]);
    return;
  }
  const BlockId node = path.steps[child_depth - 1].node;
  const uint32_t i = path.steps[child_depth - 1].index;  // the child that split
  NodeHeader& h = header(node);
  if (h.count < internal_capacity_) {
    std::memmove(separator(node, i + 1), separator(node, i), std::size_t{h.count - i} * entry_bytes_);
    std::memcpy(separator(node, i), sep, entry_bytes_);
    BlockId* c = children(node);
    std::memmove(c + i + 2, c + i + 1, std::size_t{h.count - i} * sizeof(BlockId));
    c[i + 1] = right;
    ++h.count;
    return;
  }
  const BlockId new_right = spare[--spare_count];
  std::array<std::byte, kMaxInlineKeyBytes + sizeof(RowId)> up;
  split_internal(node, i, sep, right, new_right, up.data());
  insert_separator(path, child_depth - 1, up.data(), new_right, spare, spare_count);
}

// Splits a full internal node while inserting separator `sep` at `pos` (with
// `child` after it): of the cap + 1 separators the middle one moves up (into
// `up`), those after it and their children go to `right`.
void OrderedIndex::split_internal(BlockId node, uint32_t pos, const std::byte* sep, BlockId child, BlockId right,
                                  std::byte* up) {
  const uint32_t total = internal_capacity_ + 1;
  const uint32_t middle = total / 2;
  const BlockId* c = children(node);
  const auto sep_at = [&](uint32_t k) -> const std::byte* {
    return k < pos ? separator(node, k) : k == pos ? sep : separator(node, k - 1);
  };
  const auto child_at = [&](uint32_t k) { return k <= pos ? c[k] : k == pos + 1 ? child : c[k - 1]; };
  for (uint32_t k = middle + 1; k < total; ++k) std::memcpy(separator(right, k - middle - 1), sep_at(k), entry_bytes_);
  for (uint32_t k = middle + 1; k <= total; ++k) children(right)[k - middle - 1] = child_at(k);
  std::memcpy(up, sep_at(middle), entry_bytes_);
  if (pos < middle) {
    std::memmove(separator(node, pos + 1), separator(node, pos), std::size_t{middle - 1 - pos} * entry_bytes_);
    std::memcpy(separator(node, pos), sep, entry_bytes_);
    BlockId* mc = children(node);
    std::memmove(mc + pos + 2, mc + pos + 1, std::size_t{middle - 1 - pos} * sizeof(BlockId));
    mc[pos + 1] = child;
  }
  header(right) = NodeHeader{static_cast<uint16_t>(total - middle - 1), header(node).level, kNoBlock};
  header(node).count = static_cast<uint16_t>(middle);
}

void OrderedIndex::grow_root(const std::byte* sep, BlockId right, BlockId new_root) {
  header(new_root) = NodeHeader{1, static_cast<uint16_t>(height_), kNoBlock};
  children(new_root)[0] = root_;
  children(new_root)[1] = right;
  std::memcpy(separator(new_root, 0), sep, entry_bytes_);
  root_ = new_root;
  ++height_;
}

// ---- erase ------------------------------------------------------------------

Status OrderedIndex::erase(std::span<const std::byte> key, RowId row) {
  FJORD_ASSERT(key.size() <= max_key_bytes_);
  const SearchKey search{key.data(), static_cast<uint32_t>(key.size()), SearchKey::Tie::kRow, row};
  Path path;
  if (root_ != kNoBlock) {
    descend(search, path);
    PathStep& leaf = path.steps[path.depth - 1];
    leaf.index = leaf_lower_bound(leaf.node, search);
    NodeHeader& h = header(leaf.node);
    if (leaf.index < h.count && compare(search, entry(leaf.node, leaf.index)) == 0) {
      std::memmove(entry(leaf.node, leaf.index), entry(leaf.node, leaf.index + 1),
                   std::size_t{h.count - leaf.index - 1} * entry_bytes_);
      --h.count;
      --entries_;
      FJORD_ASSERT(h.count > 0 || leaf.node == root_);
      if (leaf.index == 0 && h.count > 0) fix_separator_of_first(path, row);
      rebalance(path);
      return Status::ok();
    }
  }
  return Status(StatusCode::kNotFound, "row " + std::to_string(row) + " is not in the ordered index under this key");
}

// The erased entry was its leaf's first; if it was also a separator (the
// smallest entry of the subtree right of it), that separator is on the
// path, at the deepest step that went right of some separator. The leaf's
// new first entry is that subtree's new smallest.
void OrderedIndex::fix_separator_of_first(const Path& path, RowId erased) {
  const BlockId leaf = path.steps[path.depth - 1].node;
  for (uint32_t d = path.depth - 1; d-- > 0;) {
    const PathStep& step = path.steps[d];
    if (step.index == 0) continue;
    std::byte* sep = separator(step.node, step.index - 1);
    if (row_of(sep) == erased) std::memcpy(sep, entry(leaf, 0), entry_bytes_);
    return;
  }
}

// Restores the fill of the nodes on the path after an erase, bottom up:
// borrow one entry from a sibling that can spare it, else merge with it
// (which takes a separator from the parent, so the parent is checked next).
void OrderedIndex::rebalance(Path& path) {
  for (uint32_t d = path.depth - 1; d > 0; --d) {
    const BlockId node = path.steps[d].node;
    if (header(node).count >= min_count(node)) break;
    const BlockId parent = path.steps[d - 1].node;
    const uint32_t i = path.steps[d - 1].index;
    const BlockId* c = children(parent);
    const bool has_left = i > 0;
    const bool has_right = i < header(parent).count;
    if (has_left && header(c[i - 1]).count > min_count(c[i - 1])) {
      borrow_from_left(parent, i);
      break;
    }
    if (has_right && header(c[i + 1]).count > min_count(c[i + 1])) {
      borrow_from_right(parent, i);
      break;
    }
    merge_children(parent, has_left ? i - 1 : i);
  }
  if (height_ > 1 && header(root_).count == 0) {
    const BlockId old_root = root_;
    root_ = children(old_root)[0];
    arena_.free(old_root);
    --height_;
  }
}

void OrderedIndex::borrow_from_left(BlockId parent, uint32_t i) {
  const BlockId node = children(parent)[i];
  const BlockId left = children(parent)[i - 1];
  NodeHeader& h = header(node);
  NodeHeader& lh = header(left);
  if (h.level == 0) {
    std::memmove(entry(node, 1), entry(node, 0), std::size_t{h.count} * entry_bytes_);
    std::memcpy(entry(node, 0), entry(left, lh.count - 1), entry_bytes_);
    std::memcpy(separator(parent, i - 1), entry(node, 0), entry_bytes_);
  } else {
    // The parent's separator comes down in front; the left's last goes up.
    std::memmove(separator(node, 1), separator(node, 0), std::size_t{h.count} * entry_bytes_);
    std::memmove(children(node) + 1, children(node), std::size_t{h.count + 1u} * sizeof(BlockId));
    std::memcpy(separator(node, 0), separator(parent, i - 1), entry_bytes_);
    children(node)[0] = children(left)[lh.count];
    std::memcpy(separator(parent, i - 1), separator(left, lh.count - 1), entry_bytes_);
  }
  --lh.count;
  ++h.count;
}

void OrderedIndex::borrow_from_right(BlockId parent, uint32_t i) {
  const BlockId node = children(parent)[i];
  const BlockId right = children(parent)[i + 1];
  NodeHeader& h = header(node);
  NodeHeader& rh = header(right);
  if (h.level == 0) {
    std::memcpy(entry(node, h.count), entry(right, 0), entry_bytes_);
    std::memmove(entry(right, 0), entry(right, 1), std::size_t{rh.count - 1u} * entry_bytes_);
    std::memcpy(separator(parent, i), entry(right, 0), entry_bytes_);
  } else {
    std::memcpy(separator(node, h.count), separator(parent, i), entry_bytes_);
    children(node)[h.count + 1] = children(right)[0];
    std::memcpy(separator(parent, i), separator(right, 0), entry_bytes_);
    std::memmove(separator(right, 0), separator(right, 1), std::size_t{rh.count - 1u} * entry_bytes_);
    std::memmove(children(right), children(right) + 1, std::size_t{rh.count} * sizeof(BlockId));
  }
  ++h.count;
  --rh.count;
}

// Merges child left_index + 1 of `parent` into child left_index.
void OrderedIndex::merge_children(BlockId parent, uint32_t left_index) {
  const BlockId left = children(parent)[left_index];
  const BlockId right = children(parent)[left_index + 1];
  NodeHeader& lh = header(left);
  const NodeHeader& rh = header(right);
  if (lh.level == 0) {
    FJORD_ASSERT(0u + lh.count + rh.count <= leaf_capacity_);
    std::memcpy(entry(left, lh.count), entry(right, 0), std::size_t{rh.count} * entry_bytes_);
    lh.count = static_cast<uint16_t>(lh.count + rh.count);
    lh.next = rh.next;
  } else {
    FJORD_ASSERT(lh.count + 1u + rh.count <= internal_capacity_);
    std::memcpy(separator(left, lh.count), separator(parent, left_index), entry_bytes_);
    std::memcpy(separator(left, lh.count + 1), separator(right, 0), std::size_t{rh.count} * entry_bytes_);
    std::memcpy(children(left) + lh.count + 1, children(right), std::size_t{rh.count + 1u} * sizeof(BlockId));
    lh.count = static_cast<uint16_t>(lh.count + 1 + rh.count);
  }
  remove_separator(parent, left_index);
  arena_.free(right);
}

// Removes separator i and the child after it.
void OrderedIndex::remove_separator(BlockId node, uint32_t i) {
  NodeHeader& h = header(node);
  std::memmove(separator(node, i), separator(node, i + 1), std::size_t{h.count - i - 1} * entry_bytes_);
  BlockId* c = children(node);
  std::memmove(c + i + 1, c + i + 2, std::size_t{h.count - i - 1} * sizeof(BlockId));
  --h.count;
}

}  // namespace fjord::engine::storage
