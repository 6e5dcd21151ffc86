// Trains through TC: a TcKeyTrain runs as its requests would one by one;
// its reads run as planned runs in TC's own LDM, answered in KeyDataTrains;
// a malformed train is refused whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

// A train's direct reads take the LDM's read plan for their table and
// column list, made once per train and LDM: a train mixing two tables and
// three column lists, record by record, answers each read from its own
// table with its own columns, in both layouts; a record whose table
// version is stale aborts the batch as it does alone, and so does one of a
// table dropped since an earlier train read it.
TEST(LdmWithTcTest, ATrainMixingTablesAndColumnListsAnswersEachReadAsAlone) {
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    BlockCluster cluster(layout, /*tc_timer_ms=*/600000);
    Api api(cluster);
    const TableDef items = cluster.create(plain_items());
    TableDef other_def;
    other_def.name = "other";
    other_def.partitions = 4;
    other_def.columns = {column("k", ColumnType::kUint64), column("a", ColumnType::kUint32),
                         column("b", ColumnType::kUint64)};
    other_def.primary_key = {0};
    const TableDef other = cluster.create(other_def);
    for (uint64_t id = 0; id < 120; ++id) {
      ASSERT_TRUE(api.run(items, OpType::kInsert, item_key(id),
                          item_values(id, Item{int32_t(id), long_name(id), uint32_t(500 + id)}))
                      .ok);
      ASSERT_TRUE(
          api.run(other, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).u32(1, 7000 + id).u64(2, 9 * id))
              .ok);
    }
    // Kind id % 4: 0 items (every column), 1 other (every column), 2 other
    // (b), 3 other (a, k). The reads in LDM 0 go through the kinds in
    // turn: other with every column follows items with every column (the
    // table tells their plans apart), then other with b follows it, and
    // with a and k follows that (the column list does). Then a few in
    // LDM 1.
    const auto read_of = [&](uint64_t id) {
      if (id % 4 == 0) return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}};
      static const std::vector<uint16_t> lists[] = {{}, {}, {2}, {1, 0}};
      return Api::BatchOp{OpType::kRead, LockMode::kCommitted, Values().u64(0, id), {}, 0, &other, lists[id % 4]};
    };
    const auto here = [&](const Api::BatchOp& op) { return in_ldm0(op.table != nullptr ? *op.table : items, op.key); };
    std::vector<uint64_t> kinds[4], elsewhere;
    for (uint64_t id = 1; id < 120; ++id) (here(read_of(id)) ? kinds[id % 4] : elsewhere).push_back(id);
    std::vector<Api::BatchOp> reads = {read_of(0)};  // starts the transaction: key_req's way
    for (std::size_t j = 0; j < 6; ++j)
      for (const std::vector<uint64_t>& kind : kinds) reads.push_back(read_of(kind.at(j)));
    for (std::size_t j = 0; j < 5; ++j) reads.push_back(read_of(elsewhere.at(j)));
    const TxResult r = api.run_batch(items, reads, /*train=*/true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), reads.size());
    // KeyData of the separate layout come in any order: each row says
    // which read it answers by its columns and values.
    std::set<uint64_t> answered;
    for (const RowValues& row : r.rows) {
      if (row.size() == 1) {  // other, column b only
        const uint64_t b = int_of<uint64_t>(row.at(2));
        EXPECT_EQ(b % 9, 0u);
        EXPECT_EQ(b / 9 % 4, 2u);
        answered.insert(b / 9);
      } else if (row.size() == 2) {  // other, columns a and k
        const uint64_t id = int_of<uint64_t>(row.at(0));
        EXPECT_EQ(int_of<uint32_t>(row.at(1)), 7000 + id);
        EXPECT_EQ(id % 4, 3u);
        answered.insert(id);
      } else if (row.size() == 3) {  // other, every column
        const uint64_t id = int_of<uint64_t>(row.at(0));
        EXPECT_EQ(int_of<uint32_t>(row.at(1)), 7000 + id);
        EXPECT_EQ(int_of<uint64_t>(row.at(2)), 9 * id);
        EXPECT_EQ(id % 4, 1u);
        answered.insert(id);
      } else {  // items, every column
        const uint64_t id = int_of<uint64_t>(row.at(kId));
        EXPECT_EQ(item_of(row).qty, int32_t(id));
        EXPECT_EQ(int_of<uint32_t>(row.at(kCode)), 500 + id);
        EXPECT_EQ(id % 4, 0u);
        answered.insert(id);
      }
    }
    EXPECT_EQ(answered.size(), reads.size());
    if (layout == Layout::kTcWithLdm0) {
      // Every read whose row is in LDM 0 ran directly, into the train.
      const auto direct = static_cast<std::size_t>(std::count_if(reads.begin(), reads.end(), here));
      EXPECT_GE(direct, 24u);
      EXPECT_EQ(r.train_ops.size(), direct);
    }
    TableDef stale = other;
    stale.version += 1;
    reads[10].table = &stale;
    const TxResult refused = api.run_batch(items, reads, /*train=*/true);
    EXPECT_FALSE(refused.ok);
    EXPECT_EQ(refused.error, ErrorCode::kSchemaVersion);
    // A plan is the train's own: after a drop, the same reads of the table
    // find it gone.
    reads[10].table = &other;
    cluster.drop("other");
    const TxResult gone = api.run_batch(items, reads, /*train=*/true);
    EXPECT_FALSE(gone.ok);
    EXPECT_EQ(gone.error, ErrorCode::kNoSuchTable);
  }
}

// The reads in the middle of a train that share a table and a column list
// run in TC's LDM as one run of a read plan. A run longer than the reply
// train has room for sends the reply when full and goes on; a run stops at
// the read that fails: the reads before it ran, the ones after it do not,
// and the transaction aborts with that read's error.
TEST(LdmWithTcTest, ARunOfPlannedReadsFillsReplyAfterReplyAndStopsAtTheReadThatFails) {
  BlockCluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  // 6,000-byte tags: a reply train holds five reads' records.
  TableDef wide;
  wide.name = "wide";
  wide.partitions = 8;
  wide.columns = {column("id", ColumnType::kUint64), column("tag", ColumnType::kVarChar, 6000)};
  wide.primary_key = {0};
  const TableDef t = cluster.create(wide);
  const auto tag = [](uint64_t id) { return std::string(5990, 't') + std::to_string(id); };
  std::vector<uint64_t> here, missing;
  for (uint64_t id = 0; here.size() < 24; ++id) {
    ASSERT_TRUE(api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, tag(id))).ok);
    if (in_ldm0(t, Values().u64(0, id))) here.push_back(id);
  }
  for (uint64_t id = 100000; missing.empty(); ++id)
    if (in_ldm0(t, Values().u64(0, id))) missing.push_back(id);
  const auto read = [](uint64_t id) {
    return Api::BatchOp{OpType::kRead, LockMode::kCommitted, Values().u64(0, id), {}};
  };

  std::vector<Api::BatchOp> reads;
  reads.reserve(here.size());
  for (const uint64_t id : here) reads.push_back(read(id));
  LdmStats before = cluster.ldm(0).stats();
  TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), here.size());
  std::set<uint64_t> ids;
  for (const RowValues& row : r.rows) {
    const uint64_t id = int_of<uint64_t>(row.at(0));
    ids.insert(id);
    EXPECT_EQ(str_of(row.at(1)), tag(id));
  }
  EXPECT_EQ(ids, std::set<uint64_t>(here.begin(), here.end()));
  EXPECT_GE(r.data_trains, 5u) << "24 reads of 6 KB rows do not fit in fewer KeyDataTrains";
  // Each record once (the harness takes the train that ends the batch first).
  std::vector<uint32_t> ops = r.train_ops;
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(std::adjacent_find(ops.begin(), ops.end()), ops.end());
  EXPECT_EQ(ops.size(), here.size());
  LdmStats after = cluster.ldm(0).stats();
  EXPECT_EQ(after.reads - before.reads, here.size());

  // The 8th read of the train (the 7th of its run) finds no row.
  reads.clear();
  for (std::size_t i = 0; i < 16; ++i) reads.push_back(read(i == 7 ? missing[0] : here[i]));
  before = cluster.ldm(0).stats();
  r = api.run_batch(t, reads, true);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
  after = cluster.ldm(0).stats();
  EXPECT_EQ(after.reads - before.reads, 7u) << "the first record and the six planned reads before the failing one";
  EXPECT_EQ(after.refused - before.refused, 1u);
  EXPECT_EQ(after.key_operations - before.key_operations, 8u) << "nothing after the failing read ran";
  // The transaction is gone and nothing of it stays: the rows read as before.
  r = api.run(t, OpType::kRead, Values().u64(0, here[8]));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(str_of(r.rows.at(0).at(1)), tag(here[8]));
}

// A TcKeyTrain runs as its requests would one by one, in either layout:
// the same rows, the same errors, the same aborts. With TC beside LDM 0 the
// reads it runs there answer in one KeyDataTrain per train (in order), and
// a train of reads all on LDM 0 ends its batch with that KeyDataTrain.
TEST(LdmWithTcTest, TrainsRunAsTheirRequestsWouldAloneInBothLayouts) {
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    BlockCluster cluster(layout);
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };
    const KeyCodec pk = KeyCodec::for_primary_key(t);
    const auto on_ldm0 = [&](uint64_t id) {
      std::array<std::byte, kMaxKeyBytes> key{};
      const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
      return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
    };

    // The longest train: 32 reads, each row its own.
    std::vector<Api::BatchOp> reads;
    for (uint64_t id = 0; id < kMaxTrainOps; ++id) reads.push_back(read(id));
    TxResult r = api.run_batch(t, reads, /*train=*/true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), kMaxTrainOps);
    std::set<uint64_t> ids;
    for (const RowValues& row : r.rows) {
      const uint64_t id = int_of<uint64_t>(row.at(kId));
      ids.insert(id);
      EXPECT_EQ(item_of(row).qty, static_cast<int32_t>(id));
    }
    EXPECT_EQ(ids.size(), kMaxTrainOps);
    if (layout == Layout::kTcWithLdm0) {
      EXPECT_EQ(r.data_trains, 1u) << "the direct reads answered in one KeyDataTrain";
      EXPECT_TRUE(std::is_sorted(r.train_ops.begin(), r.train_ops.end()));
      uint32_t here = 0;
      for (uint64_t id = 0; id < kMaxTrainOps; ++id) here += on_ldm0(id) ? 1 : 0;
      EXPECT_EQ(r.train_ops.size(), here);
    } else {
      EXPECT_EQ(r.data_trains, 0u) << "no read runs on TC's thread";
    }
    std::vector<Api::BatchOp> local;
    for (uint64_t id = 0; id < 40 && local.size() < 5; ++id)
      if (on_ldm0(id)) local.push_back(read(id));
    r = api.run_batch(t, local, true);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.rows.size(), local.size());
    EXPECT_EQ(r.ended_with_data, layout == Layout::kTcWithLdm0);

    // Writes and reads mixed: a committed read sees the row as committed,
    // not the train's own update; the update commits with the train.
    r = api.run_batch(
        t,
        {{OpType::kUpdate, LockMode::kExclusive, item_key(5), Values().i32(kQty, 55)},
         read(5),
         {OpType::kInsert, LockMode::kExclusive, item_key(100), item_values(100, Item{100, "new", std::nullopt})},
         {OpType::kRead, LockMode::kShared, item_key(100), {}}},
        true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 2u);
    std::map<uint64_t, int32_t> qty;
    for (const RowValues& row : r.rows) qty[int_of<uint64_t>(row.at(kId))] = item_of(row).qty;
    EXPECT_EQ(qty[5], 5);
    EXPECT_EQ(qty[100], 100);
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(5)).rows.at(0)).qty, 55);

    // Enough rows that some hash buckets overflow (about one key in ten
    // sits in an overflow block): a train's direct read whose bucket does
    // not list it is looked for in the overflow block a few records ahead
    // (stage 2), so it too finds its row among the candidates instead of
    // searching the index. Every row found, each its own; inserted by
    // trains too.
    constexpr uint64_t kMany = 3000;
    for (uint64_t first = 1000; first < 1000 + kMany; first += kMaxTrainOps) {
      std::vector<Api::BatchOp> inserts;
      for (uint64_t id = first; id < std::min<uint64_t>(first + kMaxTrainOps, 1000 + kMany); ++id)
        inserts.push_back({OpType::kInsert, LockMode::kExclusive, item_key(id),
                           item_values(id, Item{int32_t(id), "m", std::nullopt})});
      ASSERT_TRUE(api.run_batch(t, inserts, true).ok);
    }
    uint64_t found = 0;
    const LdmStats before = cluster.ldm(0).stats();
    for (uint64_t first = 1000; first < 1000 + kMany; first += kMaxTrainOps) {
      std::vector<Api::BatchOp> batch;
      for (uint64_t id = first; id < std::min<uint64_t>(first + kMaxTrainOps, 1000 + kMany); ++id)
        batch.push_back(read(id));
      const TxResult many = api.run_batch(t, batch, true);
      ASSERT_TRUE(many.ok) << error_text(many.error);
      ASSERT_EQ(many.rows.size(), batch.size());
      for (const RowValues& row : many.rows) {
        const uint64_t id = int_of<uint64_t>(row.at(kId));
        EXPECT_GE(id, first);
        EXPECT_EQ(item_of(row).qty, static_cast<int32_t>(id));
        ++found;
      }
    }
    EXPECT_EQ(found, kMany);
    if (layout == Layout::kTcWithLdm0) {
      const LdmStats after = cluster.ldm(0).stats();
      const uint64_t hits = after.lookahead_hits - before.lookahead_hits;
      const uint64_t searches = after.index_searches - before.index_searches;
      EXPECT_EQ(hits + searches, after.reads - before.reads) << "every read looked its key up once";
      EXPECT_GT(hits, kMany / 3) << "about half the rows are LDM 0's";
      // Only a key two overflow blocks down its chain is searched for.
      EXPECT_LE(searches, hits / 100) << hits << " found among candidates, " << searches << " searched";
    }

    // A read of a missing row in the middle aborts the train's transaction:
    // its update does not happen.
    r = api.run_batch(
        t,
        {read(1), {OpType::kUpdate, LockMode::kExclusive, item_key(2), Values().i32(kQty, 22)}, read(100000), read(3)},
        true);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(2)).rows.at(0)).qty, 2);
  }
}

// A train that is a whole transaction of committed reads for LDM 0 (what
// a batched pk read sends) runs without a transaction record. It answers,
// counts and fails exactly as the record-by-record path: a missing row
// first, in the middle or last is reported with its operation, nothing after
// it runs, and the transaction is gone (its id starts a new one).
TEST(LdmWithTcTest, AWholeTrainOfReadsAnswersAndFailsAsRecordByRecord) {
  BlockCluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  std::vector<uint64_t> local;
  for (uint64_t id = 0; local.size() < 8; ++id) {
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    if (in_ldm0(t, item_key(id))) local.push_back(id);
  }
  uint64_t missing = 100000;
  while (!in_ldm0(t, item_key(missing))) ++missing;
  const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };

  std::vector<Api::BatchOp> reads;
  reads.reserve(local.size());
  for (const uint64_t id : local) reads.push_back(read(id));
  LdmStats ldm_before = cluster.ldm(0).stats();
  TcStats tc_before = cluster.tc().stats();
  TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(int_of<uint64_t>(r.rows[i].at(kId)), local[i]);
    EXPECT_EQ(item_of(r.rows[i]).qty, static_cast<int32_t>(local[i]));
  }
  EXPECT_EQ(r.data_trains, 1u);
  EXPECT_TRUE(r.ended_with_data);
  EXPECT_EQ(cluster.ldm(0).stats().reads - ldm_before.reads, local.size());
  EXPECT_EQ(cluster.tc().stats().transactions_committed - tc_before.transactions_committed, 1u);
  EXPECT_EQ(cluster.tc().stats().operations - tc_before.operations, local.size());

  for (const uint32_t at : {0u, 3u, 7u}) {
    SCOPED_TRACE(at);
    reads[at] = read(missing);
    ldm_before = cluster.ldm(0).stats();
    tc_before = cluster.tc().stats();
    const TxId tx = api.tx_of_next();
    r = api.run_batch(t, reads, true);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    EXPECT_EQ(r.error_op, at);
    const LdmStats ldm_after = cluster.ldm(0).stats();
    EXPECT_EQ(ldm_after.reads - ldm_before.reads, at) << "the reads before the missing row";
    EXPECT_EQ(ldm_after.refused - ldm_before.refused, 1u);
    EXPECT_EQ(ldm_after.key_operations - ldm_before.key_operations, at + 1u) << "nothing after it ran";
    const TcStats tc_after = cluster.tc().stats();
    EXPECT_EQ(tc_after.transactions_aborted - tc_before.transactions_aborted, 1u);
    EXPECT_EQ(tc_after.transactions_committed, tc_before.transactions_committed);
    EXPECT_EQ(tc_after.operations - tc_before.operations, at + 1u);
    // The failed transaction left nothing behind: its id starts a new one.
    const TxResult again = api.run(t, OpType::kRead, item_key(local[1]), {}, true, tx);
    ASSERT_TRUE(again.ok) << error_text(again.error);
    EXPECT_EQ(int_of<uint64_t>(again.rows.at(0).at(kId)), local[1]);
    reads[at] = read(local[at]);
  }
}

// A train with a fault in any record is refused whole (kBadRequest) before
// any of it runs: the insert in its first record never happens.
TEST(LdmWithTcTest, AMalformedTrainIsRefusedWholeAndRunsNothing) {
  BlockCluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const Values key = item_key(7);
  const Values values = item_values(7, Item{7, "seven", std::nullopt});
  const Values read_key = item_key(8);
  std::vector<std::byte> records(4096);
  const auto build = [&](TxId tx, uint32_t second_flags) {
    TcKeyReq insert{.api_conn = 0,
                    .tx = tx,
                    .table_id = t.table_id,
                    .table_version = t.version,
                    .op = OpType::kInsert,
                    .lock = LockMode::kExclusive,
                    .flags = kFlagStartTx,
                    .op_index = 0,
                    .key = key.bytes(),
                    .values = values.bytes()};
    TcKeyReq second = insert;
    second.op = OpType::kRead;
    second.lock = LockMode::kCommitted;
    second.flags = second_flags;
    second.op_index = 1;
    second.batch_ops = 2;
    second.key = read_key.bytes();
    second.values = {};
    std::size_t n = put_tc_key_train_record(records, insert);
    n += put_tc_key_train_record(std::span(records).subspan(n), second);
    return n;
  };
  // Each: what to break, and how many records the train claims.
  struct Case {
    const char* what;
    uint32_t second_flags;
    uint32_t count;
    std::size_t trim;  // bytes cut off the records' end
  };
  const Case cases[] = {
      {"unknown flag", kFlagExecute | kFlagCommit | (1u << 9), 2, 0},
      {"second record starts the transaction", kFlagStartTx | kFlagExecute | kFlagCommit, 2, 0},
      {"more records than the section holds", 0, 3, 0},
      {"the count says one, two are there", kFlagExecute | kFlagCommit, 1, 0},
      {"the section ends inside the second record", kFlagExecute | kFlagCommit, 2, 4},
      {"a count of zero", kFlagExecute | kFlagCommit, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::size_t n = build(api.tx_of_next(), c.second_flags);
    const TxResult r = api.run_raw_train(c.count, std::span(records).first(n - c.trim));
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kBadRequest);
    EXPECT_EQ(api.run(t, OpType::kRead, item_key(7)).error, ErrorCode::kNoSuchRow) << "nothing of it ran";
  }
  // The same train well formed: the insert happens, the read of 8 fails.
  const std::size_t n = build(api.tx_of_next(), kFlagExecute | kFlagCommit);
  EXPECT_EQ(api.run_raw_train(2, std::span(records).first(n)).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(8), item_values(8, Item{8, "eight", std::nullopt})).ok);
  const std::size_t again = build(api.tx_of_next(), kFlagExecute | kFlagCommit);
  const TxResult r = api.run_raw_train(2, std::span(records).first(again));
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(item_of(r.rows[0]).qty, 8);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(7)).rows.at(0)).qty, 7);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
