// LDM scans: full and ordered, bounds, filters, batch sizes, partitions over
// two LDM instances, rows changing between rounds, closing mid-scan, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <set>

#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

Item item_for(uint64_t id) {
  return Item{static_cast<int32_t>(id % 7) - 3, long_name(id % 50), static_cast<uint32_t>(id)};
}

std::vector<uint64_t> ids_of(const ScanResult& r) {
  std::vector<uint64_t> ids;
  for (const RowValues& row : r.rows) ids.push_back(int_of<uint64_t>(row.at(kId)));
  return ids;
}

std::vector<uint64_t> sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint64_t> range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

void fill(Db& db, uint64_t from, uint64_t to) {
  const TxId t = db.fresh_tx();
  for (uint64_t id = from; id < to; ++id) ASSERT_TRUE(db.insert(t, id, item_for(id)).ok);
  db.client.commit(t);
}

ScanSpec ordered_on(uint32_t index_id, uint32_t batch_rows = 64) {
  ScanSpec s;
  s.ordered = true;
  s.index_id = index_id;
  s.batch_rows = batch_rows;
  return s;
}

TEST(LdmScanTest, FullAndOrderedScansReturnCommittedRowsOnly) {
  Db db;
  fill(db, 1, 21);
  const TxId t = db.fresh_tx();
  ASSERT_TRUE(db.update(t, 1, Values().i32(kQty, 100).str(kName, "zzz")).ok);
  ASSERT_TRUE(db.remove(t, 2).ok);
  ASSERT_TRUE(db.insert(t, 21, item_for(21)).ok);
  for (const ScanSpec& spec : {ScanSpec{}, ordered_on(kByQty), ordered_on(kByName)}) {
    const ScanResult r = scan_table(db.h, db.table, spec);
    EXPECT_EQ(r.error, ErrorCode::kNone);
    EXPECT_EQ(sorted(ids_of(r)), range(1, 21));
    for (const RowValues& row : r.rows)
      if (int_of<uint64_t>(row.at(kId)) == 1) {
        EXPECT_EQ(item_of(row), item_for(1)) << "the committed version";
      }
  }
  db.client.commit(t);
  std::vector<uint64_t> expected = range(1, 22);
  expected.erase(expected.begin() + 1);  // 2
  for (const ScanSpec& spec : {ScanSpec{}, ordered_on(kByQty), ordered_on(kByName)}) {
    const ScanResult r = scan_table(db.h, db.table, spec);
    EXPECT_EQ(sorted(ids_of(r)), expected);
    for (const RowValues& row : r.rows)
      if (int_of<uint64_t>(row.at(kId)) == 1) {
        EXPECT_EQ(item_of(row).qty, 100);
      }
  }
}

TEST(LdmScanTest, OrderedScansComeInKeyOrderWithinAPartition) {
  Db db;
  fill(db, 0, 300);
  for (uint32_t p = 0; p < db.table.partitions; ++p) {
    const ScanResult by_qty = scan_partition(db.h, db.table, p, ordered_on(kByQty, 7));
    for (std::size_t i = 1; i < by_qty.rows.size(); ++i)
      EXPECT_LE(int_of<int32_t>(by_qty.rows[i - 1].at(kQty)), int_of<int32_t>(by_qty.rows[i].at(kQty)));
    const ScanResult by_name = scan_partition(db.h, db.table, p, ordered_on(kByName, 11));
    for (std::size_t i = 1; i < by_name.rows.size(); ++i)
      EXPECT_LE(str_of(by_name.rows[i - 1].at(kName)), str_of(by_name.rows[i].at(kName)));
    EXPECT_EQ(by_qty.rows.size(), by_name.rows.size());
  }
}

// events: k UINT32 key, grp INT32, seq INT64, one partition; an ordered
// index on (grp, seq) for bounds on one and two columns.
constexpr uint16_t kK = 0, kGrp = 1, kSeq = 2;
constexpr uint32_t kByGrpSeq = 31;
TableDef events_table() {
  TableDef t;
  t.name = "events";
  t.table_id = 12;
  t.version = 1;
  t.partitions = 1;
  t.columns = {column("k", ColumnType::kUint32), column("grp", ColumnType::kInt32), column("seq", ColumnType::kInt64)};
  t.primary_key = {kK};
  t.indexes = {IndexDef{"by_grp_seq", IndexKind::kOrdered, {kGrp, kSeq}, kByGrpSeq}};
  return t;
}

TEST(LdmScanTest, BoundsInclusiveExclusiveAndEqualityPrefixes) {
  Db db({}, events_table());
  struct Event {
    uint32_t k;
    int32_t grp;
    int64_t seq;
  };
  std::vector<Event> events;
  const TxId t = db.fresh_tx();
  uint32_t k = 0;
  for (int32_t grp = -3; grp <= 6; ++grp)
    for (int64_t seq = -2; seq <= 12; seq += 2) {
      events.push_back({k, grp, seq});
      ASSERT_TRUE(db.client
                      .run({OpType::kInsert, LockMode::kExclusive, t, Values().u32(kK, k),
                            Values().i32(kGrp, grp).i64(kSeq, seq)})
                      .ok);
      ++k;
    }
  db.client.commit(t);
  using Key = std::pair<int32_t, int64_t>;
  const auto check = [&](const char* what, const Bounds& b, const Values& lower, const Values& upper,
                         const std::function<bool(Key)>& in_range) {
    SCOPED_TRACE(what);
    ScanSpec spec = ordered_on(kByGrpSeq, 5);
    spec.bounds = bounds_section(b, lower, upper);
    const ScanResult r = scan_partition(db.h, db.table, 0, spec);
    ASSERT_EQ(r.error, ErrorCode::kNone);
    std::vector<Key> got, want;
    for (const RowValues& row : r.rows) got.emplace_back(int_of<int32_t>(row.at(kGrp)), int_of<int64_t>(row.at(kSeq)));
    for (const Event& e : events)
      if (in_range({e.grp, e.seq})) want.emplace_back(e.grp, e.seq);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);  // in key order
  };
  const auto b = [](bool has_lower, bool lower_inclusive, uint8_t lower_count, bool has_upper, bool upper_inclusive,
                    uint8_t upper_count) {
    return Bounds{has_lower, lower_inclusive, has_upper, upper_inclusive, lower_count, upper_count, {}, {}};
  };
  check("3 <= grp <= 5", b(true, true, 1, true, true, 1), Values().i32(kGrp, 3), Values().i32(kGrp, 5),
        [](Key x) { return x.first >= 3 && x.first <= 5; });
  check("3 < grp < 5", b(true, false, 1, true, false, 1), Values().i32(kGrp, 3), Values().i32(kGrp, 5),
        [](Key x) { return x.first > 3 && x.first < 5; });
  check("grp = -2 (equality prefix)", b(true, true, 1, true, true, 1), Values().i32(kGrp, -2), Values().i32(kGrp, -2),
        [](Key x) { return x.first == -2; });
  check("(grp, seq) = (4, 6)", b(true, true, 2, true, true, 2), Values().i32(kGrp, 4).i64(kSeq, 6),
        Values().i64(kSeq, 6).i32(kGrp, 4), [](Key x) {
          return x == Key{4, 6};
        });
  check("(0, 4) <= x < (2, -1)", b(true, true, 2, true, false, 2), Values().i32(kGrp, 0).i64(kSeq, 4),
        Values().i32(kGrp, 2).i64(kSeq, -1), [](Key x) {
          return x >= Key{0, 4} && x < Key{2, -1};
        });
  check("(1, 3) < x <= grp 2", b(true, false, 2, true, true, 1), Values().i32(kGrp, 1).i64(kSeq, 3),
        Values().i32(kGrp, 2), [](Key x) {
          return x > Key{1, 3} && x.first <= 2;
        });
  check("grp < 0", b(false, false, 0, true, false, 1), Values(), Values().i32(kGrp, 0),
        [](Key x) { return x.first < 0; });
  check("grp >= 5", b(true, true, 1, false, false, 0), Values().i32(kGrp, 5), Values(),
        [](Key x) { return x.first >= 5; });
  check("empty: 5 <= grp <= 4", b(true, true, 1, true, true, 1), Values().i32(kGrp, 5), Values().i32(kGrp, 4),
        [](Key) { return false; });
  check("no bounds", b(false, false, 0, false, false, 0), Values(), Values(), [](Key) { return true; });
}

// kinds: k UINT32 key and one column of each ordering kind, one partition.
// Ordered indexes on the unsigned and the signed 64-bit column, on a
// nullable VARCHAR (values sharing prefixes longer than the 32 bytes a tree
// entry keeps), on a nullable VARBINARY, and on (VARCHAR, INT32).
constexpr uint16_t kKindU = 1, kKindI = 2, kKindS = 3, kKindB = 4, kKindN = 5;
constexpr uint32_t kByU = 41, kByI = 42, kByS = 43, kByB = 44, kBySN = 45;
TableDef kinds_table() {
  TableDef t;
  t.name = "kinds";
  t.table_id = 14;
  t.version = 1;
  t.partitions = 1;
  t.columns = {column("k", ColumnType::kUint32),
               column("u", ColumnType::kUint64),
               column("i", ColumnType::kInt64),
               column("s", ColumnType::kVarChar, 60, true),
               column("b", ColumnType::kVarBinary, 60, true),
               column("n", ColumnType::kInt32, 0, true)};
  t.primary_key = {0};
  t.indexes = {
      IndexDef{"by_u", IndexKind::kOrdered, {kKindU}, kByU}, IndexDef{"by_i", IndexKind::kOrdered, {kKindI}, kByI},
      IndexDef{"by_s", IndexKind::kOrdered, {kKindS}, kByS}, IndexDef{"by_b", IndexKind::kOrdered, {kKindB}, kByB},
      IndexDef{"by_s_n", IndexKind::kOrdered, {kKindS, kKindN}, kBySN}};
  return t;
}

// A column value as the model orders it: NULL first, then its bytes in an
// order-equal form (integers big-endian, signed ones with the sign flipped;
// strings as they are: bytewise, a prefix first).
using Sortable = std::optional<std::string>;
Sortable sortable_u64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (56 - 8 * i));
  return out;
}
Sortable sortable_i64(int64_t v) { return sortable_u64(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63)); }
Sortable sortable_i32(int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v) ^ 0x80000000u;
  return std::string{static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8),
                     static_cast<char>(u)};
}

TEST(LdmScanTest, OrderedBoundsAgreeWithAModelForEveryKindOfColumn) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Db db({}, kinds_table());
  const std::string p(40, 'P');
  const std::vector<uint64_t> us = {
      0, 1, 12345, INT64_MAX, uint64_t{INT64_MAX} + 1, uint64_t{INT64_MAX} + 2, UINT64_MAX - 1, UINT64_MAX};
  const std::vector<int64_t> is = {INT64_MIN, INT64_MIN + 1, -(int64_t{1} << 40), -1, 0, 1, INT64_MAX};
  const std::vector<std::optional<std::string>> ss = {std::nullopt,
                                                      "",
                                                      std::string(1, '\0'),
                                                      "a",
                                                      std::string("a\0", 2),
                                                      std::string("a\0b", 3),
                                                      "ab",
                                                      p.substr(0, 31),
                                                      p.substr(0, 32),
                                                      p.substr(0, 33),
                                                      p,
                                                      p + std::string(1, '\0'),
                                                      p + "a",
                                                      p + "ab",
                                                      p + "b",
                                                      "\xff",
                                                      "\xff\xff"};
  const std::vector<std::optional<int32_t>> ns = {std::nullopt, INT32_MIN, -7, 0, 7, INT32_MAX};
  struct Row {
    uint32_t k;
    uint64_t u;
    int64_t i;
    std::optional<std::string> s, b;
    std::optional<int32_t> n;
  };
  std::vector<Row> rows;
  const TxId tx = db.fresh_tx();
  for (uint32_t k = 0; k < 150; ++k) {
    Row r{k,
          us[rng() % us.size()],
          is[rng() % is.size()],
          ss[rng() % ss.size()],
          ss[rng() % ss.size()],
          ns[rng() % ns.size()]};
    Values v;
    v.u64(kKindU, r.u).i64(kKindI, r.i);
    r.s ? v.str(kKindS, *r.s) : v.null(kKindS);
    r.b ? v.str(kKindB, *r.b) : v.null(kKindB);
    r.n ? v.i32(kKindN, *r.n) : v.null(kKindN);
    ASSERT_TRUE(db.client.run({OpType::kInsert, LockMode::kExclusive, tx, Values().u32(0, k), v}).ok);
    rows.push_back(r);
  }
  db.client.commit(tx);
  // One index column: its model value of a row, a bound value (Values), and
  // a way to pick a bound.
  struct Column {
    uint16_t position;
    std::function<Sortable(const Row&)> of;
    std::function<std::pair<Sortable, Values>()> pick;  // a bound value: sortable and as sent
  };
  const auto opt_str = [](const std::optional<std::string>& s) -> Sortable { return s; };
  const Column u{kKindU, [](const Row& r) { return sortable_u64(r.u); },
                 [&] {
                   const uint64_t v = us[rng() % us.size()];
                   return std::pair{sortable_u64(v), Values().u64(kKindU, v)};
                 }};
  const Column i{kKindI, [](const Row& r) { return sortable_i64(r.i); },
                 [&] {
                   const int64_t v = is[rng() % is.size()];
                   return std::pair{sortable_i64(v), Values().i64(kKindI, v)};
                 }};
  const auto pick_string = [&](uint16_t position) {
    const std::optional<std::string> v = ss[rng() % ss.size()];
    return std::pair{opt_str(v), v ? Values().str(position, *v) : Values().null(position)};
  };
  const Column s{kKindS, [&](const Row& r) { return opt_str(r.s); }, [&] { return pick_string(kKindS); }};
  const Column b{kKindB, [&](const Row& r) { return opt_str(r.b); }, [&] { return pick_string(kKindB); }};
  const Column n{
      kKindN, [](const Row& r) { return r.n ? sortable_i32(*r.n) : Sortable(); },
      [&] {
        const std::optional<int32_t> v = ns[rng() % ns.size()];
        return std::pair{v ? sortable_i32(*v) : Sortable(), v ? Values().i32(kKindN, *v) : Values().null(kKindN)};
      }};
  struct Index {
    uint32_t id;
    std::vector<const Column*> columns;
  };
  for (const Index& index :
       {Index{kByU, {&u}}, Index{kByI, {&i}}, Index{kByS, {&s}}, Index{kByB, {&b}}, Index{kBySN, {&s, &n}}}) {
    SCOPED_TRACE("index " + std::to_string(index.id));
    using Key = std::vector<Sortable>;
    const auto key_of = [&](const Row& r) {
      Key key;
      for (const Column* c : index.columns) key.push_back(c->of(r));
      return key;
    };
    // The first bound.size() columns of `key` against `bound`.
    const auto compare = [](const Key& key, const Key& bound) {
      for (std::size_t c = 0; c < bound.size(); ++c)
        if (key[c] != bound[c]) return key[c] < bound[c] ? -1 : 1;
      return 0;
    };
    for (int round = 0; round < 120; ++round) {
      Bounds bounds{};
      Key lower, upper;
      Values lower_values, upper_values;
      const auto make = [&](Key& key, Values& values) {
        const std::size_t count = 1 + rng() % index.columns.size();
        for (std::size_t c = 0; c < count; ++c) {
          auto [sortable, value] = index.columns[c]->pick();
          key.push_back(sortable);
          values.raw(value.bytes());
        }
        return static_cast<uint8_t>(count);
      };
      bounds.has_lower = rng() % 4 != 0;
      bounds.has_upper = rng() % 4 != 0;
      if (bounds.has_lower) {
        bounds.lower_inclusive = rng() % 2;
        bounds.lower_count = make(lower, lower_values);
      }
      if (bounds.has_upper) {
        bounds.upper_inclusive = rng() % 2;
        bounds.upper_count = make(upper, upper_values);
      }
      std::vector<Key> want;
      std::set<uint32_t> want_ids;
      for (const Row& r : rows) {
        const Key key = key_of(r);
        if (bounds.has_lower && compare(key, lower) < (bounds.lower_inclusive ? 0 : 1)) continue;
        if (bounds.has_upper && compare(key, upper) > (bounds.upper_inclusive ? 0 : -1)) continue;
        want.push_back(key);
        want_ids.insert(r.k);
      }
      std::sort(want.begin(), want.end());
      ScanSpec spec = ordered_on(index.id, 1 + static_cast<uint32_t>(rng() % 4));
      spec.bounds = bounds_section(bounds, lower_values, upper_values);
      const ScanResult result = scan_partition(db.h, db.table, 0, spec);
      ASSERT_EQ(result.error, ErrorCode::kNone);
      std::vector<Key> got;
      std::set<uint32_t> got_ids;
      for (const RowValues& row : result.rows) {
        const uint32_t k = int_of<uint32_t>(row.at(0));
        got_ids.insert(k);
        got.push_back(key_of(rows.at(k)));
      }
      ASSERT_EQ(got, want) << "round " << round << ": keys in the index's order within the bounds";
      ASSERT_EQ(got_ids, want_ids) << "round " << round;
    }
  }
}

TEST(LdmScanTest, FiltersAgreeWithAModelForEveryTypeAndOperator) {
  Db db({}, kinds_table());
  const std::vector<uint64_t> us = {0, 1, INT64_MAX, uint64_t{INT64_MAX} + 1, UINT64_MAX};
  const std::vector<int64_t> is = {INT64_MIN, -1, 0, 1, INT64_MAX};
  const std::vector<std::optional<std::string>> ss = {std::nullopt, "", std::string(1, '\0'), "a", "ab", "b", "\xff"};
  const std::vector<std::optional<int32_t>> ns = {std::nullopt, INT32_MIN, -1, 0, 1, INT32_MAX};
  // One row per value of each column (the others cycle), model values kept.
  std::vector<std::array<Sortable, 6>> model;  // by k; [0] unused
  const TxId tx = db.fresh_tx();
  for (uint32_t k = 0; k < 30; ++k) {
    const uint64_t u = us[k % us.size()];
    const int64_t i = is[k % is.size()];
    const std::optional<std::string> s = ss[k % ss.size()], b = ss[(k + 3) % ss.size()];
    const std::optional<int32_t> n = ns[k % ns.size()];
    Values v;
    v.u64(kKindU, u).i64(kKindI, i);
    s ? v.str(kKindS, *s) : v.null(kKindS);
    b ? v.str(kKindB, *b) : v.null(kKindB);
    n ? v.i32(kKindN, *n) : v.null(kKindN);
    ASSERT_TRUE(db.client.run({OpType::kInsert, LockMode::kExclusive, tx, Values().u32(0, k), v}).ok);
    model.push_back({Sortable(), sortable_u64(u), sortable_i64(i), s, b, n ? sortable_i32(*n) : Sortable()});
  }
  db.client.commit(tx);
  struct Constant {
    uint16_t column;
    Sortable sortable;
    std::vector<std::byte> bytes;  // as sent (little-endian integers)
  };
  std::vector<Constant> constants;
  for (uint64_t u : us) constants.push_back({kKindU, sortable_u64(u), bytes_of_int(u)});
  for (int64_t i : is) constants.push_back({kKindI, sortable_i64(i), bytes_of_int(i)});
  for (const auto& s : ss)
    for (uint16_t c : {kKindS, kKindB}) constants.push_back({c, s, s ? bytes_of(*s) : std::vector<std::byte>()});
  for (const auto& n : ns)
    constants.push_back({kKindN, n ? sortable_i32(*n) : Sortable(), n ? bytes_of_int(*n) : std::vector<std::byte>()});
  const auto holds = [](FilterOp op, const Sortable& value, const Sortable& constant) {
    if (op == FilterOp::kIsNull) return !value.has_value();
    if (op == FilterOp::kIsNotNull) return value.has_value();
    if (!value || !constant) return false;  // NULL compares false
    switch (op) {
      case FilterOp::kEq: return *value == *constant;
      case FilterOp::kNe: return *value != *constant;
      case FilterOp::kLt: return *value < *constant;
      case FilterOp::kLe: return *value <= *constant;
      case FilterOp::kGt: return *value > *constant;
      case FilterOp::kGe: return *value >= *constant;
      default: return false;
    }
  };
  for (const Constant& c : constants)
    for (FilterOp op : {FilterOp::kEq, FilterOp::kNe, FilterOp::kLt, FilterOp::kLe, FilterOp::kGt, FilterOp::kGe,
                        FilterOp::kIsNull, FilterOp::kIsNotNull}) {
      SCOPED_TRACE("column " + std::to_string(c.column) + " op " + std::to_string(static_cast<int>(op)) +
                   (c.sortable ? "" : " NULL"));
      ScanSpec spec;
      spec.batch_rows = 7;
      spec.filter = Filter().add(c.column, op, c.bytes, !c.sortable.has_value()).bytes();
      const ScanResult r = scan_table(db.h, db.table, spec);
      ASSERT_EQ(r.error, ErrorCode::kNone);
      std::vector<uint64_t> got, want;
      for (const RowValues& row : r.rows) got.push_back(int_of<uint32_t>(row.at(0)));
      for (uint32_t k = 0; k < model.size(); ++k)
        if (holds(op, model[k][c.column], c.sortable)) want.push_back(k);
      EXPECT_EQ(sorted(got), want);
    }
}

TEST(LdmScanTest, FiltersCompareByTypeAndNullComparesFalse) {
  Db db;
  const std::vector<std::pair<uint64_t, Item>> rows = {
      {1, {-5, "apple", 10}}, {2, {3, "banana", std::nullopt}},          {3, {0, std::nullopt, 7}}, {4, {12, "b", 7}},
      {5, {-1, "", 5}},       {6, {2147483647, "apple!", std::nullopt}},
  };
  const TxId t = db.fresh_tx();
  for (const auto& [id, item] : rows) ASSERT_TRUE(db.insert(t, id, item).ok);
  db.client.commit(t);
  const auto check = [&](const char* what, const Filter& f, std::vector<uint64_t> want) {
    SCOPED_TRACE(what);
    ScanSpec spec;
    spec.filter = f.bytes();
    spec.batch_rows = 2;
    const ScanResult r = scan_table(db.h, db.table, spec);
    EXPECT_EQ(r.error, ErrorCode::kNone);
    EXPECT_EQ(sorted(ids_of(r)), want);
  };
  check("qty > 0", Filter().add(kQty, FilterOp::kGt, bytes_of_int<int32_t>(0)), {2, 4, 6});
  check("qty <= -1 (signed)", Filter().add(kQty, FilterOp::kLe, bytes_of_int<int32_t>(-1)), {1, 5});
  check("qty = 0", Filter().add(kQty, FilterOp::kEq, bytes_of_int<int32_t>(0)), {3});
  check("qty != 0", Filter().add(kQty, FilterOp::kNe, bytes_of_int<int32_t>(0)), {1, 2, 4, 5, 6});
  check("name IS NULL", Filter().add(kName, FilterOp::kIsNull), {3});
  check("name IS NOT NULL", Filter().add(kName, FilterOp::kIsNotNull), {1, 2, 4, 5, 6});
  check("name = apple", Filter().add(kName, FilterOp::kEq, bytes_of("apple")), {1});
  check("name < b (bytewise)", Filter().add(kName, FilterOp::kLt, bytes_of("b")), {1, 5, 6});
  check("name >= b", Filter().add(kName, FilterOp::kGe, bytes_of("b")), {2, 4});
  check("code != 7 (NULL is not !=)", Filter().add(kCode, FilterOp::kNe, bytes_of_int<uint32_t>(7)), {1, 5});
  check("code = NULL matches nothing", Filter().add(kCode, FilterOp::kEq, {}, true), {});
  check(
      "code = 7 AND qty > 0",
      Filter().add(kCode, FilterOp::kEq, bytes_of_int<uint32_t>(7)).add(kQty, FilterOp::kGt, bytes_of_int<int32_t>(0)),
      {4});
  check("no filter", Filter(), {1, 2, 3, 4, 5, 6});
  // A filter on an ordered scan, with bounds.
  ScanSpec spec = ordered_on(kByQty, 1);
  spec.bounds = bounds_section(Bounds{true, true, false, false, 1, 0, {}, {}}, Values().i32(kQty, -1), Values());
  spec.filter = Filter().add(kName, FilterOp::kIsNotNull).bytes();
  EXPECT_EQ(sorted(ids_of(scan_table(db.h, db.table, spec))), (std::vector<uint64_t>{2, 4, 5, 6}));
}

TEST(LdmScanTest, ColumnListsChooseTheValuesSent) {
  Db db;
  fill(db, 0, 10);
  ScanSpec spec;
  spec.columns = column_list({kCode, kId});
  const ScanResult r = scan_table(db.h, db.table, spec);
  ASSERT_EQ(r.rows.size(), 10u);
  for (const RowValues& row : r.rows) {
    ASSERT_EQ(row.size(), 2u);
    EXPECT_EQ(int_of<uint32_t>(row.at(kCode)), int_of<uint64_t>(row.at(kId)));
  }
}

TEST(LdmScanTest, BatchesOfManySizesReturnEveryRowOnce) {
  Db db;
  fill(db, 0, 500);
  for (uint32_t batch : {1u, 2u, 3u, 7u, 64u, 499u, 500u, kMaxScanBatchRows}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    ScanSpec full;
    full.batch_rows = batch;
    const ScanResult a = scan_table(db.h, db.table, full);
    EXPECT_EQ(sorted(ids_of(a)), range(0, 500));
    if (batch == 1) {
      EXPECT_GE(a.rounds, 500u);
    }
    const ScanResult b = scan_table(db.h, db.table, ordered_on(kByName, batch));
    EXPECT_EQ(sorted(ids_of(b)), range(0, 500));
  }
  EXPECT_EQ(db.h.ldm(0).stats().scans_open, 0u);
}

// A round that fills exactly at the partition's last row (or an ordered
// scan's last entry within its bounds) reports the partition finished, so
// the scan takes no further, empty, round; the LDM counts the rounds
// (scan_rounds): the scan needs no further round trip to learn that it is
// done. 130 rows: a round of them takes three batches from the cursor
// (kScanFetchRows).
TEST(LdmScanTest, ARoundThatEndsAtThePartitionsLastRowFinishesIt) {
  Db db({}, items_table(1));
  fill(db, 0, 130);
  const auto check = [&](const std::string& what, const ScanSpec& spec, uint32_t rows, uint32_t rounds) {
    SCOPED_TRACE(what);
    const uint64_t before = db.h.ldm(0).stats().scan_rounds;
    const ScanResult r = scan_partition(db.h, db.table, 0, spec);
    EXPECT_EQ(r.error, ErrorCode::kNone);
    EXPECT_EQ(r.rows.size(), rows);
    EXPECT_EQ(r.rounds, rounds);
    EXPECT_EQ(db.h.ldm(0).stats().scan_rounds - before, rounds);
  };
  ScanSpec full;
  full.batch_rows = 130;
  check("full, a batch of all the rows", full, 130, 1);
  full.batch_rows = 65;
  check("full, two full batches", full, 130, 2);
  full.batch_rows = 129;
  check("full, one row left for a second round", full, 130, 2);
  full.batch_rows = 131;
  check("full, room to spare", full, 130, 1);
  check("ordered, a batch of all the rows", ordered_on(kByName, 130), 130, 1);
  check("ordered, two full batches", ordered_on(kByName, 65), 130, 2);
  // qty = id % 7 - 3: qty <= 0 for ids 0..3 mod 7. Entries past the upper
  // bound do not count as more.
  uint32_t at_most_zero = 0;
  for (uint64_t id = 0; id < 130; ++id) at_most_zero += item_for(id).qty <= 0;
  ScanSpec bounded = ordered_on(kByQty, at_most_zero);
  bounded.bounds = bounds_section(Bounds{false, false, true, true, 0, 1, {}, {}}, Values(), Values().i32(kQty, 0));
  check("ordered, a batch of all the rows within the bounds", bounded, at_most_zero, 1);
  EXPECT_EQ(db.h.ldm(0).stats().scans_open, 0u);
}

TEST(LdmScanTest, ManyPartitionsOverTwoLdmInstancesOnTwoThreads) {
  HarnessOptions options;
  options.ldm_threads = 2;
  options.spintime_us = 200;  // three busy threads and the test's, on two cores
  Db db(options, items_table(16));
  fill(db, 0, 400);
  EXPECT_GT(db.h.ldm(0).stats().committed_rows, 0u);
  EXPECT_GT(db.h.ldm(1).stats().committed_rows, 0u);
  EXPECT_EQ(db.h.ldm(0).stats().committed_rows + db.h.ldm(1).stats().committed_rows, 400u);
  EXPECT_EQ(sorted(ids_of(scan_table(db.h, db.table, {}))), range(0, 400));
  EXPECT_EQ(sorted(ids_of(scan_table(db.h, db.table, ordered_on(kByQty, 9)))), range(0, 400));
  // A partition asked of the wrong instance is refused.
  ScanFragReq r;
  r.tc_scan = 1;
  r.table_id = db.table.table_id;
  r.table_version = db.table.version;
  r.partition = 1;
  r.batch_rows = 10;
  r.api_node = kSelf;
  db.h.send(0, encode(r));
  const Captured c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kScanFragRef; });
  EXPECT_EQ(decode_scan_frag_ref(c.signal())->error, ErrorCode::kBadRequest);
}

// Rows inserted, deleted and updated between rounds (and pending changes
// of open transactions at round boundaries) never break a scan: a row
// present throughout is returned exactly once; others at most once.
void churn_during_scan(const ScanSpec& spec, bool update_qty, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Db db;
  fill(db, 0, 300);
  std::set<uint64_t> stable, live;  // stable: never deleted during the scan
  for (uint64_t id = 0; id < 300; ++id) (id % 3 == 0 ? stable : live).insert(id);
  uint64_t next_id = 1000;
  std::optional<TxId> open;  // a transaction left open across a round
  const auto between = [&](uint32_t) {
    if (open) {
      if (rng() % 2)
        db.client.commit(*open);
      else
        db.client.abort(*open);
      open.reset();
    }
    const TxId t = db.fresh_tx();
    for (int i = 0; i < 5 && !live.empty(); ++i) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      EXPECT_TRUE(db.remove(t, *it).ok);
      live.erase(it);
    }
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(db.insert(t, next_id++, item_for(rng())).ok);
    auto s = stable.begin();
    std::advance(s, static_cast<long>(rng() % stable.size()));
    const Values change = update_qty ? Values().i32(kQty, static_cast<int32_t>(rng() % 100))
                                     : Values().u32(kCode, static_cast<uint32_t>(rng()));
    EXPECT_TRUE(db.update(t, *s, change).ok);
    if (rng() % 3 == 0) {
      open = t;  // its changes stay pending through the next round
    } else {
      db.client.commit(t);
    }
    return true;
  };
  std::map<uint64_t, int> seen;
  for (uint32_t p = 0; p < db.table.partitions; ++p)
    for (uint64_t id : ids_of(scan_partition(db.h, db.table, p, spec, between))) ++seen[id];
  if (open) db.client.commit(*open);
  for (uint64_t id : stable) EXPECT_EQ(seen[id], 1) << "stable row " << id;
  for (const auto& [id, n] : seen) EXPECT_LE(n, 1) << "row " << id;
}

TEST(LdmScanTest, RowsChangingBetweenRoundsFullScan) {
  ScanSpec spec;
  spec.batch_rows = 10;
  churn_during_scan(spec, true, test_seed());
}

TEST(LdmScanTest, RowsChangingBetweenRoundsOrderedScans) {
  churn_during_scan(ordered_on(kByName, 10), true, test_seed());  // qty changes; the name key does not
  churn_during_scan(ordered_on(kByQty, 10), false, test_seed());
}

TEST(LdmScanTest, CloseMidScanReleasesTheScan) {
  Db db;
  fill(db, 0, 100);
  ScanSpec spec;
  spec.batch_rows = 5;
  const ScanResult r = scan_partition(db.h, db.table, 0, spec, [](uint32_t) { return false; });
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(db.h.ldm(0).stats().scans_open, 0u);
  // Next on a scan that is closed (or never was): refused; closing it: fine.
  db.h.send(0, encode(gsn::kScanFragNextReq, ScanFragNext{123456, 0}));
  Captured c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kScanFragRef; });
  EXPECT_EQ(decode_scan_frag_ref(c.signal())->error, ErrorCode::kScanError);
  db.h.send(0, encode(gsn::kScanFragCloseReq, ScanFragNext{123456, 0}));
  c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kScanFragConf; });
  EXPECT_TRUE(decode_scan_frag_conf(c.signal())->finished);
}

TEST(LdmScanTest, RefusedScans) {
  HarnessOptions options;
  options.ldm.max_scans = 2;
  Db db(options);
  fill(db, 0, 50);
  const auto error_of = [&](ScanSpec spec, std::optional<TableDef> table = std::nullopt) {
    return scan_partition(db.h, table.value_or(db.table), 0, spec).error;
  };
  TableDef unknown = db.table;
  unknown.table_id = 55;
  EXPECT_EQ(error_of({}, unknown), ErrorCode::kNoSuchTable);
  TableDef old = db.table;
  old.version = 1;
  EXPECT_EQ(error_of({}, old), ErrorCode::kSchemaVersion);
  EXPECT_EQ(error_of(ordered_on(999)), ErrorCode::kNoSuchIndex);
  EXPECT_EQ(error_of(ordered_on(kByCode)), ErrorCode::kNoSuchIndex) << "a unique index is no ordered index";
  ScanSpec bounded;
  bounded.bounds = bounds_section(Bounds{true, true, false, false, 1, 0, {}, {}}, Values().i32(kQty, 1), Values());
  EXPECT_EQ(error_of(bounded), ErrorCode::kBadRequest) << "bounds on a full scan";
  ScanSpec wrong_bound = ordered_on(kByQty);
  wrong_bound.bounds = bounds_section(Bounds{true, true, false, false, 1, 0, {}, {}}, Values().u32(kCode, 1), Values());
  EXPECT_EQ(error_of(wrong_bound), ErrorCode::kBadRequest) << "a bound on a column not in the index";
  wrong_bound.bounds = bounds_section(Bounds{true, true, false, false, 1, 0, {}, {}}, Values().i64(kQty, 1), Values());
  EXPECT_EQ(error_of(wrong_bound), ErrorCode::kBadRequest) << "a bound of the wrong width";
  ScanSpec bad_filter;
  bad_filter.filter = Filter().add(9, FilterOp::kIsNull).bytes();
  EXPECT_EQ(error_of(bad_filter), ErrorCode::kBadRequest);
  bad_filter.filter = Filter().add(kQty, FilterOp::kEq, bytes_of_int<int64_t>(1)).bytes();
  EXPECT_EQ(error_of(bad_filter), ErrorCode::kBadRequest) << "an integer constant of the wrong width";
  ScanSpec bad_columns;
  bad_columns.columns = column_list({kQty, 44});
  EXPECT_EQ(error_of(bad_columns), ErrorCode::kBadRequest);
  ScanFragReq locked;
  locked.tc_scan = 9;
  locked.table_id = db.table.table_id;
  locked.table_version = db.table.version;
  locked.lock = LockMode::kShared;
  locked.batch_rows = 1;
  locked.api_node = kSelf;
  db.h.send(0, encode(locked));
  Captured c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kScanFragRef; });
  EXPECT_EQ(decode_scan_frag_ref(c.signal())->error, ErrorCode::kBadRequest) << "scans read committed rows";
  // Two scans left open (one row per round) fill the pool; a third is refused.
  ScanSpec slow;
  slow.batch_rows = 1;
  uint32_t opened = 0;
  for (uint32_t p = 0; p < db.table.partitions && opened < 3; ++p) {
    ScanFragReq r;
    r.tc_scan = 500 + p;
    r.table_id = db.table.table_id;
    r.table_version = db.table.version;
    r.partition = p;
    r.batch_rows = 1;
    r.api_node = kSelf;
    db.h.send(0, encode(r));
    c = db.h.tc().take([&](const Captured& x) {
      return (x.number() == gsn::kScanFragConf && decode_scan_frag_conf(x.signal())->tc_scan == 500 + p) ||
             (x.number() == gsn::kScanFragRef && decode_scan_frag_ref(x.signal())->tc_scan == 500 + p);
    });
    if (++opened < 3) {
      EXPECT_EQ(c.number(), gsn::kScanFragConf);
    } else {
      ASSERT_EQ(c.number(), gsn::kScanFragRef);
      EXPECT_EQ(decode_scan_frag_ref(c.signal())->error, ErrorCode::kTooManyScans);
    }
  }
  EXPECT_EQ(db.h.ldm(0).stats().scans_open, 2u);
}

TEST(LdmScanTest, SelectiveFiltersYieldTheThreadAndStillCompleteRounds) {
  HarnessOptions options;
  options.ldm.scan_slice_rows = 3;
  Db db(options);
  fill(db, 0, 400);
  ScanSpec spec;
  spec.batch_rows = 4;
  spec.filter = Filter().add(kCode, FilterOp::kLt, bytes_of_int<uint32_t>(40)).bytes();
  EXPECT_EQ(sorted(ids_of(scan_table(db.h, db.table, spec))), range(0, 40));
  ScanSpec ordered = ordered_on(kByName, 4);
  ordered.filter = spec.filter;
  EXPECT_EQ(sorted(ids_of(scan_table(db.h, db.table, ordered))), range(0, 40));
}

TEST(LdmScanTest, BigRowsSplitIntoMessagesUnderAFrame) {
  TableDef t;
  t.name = "wide";
  t.table_id = 40;
  t.version = 1;
  t.partitions = 1;
  t.columns = {column("id", ColumnType::kUint64), column("a", ColumnType::kVarBinary, 8000),
               column("b", ColumnType::kVarBinary, 8000), column("c", ColumnType::kBinary, 8000)};
  t.primary_key = {0};
  Db db({}, t);
  const TxId tx = db.fresh_tx();
  for (uint64_t id = 0; id < 12; ++id)
    ASSERT_TRUE(db.client
                    .run({OpType::kInsert, LockMode::kExclusive, tx, Values().u64(0, id),
                          Values()
                              .str(1, std::string(8000, 'a'))
                              .str(2, std::string(id * 600, 'b'))
                              .str(3, std::string(8000, 'c'))})
                    .ok);
  db.client.commit(tx);
  ScanSpec spec;
  spec.batch_rows = 5;
  const ScanResult r = scan_table(db.h, t, spec);
  ASSERT_EQ(r.rows.size(), 12u);
  EXPECT_LE(r.largest_message, frame::kMaxFrameBytes);
  EXPECT_GE(r.messages, 8u);  // rows of 16-23 KB: at most one per message
  // A whole row of the widest table also comes back to a key read.
  const KeyOutcome read = db.client.run({OpType::kRead, LockMode::kCommitted, db.fresh_tx(), Values().u64(0, 11), {}});
  ASSERT_TRUE(read.ok);
  EXPECT_EQ(read.values.at(2)->size(), 6600u);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
