// Tables through the API: create, describe, drop, the limits a definition
// must keep, unique indexes' hidden tables, stale definitions, and the
// DataMemory a dropped table gives back.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "data_api_fixture.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::ColumnType;
using engine::IndexKind;
using engine::protocol::ErrorCode;
using engine::protocol::LockMode;

TEST_F(DataApiTest, SchemaIsCreatedDescribedAndDropped) {
  EXPECT_GT(table_->table_id, 0u);
  EXPECT_EQ(table_->partitions, 8u);
  EXPECT_GT(table_->indexes[0].index_id, 0u);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other);
  auto described = (*other)->get_table("accounts");
  ASSERT_TRUE(described) << described.status().to_string();
  EXPECT_EQ((*described)->table_id, table_->table_id);
  EXPECT_EQ((*described)->columns.size(), 5u);
  EXPECT_EQ((*described)->columns[kEmail].type, ColumnType::kVarChar);
  auto duplicate = conn_->create_table(accounts_def());
  EXPECT_EQ(duplicate.status().message(), "721: Schema object with given name already exists");
  EXPECT_TRUE(conn_->drop_table("accounts"));
  EXPECT_EQ((*other)->drop_table("accounts").message(), "723: No such table existed");
  auto gone = cluster_->connect(52);
  EXPECT_EQ((*gone)->get_table("accounts").status().message(), "723: No such table existed");
  engine::TableDef bad = accounts_def("bad");
  bad.primary_key = {kName};  // nullable primary key column
  EXPECT_FALSE(conn_->create_table(bad));
}

// Limits the data node's table codec enforces (names of at most 128 bytes,
// at most 64 indexes, no '$' in a table name) are checked by the API too,
// so such a definition is refused naming the limit, not with a bare "4000:
// Malformed or inconsistent request" that names nothing.
TEST_F(DataApiTest, ADefinitionBeyondTheNodesLimitsIsRefusedNamingWhatIsWrong) {
  const auto refusal = [&](const engine::TableDef& t) {
    auto created = conn_->create_table(t);
    EXPECT_FALSE(created) << t.name;
    return created ? std::string() : created.status().message();
  };
  const std::string long_name(129, 'n');
  EXPECT_EQ(refusal(accounts_def(long_name)), "table name has 129 bytes, at most 128");
  engine::TableDef t = accounts_def("long_column");
  t.columns[kName].name = long_name;
  EXPECT_EQ(refusal(t), "table 'long_column': column 2's name has 129 bytes, at most 128");
  t = accounts_def("long_index");
  t.indexes[1].name = long_name;
  EXPECT_EQ(refusal(t), "table 'long_index': index 1's name has 129 bytes, at most 128");
  t = accounts_def("many_indexes");
  t.indexes.clear();
  for (int i = 0; i < 65; ++i) t.indexes.push_back({"i" + std::to_string(i), IndexKind::kOrdered, {kBalance}, 0});
  EXPECT_EQ(refusal(t), "table 'many_indexes': has 65 indexes, at most 64");
  EXPECT_EQ(refusal(accounts_def("a$b")),
            "table 'a$b': a table name cannot contain '$' (it names the hidden tables of unique indexes)");
  // At the limits the definition is accepted, and the node keeps working.
  t = accounts_def(std::string(128, 't'));
  t.columns[kName].name = std::string(128, 'c');
  t.indexes.clear();
  for (int i = 0; i < 64; ++i) t.indexes.push_back({std::to_string(i), IndexKind::kOrdered, {kBalance}, 0});
  auto at_limits = conn_->create_table(t);
  ASSERT_TRUE(at_limits) << at_limits.status().to_string();
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(**at_limits, account(1, 1, "ann")); }));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  EXPECT_EQ(balance_of(1), 1);
}

// A unique index lives in a hidden table named "table$index" whose columns
// are the index's and then the primary key's, renamed "$pk$column". A
// definition valid in itself can make that hidden table invalid (a name
// too long, two columns of one name): it is refused at create, since every
// TC and LDM asserts on an invalid table, which would take the whole data
// node down.
TEST_F(DataApiTest, AUniqueIndexWhoseHiddenTableWouldBeInvalidIsRefusedAndTheNodeKeepsWorking) {
  const auto refusal = [&](const engine::TableDef& t) {
    auto created = conn_->create_table(t);
    EXPECT_FALSE(created) << t.name;
    return created ? std::string() : created.status().message();
  };
  engine::TableDef t = accounts_def(std::string(100, 't'));
  t.indexes[0].name = std::string(100, 'u');  // hidden table name: 201 bytes
  std::string why = refusal(t);
  EXPECT_NE(why.find("unique index '" + t.indexes[0].name + "'"), std::string::npos) << why;
  EXPECT_NE(why.find("name has 201 bytes, at most 128"), std::string::npos) << why;
  t = accounts_def("long_key_name");
  t.columns[kId].name = std::string(126, 'k');  // hidden column "$pk$kkk...": 130 bytes
  why = refusal(t);
  EXPECT_NE(why.find("unique index 'by_email'"), std::string::npos) << why;
  EXPECT_NE(why.find("name has 130 bytes, at most 128"), std::string::npos) << why;
  t = accounts_def("clashing_names");
  t.columns[kEmail].name = "$pk$id";  // the unique column and the renamed key column
  why = refusal(t);
  EXPECT_NE(why.find("unique index 'by_email'"), std::string::npos) << why;
  EXPECT_NE(why.find("column '$pk$id' is defined twice"), std::string::npos) << why;
  // The node is up and its tables work.
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  EXPECT_EQ(balance_of(1), 1);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  EXPECT_TRUE((*other)->get_table("accounts"));
  EXPECT_FALSE((*other)->get_table("clashing_names"));
}

// A unique index's hidden table ("table$index") is DICT's own: get_table
// and drop_table both answer that no such table exists, so a program cannot
// write to it directly (an entry written there would make an insert of a
// value no row has be refused as a duplicate, 893).
TEST_F(DataApiTest, AUniqueIndexsHiddenTableIsNoTableOfTheApi) {
  auto hidden = conn_->get_table("accounts$by_email");
  EXPECT_FALSE(hidden);
  EXPECT_EQ(hidden.status().message(), "723: No such table existed");
  EXPECT_EQ(conn_->drop_table("accounts$by_email").message(), "723: No such table existed");
  if (hidden) {
    const Row entry = Row().set(0, std::string("user2@example.com")).set(1, uint64_t{77});
    (void)run([&](api::Transaction& tx) { tx.insert(**hidden, entry); });
  }
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(2, 1)); }));
  EXPECT_EQ(balance_of(2), 1);
}

uint64_t data_memory_pages_in_use(TestCluster& cluster) {
  const std::string stats = cluster.node().stats_json();
  const std::string field = "\"pages_in_use\":";
  const std::size_t at = stats.find(field);
  EXPECT_NE(at, std::string::npos) << stats;
  return at == std::string::npos ? 0 : std::stoull(stats.substr(at + field.size()));
}

// Coverage: dropping a table returns every DataMemory page it held (rows,
// hash index, ordered index, the unique index's hidden table), also while a
// scan of it is open and another transaction has uncommitted writes on it;
// the scan then fails with 723, and the node keeps no scan record of it.
TEST_F(DataApiTest, DroppingATableReturnsAllItsPagesEvenWithAScanAndWritesInFlight) {
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  ASSERT_TRUE(conn_->drop_table("accounts"));
  const uint64_t baseline = data_memory_pages_in_use(*cluster_);
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  for (int cycle = 0; cycle < 6; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    auto t = conn_->create_table(accounts_def());
    ASSERT_TRUE(t) << t.status().to_string();
    for (uint64_t base = 0; base < 1000; base += 100)
      ASSERT_TRUE(run([&](api::Transaction& tx) {
        for (uint64_t id = base; id < base + 100; ++id) tx.insert(**t, account(id, static_cast<int64_t>(id), "name"));
      }));
    EXPECT_GT(data_memory_pages_in_use(*cluster_), baseline);
    api::ScanSpec spec;
    spec.table = *t;
    spec.batch_rows = 1;
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    api::RowView row;
    ASSERT_TRUE((*scan)->next(row));
    api::Transaction& pending = conn_->start_transaction();
    pending.insert(**t, account(5000, 1));
    pending.update(**t, key_of(3), Row().set(kBalance, int64_t{7}));
    ASSERT_TRUE(pending.execute(ExecType::kNoCommit));
    ASSERT_TRUE((*other)->drop_table("accounts"));
    while ((*scan)->next(row)) {
    }
    EXPECT_EQ((*scan)->status().message(), "723: No such table existed");
    (*scan)->close();
    (void)pending.execute(ExecType::kCommit);
    pending.close();
    EXPECT_EQ(data_memory_pages_in_use(*cluster_), baseline);
  }
}

// A transaction's uncommitted writes to a table that another connection
// then dropped go nowhere, so its commit must not report success: it fails
// with 283, and the transaction ends aborted: its writes to a table that
// stays are undone and their locks freed. A transaction that only read the
// dropped table (with a lock) commits: its reads were true.
TEST_F(DataApiTest, ACommitAfterATableItWroteToWasDroppedFailsAndUndoesTheRest) {
  auto kept = conn_->create_table(accounts_def("kept"));
  ASSERT_TRUE(kept) << kept.status().to_string();
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 10));
    tx.insert(**kept, account(1, 10));
  }));
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  api::Transaction& writer = conn_->start_transaction();
  writer.insert(*table_, account(2, 20));
  writer.update(**kept, key_of(1), Row().set(kBalance, int64_t{11}));
  writer.insert(**kept, account(2, 20));
  ASSERT_TRUE(writer.execute(ExecType::kNoCommit));
  api::Transaction& reader = conn_->start_transaction();
  api::Operation& read = reader.read(*table_, key_of(1), {}, LockMode::kShared);
  ASSERT_TRUE(reader.execute(ExecType::kNoCommit));
  EXPECT_EQ(read.value(kBalance).as_int64(), 10);

  ASSERT_TRUE((*other)->drop_table("accounts"));
  EXPECT_EQ(writer.execute(ExecType::kCommit).message(),
            "283: Table was dropped while the transaction was writing to it");
  EXPECT_EQ(writer.error(), ErrorCode::kTableDropped);
  writer.close();
  const Status reader_committed = reader.execute(ExecType::kCommit);
  EXPECT_TRUE(reader_committed) << reader_committed.to_string();
  reader.close();

  // The kept table as before, and nothing of it locked (a lock left behind
  // would fail this update with 266 after the deadlock timeout).
  table_ = *kept;
  EXPECT_EQ(balance_of(1), 10);
  EXPECT_EQ(balance_of(2), std::nullopt);
  const Status updated = run([&](api::Transaction& tx) {
    tx.update(**kept, key_of(1), Row().set(kBalance, int64_t{12}));
    tx.insert(**kept, account(2, 22));
  });
  EXPECT_TRUE(updated) << updated.to_string();
  EXPECT_EQ(balance_of(1), 12);
  EXPECT_EQ(balance_of(2), 22);
}

// Coverage: get_table describes exactly what was created, and ordered scans
// with bounds find the right rows for every column type (signed integers
// across zero, unsigned ones across 2^31 and 2^63, fixed and variable
// byte strings of different lengths).
TEST_F(DataApiTest, EveryColumnTypeIsDescribedAsCreatedAndBoundedByAnOrderedScan) {
  engine::TableDef def;
  def.name = "types";
  def.columns = {{"id", ColumnType::kUint32, 0, false},     {"i32", ColumnType::kInt32, 0, true},
                 {"u32", ColumnType::kUint32, 0, false},    {"i64", ColumnType::kInt64, 0, true},
                 {"u64", ColumnType::kUint64, 0, false},    {"bin", ColumnType::kBinary, 2, true},
                 {"vbin", ColumnType::kVarBinary, 5, true}, {"chr", ColumnType::kChar, 3, false},
                 {"vchr", ColumnType::kVarChar, 6, true}};
  def.primary_key = {0};
  for (uint16_t c = 1; c < static_cast<uint16_t>(def.columns.size()); ++c)
    def.indexes.push_back({"by_" + def.columns[c].name, IndexKind::kOrdered, {c}, 0});
  def.indexes.push_back({"by_u32_chr", IndexKind::kUnique, {2, 7}, 0});
  def.partitions = 3;
  auto created = conn_->create_table(def);
  ASSERT_TRUE(created) << created.status().to_string();
  const engine::TableDef& t = **created;
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  auto described = (*other)->get_table("types");
  ASSERT_TRUE(described) << described.status().to_string();
  EXPECT_EQ(engine::protocol::encode_table(**described), engine::protocol::encode_table(t));
  EXPECT_EQ((*described)->partitions, 3u);
  for (std::size_t c = 0; c < def.columns.size(); ++c) {
    EXPECT_EQ((*described)->columns[c].name, def.columns[c].name);
    EXPECT_EQ((*described)->columns[c].type, def.columns[c].type);
    EXPECT_EQ((*described)->columns[c].length, def.columns[c].length);
    EXPECT_EQ((*described)->columns[c].nullable, def.columns[c].nullable);
  }
  EXPECT_EQ((*described)->primary_key, def.primary_key);
  ASSERT_EQ((*described)->indexes.size(), def.indexes.size());
  for (std::size_t i = 0; i < def.indexes.size(); ++i) {
    EXPECT_EQ((*described)->indexes[i].name, def.indexes[i].name);
    EXPECT_EQ((*described)->indexes[i].kind, def.indexes[i].kind);
    EXPECT_EQ((*described)->indexes[i].columns, def.indexes[i].columns);
    EXPECT_EQ((*described)->indexes[i].index_id, t.indexes[i].index_id);
  }

  // Row v (-20..19): every column's value grows with v, so a bound on any
  // column between the values of rows lo and hi selects exactly lo..hi.
  const auto row_of = [](int v) {
    const int k = v + 20;  // 0..39
    Row r;
    r.set(0, static_cast<uint32_t>(k));
    r.set(1, static_cast<int32_t>(v * 1000));
    r.set(2, static_cast<uint32_t>(0x7FFF'FFF0u + static_cast<uint32_t>(k)));
    r.set(3, static_cast<int64_t>(v) * int64_t{10'000'000'000});
    r.set(4, uint64_t{0x7FFF'FFFF'FFFF'FFF0} + static_cast<uint64_t>(k));
    r.set(5, std::string{static_cast<char>(0x70 + k), '\0'});  // crosses 0x80: bytes compare unsigned
    r.set(6, std::string(static_cast<std::size_t>(k / 8), '\xF0') + std::string(1, static_cast<char>(k)));
    r.set(7, std::string{'a', static_cast<char>('a' + k / 26), static_cast<char>('a' + k % 26)});
    r.set(8, std::string(static_cast<std::size_t>(1 + k / 8), 'm') + std::string(1, static_cast<char>('a' + k % 8)));
    return r;
  };
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (int v = -20; v < 20; ++v) tx.insert(t, row_of(v));
  }));
  for (uint16_t c = 1; c < static_cast<uint16_t>(def.columns.size()); ++c) {
    SCOPED_TRACE("column " + def.columns[c].name);
    const Row lo = row_of(-7), hi = row_of(11);
    for (const bool inclusive : {true, false}) {
      api::ScanSpec spec;
      spec.table = &t;
      spec.index = &t.indexes[c - 1];
      spec.has_lower = spec.has_upper = true;
      spec.lower_inclusive = spec.upper_inclusive = inclusive;
      spec.lower.set(c, api::RowView(lo.entries()).value(c).bytes);
      spec.upper.set(c, api::RowView(hi.entries()).value(c).bytes);
      auto scan = conn_->scan(spec);
      ASSERT_TRUE(scan) << scan.status().to_string();
      std::set<uint32_t> ids;
      api::RowView row;
      while ((*scan)->next(row)) EXPECT_TRUE(ids.insert(row.value(0).as_uint32()).second);
      EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
      (*scan)->close();
      std::set<uint32_t> expected;
      for (int v = inclusive ? -7 : -6; v <= (inclusive ? 11 : 10); ++v) expected.insert(static_cast<uint32_t>(v + 20));
      EXPECT_EQ(ids, expected) << (inclusive ? "inclusive" : "exclusive");
    }
  }
}

// A write reports a row's unique-index columns (and primary key) to TC
// twice, before and after, in one signal. A table whose unique columns
// cannot fit is refused at create: created, every write to it would be
// refused with a bare "4000: Malformed or inconsistent request".
TEST_F(DataApiTest, ATableWhoseUniqueColumnsCannotBeReportedInOneSignalIsRefusedAtCreate) {
  engine::TableDef t;
  t.name = "wide_uniques";
  t.columns = {{"id", ColumnType::kUint32, 0, false}};
  t.primary_key = {0};
  for (uint16_t i = 1; i <= 32; ++i) {
    t.columns.push_back({"u" + std::to_string(i), ColumnType::kVarBinary, 500, false});
    t.indexes.push_back({"by_u" + std::to_string(i), IndexKind::kUnique, {i}, 0});
  }
  auto created = conn_->create_table(t);
  EXPECT_FALSE(created);
  EXPECT_EQ(created.status().message(),
            "table 'wide_uniques': its unique index columns and primary key take 16268 bytes in a signal, at most "
            "16256");
  if (created) {
    Row row;
    row.set(0, uint32_t{1});
    for (uint16_t i = 1; i <= 32; ++i) row.set(i, std::string(10, static_cast<char>(i)));
    const Status inserted = run([&](api::Transaction& tx) { tx.insert(**created, row); });
    EXPECT_TRUE(inserted) << "created, yet: " << inserted.to_string();
  }
  // One unique column fewer fits, and takes writes.
  t.name = "narrower_uniques";
  t.columns.pop_back();
  t.indexes.pop_back();
  auto narrower = conn_->create_table(t);
  ASSERT_TRUE(narrower) << narrower.status().to_string();
  Row row;
  row.set(0, uint32_t{1});
  for (uint16_t i = 1; i <= 31; ++i) row.set(i, std::string(500, static_cast<char>(i)));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(**narrower, row); }));
}

TEST_F(DataApiTest, StaleTableVersionIsRefused) {
  const engine::TableDef old = *table_;
  ASSERT_TRUE(conn_->drop_table("accounts"));
  ASSERT_TRUE(conn_->create_table(accounts_def()));
  api::Transaction& tx = conn_->start_transaction();
  tx.read(old, key_of(1));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_TRUE(s.message().rfind("241:", 0) == 0 || s.message().rfind("723:", 0) == 0) << s.message();
  tx.close();
}

// get_table() caches. When another connection drops the table and creates
// it again differently, the cached definition's operations are refused
// (723 or 241), and get_table() then fetches the new definition: were it to
// keep returning the stale one, the connection could never use the table
// again.
TEST_F(DataApiTest, AStaleCachedDefinitionIsRefusedAndGetTableThenFetchesTheNewOne) {
  auto other_conn = cluster_->connect(51);
  ASSERT_TRUE(other_conn) << other_conn.status().to_string();
  api::Connection& other = **other_conn;
  const auto is_stale_table_error = [](const Status& s) {
    return s.message().rfind("241:", 0) == 0 || s.message().rfind("723:", 0) == 0;
  };
  for (const bool by_scan : {false, true}) {
    SCOPED_TRACE(by_scan ? "found stale by a scan" : "found stale by a read");
    auto cached = other.get_table("accounts");
    ASSERT_TRUE(cached) << cached.status().to_string();
    const engine::TableDef* old = *cached;
    const std::size_t old_columns = old->columns.size();
    ASSERT_TRUE(conn_->drop_table("accounts"));
    engine::TableDef changed = accounts_def();
    while (changed.columns.size() <= old_columns)  // one column more than the cached definition
      changed.columns.push_back({"extra" + std::to_string(changed.columns.size()), ColumnType::kUint32, 0, true});
    auto created = conn_->create_table(changed);
    ASSERT_TRUE(created) << created.status().to_string();
    table_ = *created;

    if (by_scan) {
      api::ScanSpec spec;
      spec.table = old;
      auto scan = other.scan(spec);
      const Status s = scan ? (*scan)->status() : scan.status();
      EXPECT_TRUE(is_stale_table_error(s)) << s.to_string();
      if (scan) (*scan)->close();
    } else {
      api::Transaction& tx = other.start_transaction();
      tx.read(*old, key_of(1));
      const Status s = tx.execute(ExecType::kCommit);
      EXPECT_TRUE(is_stale_table_error(s)) << s.to_string();
      tx.close();
    }
    EXPECT_EQ(old->columns.size(), old_columns) << "the old definition stays readable";

    auto fresh = other.get_table("accounts");
    ASSERT_TRUE(fresh) << fresh.status().to_string();
    EXPECT_EQ((*fresh)->table_id, table_->table_id);
    EXPECT_EQ((*fresh)->version, table_->version);
    EXPECT_EQ((*fresh)->columns.size(), old_columns + 1);
    api::Transaction& tx = other.start_transaction();
    tx.insert(**fresh, account(1, 42));
    EXPECT_TRUE(tx.execute(ExecType::kCommit)) << tx.status().to_string();
    tx.close();
    EXPECT_EQ(balance_of(1), 42);
  }
}

// create_table() replaces any older definition of the same name in the
// cache (cached before another connection dropped the table), so
// get_table() answers with the one this connection created.
TEST_F(DataApiTest, GetTableAnswersWithTheDefinitionThisConnectionCreatedLast) {
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other) << other.status().to_string();
  ASSERT_TRUE((*other)->drop_table("accounts"));
  engine::TableDef changed = accounts_def();
  changed.columns.push_back({"extra", ColumnType::kUint32, 0, true});
  auto created = conn_->create_table(changed);
  ASSERT_TRUE(created) << created.status().to_string();
  auto cached = conn_->get_table("accounts");
  ASSERT_TRUE(cached) << cached.status().to_string();
  EXPECT_EQ(*cached, *created);
  EXPECT_EQ((*cached)->columns.size(), 6u);
  EXPECT_EQ(table_->columns.size(), 5u) << "the older definition stays readable";
  api::Transaction& tx = conn_->start_transaction();
  tx.insert(**cached, account(1, 1));
  EXPECT_TRUE(tx.execute(ExecType::kCommit)) << tx.status().to_string();
  tx.close();
  table_ = *created;
  EXPECT_EQ(balance_of(1), 1);
}

}  // namespace
}  // namespace fjord::test
