// OrderedIndex: comparing keys with entries, descending, resumable scans and
// the invariant checker (see ordered_index.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fjord/engine/storage/ordered_index.h"

namespace fjord::engine::storage {

void OrderedScanCursor::set(Bound& bound, std::span<const std::byte> key, bool inclusive) {
  FJORD_ASSERT(key.size() <= kMaxKeyBytes);
  bound.present = true;
  bound.inclusive = inclusive;
  bound.length = static_cast<uint32_t>(key.size());
  std::copy(key.begin(), key.end(), bound.bytes.begin());
  state_ = State::kStart;
}

// ---- comparison ---------------------------------------------------------------

// The key against the entry's key: < 0, > 0, or 0 when they are equal or
// the search key is a prefix of the entry's key (a bound on leading columns).
// Only when the search key is longer than the kept prefix and the prefix
// ties is the row's full key read through the KeySource.
int OrderedIndex::compare_key(const SearchKey& key, const std::byte* entry) const {
  const uint32_t n = std::min(key.length, prefix_bytes_);
  if (n > 0) {
    if (const int r = std::memcmp(key.bytes, entry, n); r != 0) return r < 0 ? -1 : 1;
  }
  if (key.length <= prefix_bytes_) return 0;
  std::array<std::byte, kMaxKeyBytes> full;
  const uint32_t full_length = keys_->encoded_key(row_of(entry), full);
  const uint32_t common = std::min(key.length, full_length);
  if (common > prefix_bytes_) {
    const int r = std::memcmp(key.bytes + prefix_bytes_, full.data() + prefix_bytes_, common - prefix_bytes_);
    if (r != 0) return r < 0 ? -1 : 1;
  }
  return key.length <= full_length ? 0 : 1;
}

int OrderedIndex::compare(const SearchKey& key, const std::byte* entry) const {
  if (const int r = compare_key(key, entry); r != 0) return r;
  switch (key.tie) {
    case SearchKey::Tie::kBeforeAll: return -1;
    case SearchKey::Tie::kAfterAll: return 1;
    case SearchKey::Tie::kRow: break;
  }
  const RowId other = row_of(entry);
  return (key.row > other) - (key.row < other);
}

OrderedIndex::SearchKey OrderedIndex::search_key_of(const std::byte* entry, std::span<std::byte> buffer) const {
  if (keys_inline()) return SearchKey{entry, prefix_bytes_, SearchKey::Tie::kRow, row_of(entry)};
  const uint32_t length = keys_->encoded_key(row_of(entry), buffer);
  return SearchKey{buffer.data(), length, SearchKey::Tie::kRow, row_of(entry)};
}

// The child to follow: after every separator <= key.
uint32_t OrderedIndex::child_for(BlockId node, const SearchKey& key) const {
  uint32_t low = 0, high = header(node).count;
  while (low < high) {
    const uint32_t middle = (low + high) / 2;
    if (compare(key, separator(node, middle)) < 0) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return low;
}

// The first entry >= key.
uint32_t OrderedIndex::leaf_lower_bound(BlockId leaf, const SearchKey& key) const {
  uint32_t low = 0, high = header(leaf).count;
  while (low < high) {
    const uint32_t middle = (low + high) / 2;
    if (compare(key, entry(leaf, middle)) > 0) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

void OrderedIndex::descend(const SearchKey& key, Path& path) const {
  FJORD_ASSERT(root_ != kNoBlock);
  BlockId node = root_;
  path.depth = height_;
  for (uint32_t d = 0; d < height_; ++d) {
    path.steps[d].node = node;
    path.steps[d].index = 0;
    if (header(node).level == 0) break;
    const uint32_t child = child_for(node, key);
    path.steps[d].index = child;
    node = children(node)[child];
  }
}

// ---- scans --------------------------------------------------------------------

std::size_t OrderedIndex::scan_batch(OrderedScanCursor& cursor, std::span<RowId> out) const {
  using State = OrderedScanCursor::State;
  if (cursor.done() || out.empty()) return 0;
  if (entries_ == 0) {
    cursor.state_ = State::kDone;
    return 0;
  }
  // Where to start: past the last entry returned, or at the lower bound.
  SearchKey start{nullptr, 0, SearchKey::Tie::kBeforeAll, kNoRow};
  if (cursor.state_ == State::kResume) {
    start = SearchKey{cursor.last_key_.data(), cursor.last_length_, SearchKey::Tie::kRow, cursor.last_row_};
  } else if (cursor.lower_.present) {
    start = SearchKey{cursor.lower_.bytes.data(), cursor.lower_.length,
                      cursor.lower_.inclusive ? SearchKey::Tie::kBeforeAll : SearchKey::Tie::kAfterAll, kNoRow};
  }
  Path path;
  descend(start, path);
  BlockId leaf = path.steps[path.depth - 1].node;
  uint32_t pos = leaf_lower_bound(leaf, start);
  if (cursor.state_ == State::kResume && pos < header(leaf).count && compare(start, entry(leaf, pos)) == 0) ++pos;

  const SearchKey upper{cursor.upper_.bytes.data(), cursor.upper_.length,
                        cursor.upper_.inclusive ? SearchKey::Tie::kAfterAll : SearchKey::Tie::kBeforeAll, kNoRow};
  std::size_t n = 0;
  const std::byte* last = nullptr;
  while (n < out.size()) {
    if (pos == header(leaf).count) {
      leaf = header(leaf).next;
      pos = 0;
      if (leaf == kNoBlock) break;
      continue;
    }
    const std::byte* e = entry(leaf, pos);
    if (cursor.upper_.present && compare(upper, e) < 0) {
      leaf = kNoBlock;
      break;
    }
    out[n++] = row_of(e);
    last = e;
    ++pos;
  }
  // A full batch looks one entry on (past empty leaves): when it took the
  // last one within the bounds, the scan is done now rather than after a
  // further, empty, batch.
  while (n == out.size() && leaf != kNoBlock && pos == header(leaf).count) {
    leaf = header(leaf).next;
    pos = 0;
  }
  if (n < out.size() || leaf == kNoBlock || (cursor.upper_.present && compare(upper, entry(leaf, pos)) < 0)) {
    cursor.state_ = State::kDone;
    return n;
  }
  // Remember the last entry by value (its full key), never by position.
  cursor.last_row_ = row_of(last);
  if (keys_inline()) {
    std::memcpy(cursor.last_key_.data(), last, prefix_bytes_);
    cursor.last_length_ = prefix_bytes_;
  } else {
    cursor.last_length_ = keys_->encoded_key(cursor.last_row_, cursor.last_key_);
  }
  cursor.state_ = State::kResume;
  return n;
}

// ---- invariants -----------------------------------------------------------------

class OrderedIndex::Checker {
 public:
  explicit Checker(const OrderedIndex& tree) : tree_(tree) {}

  Status run() {
    if (tree_.root_ == kNoBlock) return tree_.entries_ == 0 ? Status::ok() : fail("entries but no root");
    if (Status s = visit(tree_.root_, 0, nullptr, nullptr); !s) return s;
    if (entries_ != tree_.entries_) {
      return fail("holds " + std::to_string(entries_) + " entries, counted " + std::to_string(tree_.entries_));
    }
    for (std::size_t i = 0; i < leaves_.size(); ++i) {
      const BlockId expected = i + 1 < leaves_.size() ? leaves_[i + 1] : kNoBlock;
      if (tree_.header(leaves_[i]).next != expected) return fail("leaf chain broken after leaf " + std::to_string(i));
    }
    return Status::ok();
  }

 private:
  static Status fail(const std::string& what) { return Status(StatusCode::kInternal, "B+tree " + what); }

  int compare_entries(const std::byte* a, const std::byte* b) const {
    std::array<std::byte, kMaxKeyBytes> buffer;
    return tree_.compare(tree_.search_key_of(a, buffer), b);
  }

  // Entries of the subtree must be >= low and < high (null: no bound).
  Status visit(BlockId node, uint32_t depth, const std::byte* low, const std::byte* high) {
    const NodeHeader& h = tree_.header(node);
    const std::string where = "node " + std::to_string(node) + " at depth " + std::to_string(depth);
    if (h.level + depth + 1 != tree_.height_) return fail(where + " has level " + std::to_string(h.level));
    const uint32_t capacity = h.level == 0 ? tree_.leaf_capacity_ : tree_.internal_capacity_;
    if (h.count > capacity) return fail(where + " is over capacity");
    if (node != tree_.root_ && h.count < tree_.min_count(node)) {
      return fail(where + " is under half full: " + std::to_string(h.count));
    }
    if (node == tree_.root_ && h.level > 0 && h.count == 0) return fail("root has no separators");
    const auto item = [&](uint32_t i) { return h.level == 0 ? tree_.entry(node, i) : tree_.separator(node, i); };
    for (uint32_t i = 0; i < h.count; ++i) {
      if (i > 0 && compare_entries(item(i - 1), item(i)) >= 0)
        return fail(where + " is out of order at " + std::to_string(i));
      if (low != nullptr && compare_entries(item(i), low) < 0) return fail(where + " has an entry below its bound");
      if (high != nullptr && compare_entries(item(i), high) >= 0) return fail(where + " has an entry above its bound");
    }
    if (h.level == 0) {
      entries_ += h.count;
      leaves_.push_back(node);
      return Status::ok();
    }
    for (uint32_t c = 0; c <= h.count; ++c) {
      const BlockId child = tree_.children(node)[c];
      if (Status s = visit(child, depth + 1, c == 0 ? low : item(c - 1), c == h.count ? high : item(c)); !s) return s;
      if (c > 0 && !equals_first_entry(item(c - 1), child)) {
        return fail(where + " separator " + std::to_string(c - 1) + " is not the first entry of its right subtree");
      }
    }
    return Status::ok();
  }

  bool equals_first_entry(const std::byte* sep, BlockId subtree) const {
    while (tree_.header(subtree).level > 0) subtree = tree_.children(subtree)[0];
    return std::memcmp(sep, tree_.entry(subtree, 0), tree_.entry_bytes_) == 0;
  }

  const OrderedIndex& tree_;
  uint64_t entries_ = 0;
  std::vector<BlockId> leaves_;
};

Status OrderedIndex::check_invariants() const { return Checker(*this).run(); }

}  // namespace fjord::engine::storage
