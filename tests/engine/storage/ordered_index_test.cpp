// OrderedIndex (B+tree) against a std::set<(key, row)> model: random inserts
// and erases with the tree's invariants checked as it goes, bounded scans
// (inclusive, exclusive, equality on a column prefix) and scans resumed after
// changes between batches. Keys are either kept whole in the tree or only a
// prefix, compared through the rows (RowKeySource) when prefixes tie.
#include "fjord/engine/storage/ordered_index.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "storage_test_util.h"

namespace fjord::engine::storage {
namespace {

using testing::as_string;
using testing::make_pool;
using testing::test_seed;
using testing::TestTable;

using Entry = std::pair<std::string, RowId>;  // (encoded key, row): the model's order is the tree's

bool starts_with(const std::string& key, const std::string& prefix) {
  return key.compare(0, prefix.size(), prefix) == 0;
}

struct Bounds {
  bool has_lower = false, lower_inclusive = false, has_upper = false, upper_inclusive = false;
  std::string lower, upper;
  bool contains(const std::string& key) const {
    if (has_lower && (lower_inclusive ? key < lower : (key <= lower || starts_with(key, lower)))) return false;
    if (has_upper && (upper_inclusive ? (key > upper && !starts_with(key, upper)) : key >= upper)) return false;
    return true;
  }
  void apply(OrderedScanCursor& cursor) const {
    const auto bytes = [](const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); };
    if (has_lower) cursor.set_lower(bytes(lower), lower_inclusive);
    if (has_upper) cursor.set_upper(bytes(upper), upper_inclusive);
  }
};

struct Config {
  uint32_t name_length;   // VARCHAR length of the indexed column
  uint32_t inline_bytes;  // key prefix kept in the tree
  const char* label;
};

// A table with an ordered index on `name`, and the model of that index.
class Harness {
 public:
  Harness(const Config& config, uint64_t seed)
      : pool_(make_pool(256 << 20)),
        table_(*pool_, config.name_length, 4),
        index_(*pool_, table_.by_name.max_encoded_bytes(), &table_.name_keys, config.inline_bytes),
        rng_(seed),
        name_length_(config.name_length) {}

  OrderedIndex& index() { return index_; }
  std::mt19937_64& rng() { return rng_; }
  const std::set<Entry>& model() const { return model_; }

  // Names share long prefixes and repeat, so keys tie on the kept prefix and
  // the index holds duplicates.
  std::string random_name() {
    static const char* const kStems[] = {"", "a", "aa", "ab", "b", "zz"};
    std::string name = kStems[rng_() % 6];
    if (rng_() % 3 == 0) name += std::string(std::min<uint32_t>(name_length_ / 2, 40), 'm');
    const std::size_t tail = rng_() % 4;
    for (std::size_t i = 0; i < tail; ++i) name += "\0ab\xff"[rng_() % 4];
    return name.substr(0, name_length_);
  }
  std::string key_of_name(const std::string& name) { return as_string(table_.name_key(name)); }

  void insert_random() {
    const std::string name = random_name();
    const RowId row = table_.rows.insert(table_.record(next_id_++, name)).value();
    const std::string key = key_of_name(name);
    ASSERT_TRUE(index_.insert(bytes(key), row).is_ok());
    model_.emplace(key, row);
    key_by_row_[row] = key;
  }

  // Returns the entry erased, if any.
  std::optional<Entry> erase_random() {
    if (model_.empty()) return std::nullopt;
    auto it = model_.lower_bound(Entry{key_of_name(random_name()), 0});
    if (it == model_.end()) it = model_.begin();
    const Entry e = *it;
    const Status s = index_.erase(bytes(e.first), e.second);  // the index first, then the row
    EXPECT_TRUE(s.is_ok()) << s.message();
    table_.rows.erase(e.second);
    model_.erase(it);
    key_by_row_.erase(e.second);
    return e;
  }

  Bounds random_bounds() {
    Bounds b;
    const uint64_t kind = rng_() % 5;
    if (kind == 0) return b;
    if (kind == 1) {  // equality
      b.has_lower = b.has_upper = b.lower_inclusive = b.upper_inclusive = true;
      b.lower = b.upper = key_of_name(random_name());
      return b;
    }
    b.has_lower = kind != 2;
    b.has_upper = kind != 3;
    b.lower_inclusive = rng_() % 2 == 0;
    b.upper_inclusive = rng_() % 2 == 0;
    b.lower = key_of_name(random_name());
    b.upper = key_of_name(random_name());
    if (b.has_lower && b.has_upper && b.upper < b.lower) std::swap(b.lower, b.upper);
    return b;
  }

  // Scans in batches, changing the index between batches when asked, and
  // checks: order, bounds, no row twice, every entry present throughout returned.
  void scan_and_check(const Bounds& bounds, bool change_between_batches) {
    const std::set<Entry> at_start = model_;
    std::set<Entry> erased;
    std::vector<Entry> returned;
    OrderedScanCursor cursor;
    bounds.apply(cursor);
    std::vector<RowId> out(1 + rng_() % 50);
    while (!cursor.done()) {
      const std::size_t n = index_.scan_batch(cursor, out);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(key_by_row_.count(out[i])) << "returned a row not in the index";
        const Entry e{key_by_row_[out[i]], out[i]};
        ASSERT_TRUE(bounds.contains(e.first)) << "returned a row outside the bounds";
        if (!returned.empty()) {
          ASSERT_LT(returned.back(), e) << "out of order or twice";
        }
        returned.push_back(e);
      }
      if (n < out.size()) {
        ASSERT_TRUE(cursor.done());
      }
      if (!change_between_batches) continue;
      for (int k = 0; k < 3; ++k) {
        if (!model_.empty() && rng_() % 2 == 0) {
          if (const std::optional<Entry> e = erase_random()) erased.insert(*e);
        } else {
          insert_random();
        }
      }
    }
    const std::set<Entry> got(returned.begin(), returned.end());
    for (const Entry& e : at_start) {
      if (bounds.contains(e.first) && !erased.count(e)) {
        ASSERT_TRUE(got.count(e)) << "missed a row present throughout";
      }
    }
    if (!change_between_batches) {
      std::size_t expected = 0;
      for (const Entry& e : model_) expected += bounds.contains(e.first) ? 1 : 0;
      ASSERT_EQ(returned.size(), expected);
    }
  }

  static std::span<const std::byte> bytes(const std::string& s) {
    return std::as_bytes(std::span<const char>(s.data(), s.size()));
  }

 private:
  std::unique_ptr<PagePool> pool_;
  TestTable table_;
  OrderedIndex index_;
  std::mt19937_64 rng_;
  uint32_t name_length_;
  uint64_t next_id_ = 0;
  std::set<Entry> model_;
  std::unordered_map<RowId, std::string> key_by_row_;
};

class OrderedIndexModelTest : public ::testing::TestWithParam<Config> {};

TEST_P(OrderedIndexModelTest, RandomInsertsAndErasesKeepTheInvariants) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Harness h(GetParam(), seed);
  uint32_t max_height = 0;
  for (int step = 0; step < 60000; ++step) {
    // Waves of growth and shrinkage, so nodes split, borrow and merge.
    const bool growing = (step / 10000) % 2 == 0;
    if (h.rng()() % 100 < (growing ? 70u : 30u)) {
      h.insert_random();
    } else {
      h.erase_random();
    }
    ASSERT_EQ(h.index().entry_count(), h.model().size());
    max_height = std::max(max_height, h.index().height());
    if (step % 500 == 0) {
      const Status s = h.index().check_invariants();
      ASSERT_TRUE(s.is_ok()) << "step " << step << ": " << s.message();
    }
    if (step % 5000 == 0) h.scan_and_check(Bounds{}, false);
  }
  ASSERT_TRUE(h.index().check_invariants().is_ok()) << h.index().check_invariants().message();
  if (h.index().leaf_capacity() < 32) {
    EXPECT_GE(max_height, 3u) << "should reach internal splits and merges";
  }
  while (!h.model().empty()) h.erase_random();
  ASSERT_TRUE(h.index().check_invariants().is_ok()) << h.index().check_invariants().message();
  EXPECT_EQ(h.index().height(), 1u);
  EXPECT_EQ(h.index().node_count(), 1u);
}

TEST_P(OrderedIndexModelTest, BoundedScansMatchTheModel) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Harness h(GetParam(), seed);
  for (int i = 0; i < 4000; ++i) h.insert_random();
  for (int scan = 0; scan < 300; ++scan) h.scan_and_check(h.random_bounds(), false);
}

TEST_P(OrderedIndexModelTest, ScansResumeAcrossChangesBetweenBatches) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Harness h(GetParam(), seed);
  for (int i = 0; i < 3000; ++i) h.insert_random();
  for (int scan = 0; scan < 100; ++scan) h.scan_and_check(h.random_bounds(), true);
  ASSERT_TRUE(h.index().check_invariants().is_ok()) << h.index().check_invariants().message();
}

INSTANTIATE_TEST_SUITE_P(KeyShapes, OrderedIndexModelTest,
                         ::testing::Values(Config{100, 256, "whole keys in wide entries (15-entry nodes)"},
                                           Config{100, 12, "12-byte prefixes, ties read the rows"},
                                           Config{400, 256, "256-byte prefixes of 802-byte keys"}),
                         [](const ::testing::TestParamInfo<Config>& param_info) {
                           return std::string(param_info.param.inline_bytes == 256 ? "Wide" : "Narrow") +
                                  std::to_string(param_info.param.name_length);
                         });

std::vector<std::byte> u64_key(uint64_t v) {
  std::vector<std::byte> k(8);
  for (int i = 0; i < 8; ++i) k[i] = static_cast<std::byte>(v >> (56 - 8 * i));  // the codec's big-endian form
  return k;
}

std::vector<RowId> scan_everything(const OrderedIndex& index, OrderedScanCursor cursor, std::size_t batch) {
  std::vector<RowId> all, out(batch);
  while (!cursor.done()) {
    const std::size_t n = index.scan_batch(cursor, out);
    all.insert(all.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return all;
}

TEST(OrderedIndexTest, IntegerKeysLiveInTheTreeWithoutAKeySource) {
  auto pool = make_pool(64 << 20);
  OrderedIndex index(*pool, 8, nullptr);
  EXPECT_TRUE(index.keys_inline());
  EXPECT_EQ(index.leaf_capacity(), (OrderedIndex::kNodeBytes - 8) / 12);
  constexpr uint64_t kKeys = 200000;
  for (uint64_t v = 0; v < kKeys; ++v) {
    // Row ids in reverse so (key, row) order differs from row order.
    ASSERT_TRUE(index.insert(u64_key(v), static_cast<RowId>(kKeys - v)).is_ok());
  }
  ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  EXPECT_EQ(index.height(), 3u);
  std::printf("ordered index, 200000 ascending uint64 keys: %.1f bytes per entry, %llu nodes\n",
              static_cast<double>(index.memory_bytes()) / kKeys, static_cast<unsigned long long>(index.node_count()));
  const std::vector<RowId> all = scan_everything(index, OrderedScanCursor{}, 997);
  ASSERT_EQ(all.size(), kKeys);
  for (uint64_t v = 0; v < kKeys; ++v) ASSERT_EQ(all[v], kKeys - v);
  std::mt19937_64 rng(1);
  for (uint64_t v = 0; v < kKeys; ++v) {
    if (rng() % 2 == 0) {
      ASSERT_TRUE(index.erase(u64_key(v), static_cast<RowId>(kKeys - v)).is_ok());
    }
  }
  ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  OrderedScanCursor range;
  range.set_lower(u64_key(1000), false);
  range.set_upper(u64_key(2000), true);
  rng.seed(1);
  std::vector<RowId> expected;
  for (uint64_t v = 0; v < kKeys; ++v) {
    const bool erased = rng() % 2 == 0;
    if (!erased && v > 1000 && v <= 2000) expected.push_back(static_cast<RowId>(kKeys - v));
  }
  EXPECT_EQ(scan_everything(index, range, 7), expected);
}

TEST(OrderedIndexTest, EqualityAndRangesOnALeadingColumn) {
  auto pool = make_pool(16 << 20);
  TableDef def;
  def.name = "p";
  def.columns = {{"a", ColumnType::kInt32, 0, true},
                 {"b", ColumnType::kVarChar, 10, false},
                 {"id", ColumnType::kUint64, 0, false}};
  def.primary_key = {2};
  def.indexes = {{"ab", IndexKind::kOrdered, {0, 1}, 0}};
  const RowLayout layout = RowLayout::create(def).value();
  const KeyCodec codec = KeyCodec::for_index(def, def.indexes[0]);
  RowStore rows(*pool, layout.record_bytes());
  RowKeySource keys(rows, layout, codec);
  OrderedIndex index(*pool, codec.max_encoded_bytes(), &keys);
  std::multimap<std::pair<int64_t, std::string>, RowId> model;  // a = INT64_MIN stands for NULL
  std::mt19937_64 rng(test_seed());
  for (uint64_t id = 0; id < 3000; ++id) {
    const bool null_a = rng() % 10 == 0;
    const int32_t a = static_cast<int32_t>(rng() % 9) - 4;
    const std::string b(rng() % 4, static_cast<char>('a' + rng() % 3));
    std::vector<std::byte> record(layout.record_bytes());
    layout.init_record(record);
    ASSERT_TRUE(layout.set(record, 0, null_a ? ValueRef::null() : ValueRef::of(a)).is_ok());
    ASSERT_TRUE(layout.set(record, 1, ValueRef::of_string(b)).is_ok());
    ASSERT_TRUE(layout.set(record, 2, ValueRef::of(id)).is_ok());
    const RowId row = rows.insert(record).value();
    std::vector<std::byte> key(codec.max_encoded_bytes());
    key.resize(codec.encode_record(layout, record, key));
    ASSERT_TRUE(index.insert(key, row).is_ok());
    model.emplace(std::make_pair(null_a ? INT64_MIN : a, b), row);
  }
  const auto prefix = [&](std::optional<int32_t> a) {
    std::vector<std::byte> key(codec.max_encoded_bytes());
    const ValueRef v[] = {a ? ValueRef::of(*a) : ValueRef::null()};
    key.resize(codec.encode(v, key).value());
    return key;
  };
  const auto rows_where = [&](auto predicate) {
    std::vector<RowId> r;
    for (const auto& [k, row] : model) {
      if (predicate(k.first)) r.push_back(row);
    }
    return r;
  };
  for (int32_t a = -5; a <= 5; ++a) {
    OrderedScanCursor eq;
    const std::vector<std::byte> p = prefix(a);
    eq.set_equal(p);
    // Same a: ordered by b, then RowId (rows were inserted in RowId order).
    EXPECT_EQ(scan_everything(index, eq, 5), rows_where([&](int64_t x) { return x == a; })) << "a = " << a;
  }
  OrderedScanCursor nulls;
  const std::vector<std::byte> null_prefix = prefix(std::nullopt);
  nulls.set_equal(null_prefix);
  EXPECT_EQ(scan_everything(index, nulls, 3), rows_where([](int64_t x) { return x == INT64_MIN; }));
  OrderedScanCursor range;
  const std::vector<std::byte> low = prefix(-2), high = prefix(1);
  range.set_lower(low, false);
  range.set_upper(high, true);
  EXPECT_EQ(scan_everything(index, range, 64), rows_where([](int64_t x) { return x > -2 && x <= 1; }));
  range.set_lower(low, true);
  range.set_upper(high, false);
  EXPECT_EQ(scan_everything(index, range, 64), rows_where([](int64_t x) { return x >= -2 && x < 1; }));
  OrderedScanCursor above_null;
  above_null.set_lower(null_prefix, false);
  EXPECT_EQ(scan_everything(index, above_null, 100), rows_where([](int64_t x) { return x != INT64_MIN; }));
}

TEST(OrderedIndexTest, DuplicatesAndMissingEntriesAreStatuses) {
  auto pool = make_pool(4 << 20);
  OrderedIndex index(*pool, 8, nullptr);
  ASSERT_TRUE(index.insert(u64_key(5), 1).is_ok());
  ASSERT_TRUE(index.insert(u64_key(5), 2).is_ok());  // same key, another row: fine
  const Status again = index.insert(u64_key(5), 1);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "row 1 is already in the ordered index under this key");
  const Status missing = index.erase(u64_key(6), 1);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "row 1 is not in the ordered index under this key");
  OrderedScanCursor eq;
  const std::vector<std::byte> five = u64_key(5);
  eq.set_equal(five);
  EXPECT_EQ(scan_everything(index, eq, 1), (std::vector<RowId>{1, 2}));
}

// A full batch that takes the last entry within the bounds ends the scan
// (done()), across leaves and with entries past the upper bound, so that the
// caller needs no further, empty, batch to learn it.
TEST(OrderedIndexTest, AFullBatchThatTakesTheLastEntryEndsTheScan) {
  auto pool = make_pool(16 << 20);
  OrderedIndex index(*pool, 8, nullptr);
  constexpr uint64_t kEntries = 3000;  // several leaves
  for (uint64_t k = 0; k < kEntries; ++k) ASSERT_TRUE(index.insert(u64_key(k), static_cast<RowId>(k + 1)).is_ok());
  std::vector<RowId> out(kEntries);
  OrderedScanCursor whole;
  EXPECT_EQ(index.scan_batch(whole, out), kEntries);
  EXPECT_TRUE(whole.done());
  OrderedScanCursor bounded;
  bounded.set_upper(u64_key(1999), true);
  out.resize(1000);
  EXPECT_EQ(index.scan_batch(bounded, out), 1000u);
  EXPECT_FALSE(bounded.done());
  EXPECT_EQ(index.scan_batch(bounded, out), 1000u);
  EXPECT_EQ(out.back(), 2000u);  // key 1999
  EXPECT_TRUE(bounded.done());
  OrderedScanCursor short_of_it;
  out.resize(kEntries - 1);
  EXPECT_EQ(index.scan_batch(short_of_it, out), kEntries - 1);
  EXPECT_FALSE(short_of_it.done());
  EXPECT_EQ(index.scan_batch(short_of_it, out), 1u);
  EXPECT_TRUE(short_of_it.done());
}

TEST(OrderedIndexTest, ExhaustionLeavesTheTreeIntact) {
  auto pool = make_pool(6 * PagePool::kPageBytes);
  OrderedIndex index(*pool, 8, nullptr);
  Status failure;
  uint64_t inserted = 0;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys;
  while (true) {
    const uint64_t v = rng();
    failure = index.insert(u64_key(v), static_cast<RowId>(inserted));
    if (!failure.is_ok()) break;
    keys.push_back(v);
    ++inserted;
  }
  EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(failure.message(), "DataMemory full: 6 of 6 pages in use (DataMemory=192K)");
  ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  EXPECT_EQ(index.entry_count(), inserted);
  EXPECT_EQ(scan_everything(index, OrderedScanCursor{}, 1000).size(), inserted);
  // Erasing needs no memory, and makes room again.
  for (uint64_t i = 0; i < inserted; i += 2) ASSERT_TRUE(index.erase(u64_key(keys[i]), static_cast<RowId>(i)).is_ok());
  ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  EXPECT_TRUE(index.insert(u64_key(rng()), static_cast<RowId>(inserted)).is_ok());
}

}  // namespace
}  // namespace fjord::engine::storage
