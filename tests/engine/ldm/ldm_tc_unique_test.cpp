// Unique indexes through TC: lookups by unique key (directly in TC's own
// LDM, or at their turn in a train), the hidden table kept in step with its
// base table, and writes to a hidden table refused or found inconsistent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>

#include "fjord/base/log.h"
#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

// A read by unique key whose hidden row lies in an LDM of TC's own thread
// looks that row up directly (no LqhKeyReq and LqhKeyConf), and, when the
// base row is there too, ends its transaction with its values (one
// KeyDataConf): with the same answers as every block on its own thread.
TEST(LdmWithTcTest, AUniqueKeyLookupInACoLocatedLdmRunsDirectlyWithTheSameAnswers) {
  std::vector<std::vector<TxResult>> answers;
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    BlockCluster cluster(layout, /*tc_timer_ms=*/600000);
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    const uint32_t by_code = index_id_of(t, "by_code");
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id),
                          item_values(id, Item{int32_t(id), long_name(id), uint32_t(1000 + id)}))
                      .ok);
    const LdmStats before[2] = {cluster.ldm(0).stats(), cluster.ldm(1).stats()};
    std::vector<TxResult> results;
    uint32_t direct_ends = 0;
    for (uint32_t code = 1000; code < 1050; ++code) {  // 1040..1049 are nobody's
      results.push_back(api.run(t, OpType::kRead, Values().u32(kCode, code), {}, true, std::nullopt, by_code));
      if (results.back().ended_with_data) {
        ++direct_ends;
        EXPECT_TRUE(results.back().ok) << "code " << code;
      }
    }
    // Both lookups and base reads count as key operations; 40 hidden rows
    // and 40 base rows found, 10 hidden rows missing, wherever they ran.
    uint64_t reads = 0, refused = 0;
    for (uint32_t i = 0; i < 2; ++i) {
      const LdmStats now = cluster.ldm(static_cast<uint16_t>(i)).stats();
      reads += now.reads - before[i].reads;
      refused += now.refused - before[i].refused;
    }
    EXPECT_EQ(reads, 80u);
    EXPECT_EQ(refused, 10u);
    if (layout == Layout::kSeparate) {
      EXPECT_EQ(direct_ends, 0u);
    } else {
      // About a quarter of the codes have both rows in LDM 0's partitions.
      EXPECT_GT(direct_ends, 0u) << "no lookup ran directly";
    }
    answers.push_back(std::move(results));
    // The same 20 codes in one train: every row, each its own; with TC
    // beside LDM 0, those whose lookup and base row are both there answer
    // in the train's KeyDataTrain, as many as ended their own transaction
    // above.
    std::vector<Api::BatchOp> by_code_reads;
    for (uint32_t code = 1000; code < 1020; ++code)
      by_code_reads.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
    const LdmStats train_before = cluster.ldm(0).stats();
    const TxResult train = api.run_batch(t, by_code_reads, /*train=*/true);
    ASSERT_TRUE(train.ok) << error_text(train.error);
    ASSERT_EQ(train.rows.size(), 20u);
    std::set<uint64_t> ids;
    for (const RowValues& row : train.rows) ids.insert(int_of<uint64_t>(row.at(kId)));
    EXPECT_EQ(ids.size(), 20u);
    EXPECT_EQ(*ids.rbegin(), 19u);
    uint32_t ended_alone = 0;
    for (uint32_t i = 0; i < 20; ++i) ended_alone += answers.back()[i].ended_with_data ? 1 : 0;
    EXPECT_EQ(train.train_ops.size(), ended_alone);
    if (layout == Layout::kTcWithLdm0) {
      // The train looks its hidden rows in LDM 0 up ahead, and then the
      // base rows of those: each found among the rows its look-ahead listed.
      // A base row in LDM 0 whose hidden row is LDM 1's is searched for.
      const IndexDef& index =
          *std::find_if(t.indexes.begin(), t.indexes.end(), [&](const IndexDef& x) { return x.index_id == by_code; });
      const TableDef hidden = hidden_unique_table(t, index);
      uint64_t hidden_here = 0, both_here = 0, base_only_here = 0;
      for (uint32_t code = 1000; code < 1020; ++code) {
        const bool h = in_ldm0(hidden, Values().u32(0, code));
        const bool b = in_ldm0(t, item_key(code - 1000));
        hidden_here += h ? 1 : 0;
        both_here += h && b ? 1 : 0;
        base_only_here += !h && b ? 1 : 0;
      }
      EXPECT_EQ(both_here, ended_alone);
      const LdmStats after = cluster.ldm(0).stats();
      EXPECT_EQ(after.lookahead_hits - train_before.lookahead_hits, hidden_here + both_here);
      EXPECT_EQ(after.index_searches - train_before.index_searches, base_only_here);
    }

    // A missing unique value in the middle of a train aborts it at its
    // turn, wherever its hidden row would be: the train's update before it
    // does not happen, and the lookups after it answer nothing.
    for (uint32_t missing = 1040; missing < 1050; ++missing) {
      std::vector<Api::BatchOp> ops;
      for (uint32_t code = 1000; code < 1006; ++code)
        ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
      ops.push_back({OpType::kUpdate, LockMode::kExclusive, item_key(2), Values().i32(kQty, 22)});
      ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, missing), {}, by_code});
      for (uint32_t code = 1006; code < 1012; ++code)
        ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
      const TxResult failed = api.run_batch(t, ops, /*train=*/true);
      EXPECT_FALSE(failed.ok) << "code " << missing;
      EXPECT_EQ(failed.error, ErrorCode::kNoSuchRow) << "code " << missing;
    }
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(2)).rows.at(0)).qty, 2);
  }
  for (std::size_t i = 0; i < answers[0].size(); ++i) {
    SCOPED_TRACE("code " + std::to_string(1000 + i));
    EXPECT_EQ(answers[0][i].ok, i < 40);
    EXPECT_EQ(answers[1][i].ok, i < 40);
    EXPECT_EQ(answers[0][i].error, answers[1][i].error);
    if (i < 40) {
      ASSERT_EQ(answers[1][i].rows.size(), 1u);
      EXPECT_EQ(item_of(answers[0][i].rows.at(0)), item_of(answers[1][i].rows.at(0)));
      EXPECT_EQ(int_of<uint64_t>(answers[1][i].rows.at(0).at(kId)), i);
    } else {
      EXPECT_EQ(answers[1][i].error, ErrorCode::kNoSuchRow);
    }
  }
}

// A train's reads by a unique key whose hidden rows are too wide for the
// look-ahead's room (a 300-byte VARCHAR key: over 256 bytes) are not looked
// up ahead: they take the path of a lone read by unique key, with the same
// answers, a missing value aborting the train.
TEST(LdmWithTcTest, WideUniqueKeysInATrainAreLookedUpAtTheirTurn) {
  BlockCluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(tagged_table(300));
  const uint32_t by_tag = index_id_of(t, "by_tag");
  const auto tag = [](uint64_t id) { return std::string(290, 'x') + std::to_string(id); };
  for (uint64_t id = 0; id < 24; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, tag(id))).ok);
  const LdmStats before = cluster.ldm(0).stats();
  std::vector<Api::BatchOp> reads;
  for (uint64_t id = 0; id < 24; ++id)
    reads.push_back({OpType::kRead, LockMode::kCommitted, Values().str(1, tag(id)), {}, by_tag});
  const TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 24u);
  std::set<uint64_t> ids;
  for (const RowValues& row : r.rows) {
    const uint64_t id = int_of<uint64_t>(row.at(0));
    EXPECT_EQ(str_of(row.at(1)), tag(id));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 24u);
  // Stages 0-1 still listed each hidden key's candidates, but no lookup ran
  // ahead, so no base key was: every base row in LDM 0 was searched for.
  const TableDef hidden = hidden_unique_table(t, t.indexes.at(0));
  uint64_t hidden_here = 0, base_here = 0;
  for (uint64_t id = 0; id < 24; ++id) {
    hidden_here += in_ldm0(hidden, Values().str(0, tag(id))) ? 1 : 0;
    base_here += in_ldm0(t, Values().u64(0, id)) ? 1 : 0;
  }
  const LdmStats after = cluster.ldm(0).stats();
  EXPECT_EQ(after.lookahead_hits - before.lookahead_hits, hidden_here);
  EXPECT_EQ(after.index_searches - before.index_searches, base_here);
  reads.insert(reads.begin() + 5, {OpType::kRead, LockMode::kCommitted, Values().str(1, tag(99)), {}, by_tag});
  const TxResult missing = api.run_batch(t, reads, /*train=*/true);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.error, ErrorCode::kNoSuchRow);
}

// TC's prefetch of a read by unique key builds its hidden key in a 2 KB
// room: a key section longer than that (here the unique column given
// twice, the second time 2,100 bytes long) gets no hint, and the read is
// refused as the column given twice, as it is without the prefetch; a
// hint from the part that fitted would have found the first value's row.
TEST(LdmWithTcTest, AUniqueKeyTooLongForThePrefetchIsJudgedWhole) {
  BlockCluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(tagged_table(500));
  const uint32_t by_tag = index_id_of(t, "by_tag");
  for (uint64_t id = 0; id < 8; ++id)
    ASSERT_TRUE(
        api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, "t" + std::to_string(id))).ok);
  for (uint64_t id = 0; id < 8; ++id) {
    SCOPED_TRACE("id " + std::to_string(id));
    const TxResult found =
        api.run(t, OpType::kRead, Values().str(1, "t" + std::to_string(id)), {}, true, std::nullopt, by_tag);
    ASSERT_TRUE(found.ok) << error_text(found.error);
    const TxResult twice =
        api.run(t, OpType::kRead, Values().str(1, "t" + std::to_string(id)).str(1, std::string(2100, 'y')), {}, true,
                std::nullopt, by_tag);
    EXPECT_FALSE(twice.ok);
    EXPECT_EQ(twice.error, ErrorCode::kBadRequest);
  }
}

// A write committed straight at the LDM that owns the key, as only TC may
// send one: how a test makes a unique index and its table disagree (TC
// refuses writes to a hidden table from an API). `table` is the table as
// the LDM has it (for a hidden one, hidden_unique_table with the index's id).
void ldm_write(BlockCluster& cluster, const TableDef& table, OpType op, const Values& key, const Values& values = {}) {
  std::array<std::byte, kMaxKeyBytes> encoded{};
  const uint32_t n = encode_key_section(KeyCodec::for_primary_key(table), key.bytes(), encoded).value();
  const uint64_t hash = hash_key(encoded.data(), n);
  LqhKeyReq req;
  req.tc_op = 7;
  req.tx = tx_id(900'000 + static_cast<uint32_t>(op));
  req.table_id = table.table_id;
  req.table_version = table.version;
  req.op = op;
  req.lock = op == OpType::kRead ? LockMode::kCommitted : LockMode::kExclusive;
  req.result_to = ResultTo::kTc;
  req.partition = partition_of(hash, table.partitions);
  req.key_hash = static_cast<uint32_t>(hash);
  req.key = key.bytes();
  req.values = values.bytes();
  const auto ldm = static_cast<uint16_t>(req.partition % 2);
  const auto answer = [&](const Captured& x) {
    return x.number() == gsn::kLqhKeyConf || x.number() == gsn::kLqhKeyRef;
  };
  cluster.send(block_numbers::kLdm, encode(req), ldm);
  ASSERT_EQ(cluster.inbox().take(answer).number(), gsn::kLqhKeyConf) << "the LDM refused the write";
  // The commit's confirmation goes to TC, which knows no such transaction
  // and drops it; a read sent after it in the same queue says it is done.
  cluster.send(block_numbers::kLdm, encode(gsn::kLqhCommitReq, LqhTxReq{req.tx, 0}), ldm);
  req.tx = tx_id(900'100);
  req.op = OpType::kRead;
  req.lock = LockMode::kCommitted;
  req.values = {};
  cluster.send(block_numbers::kLdm, encode(req), ldm);
  const Captured read = cluster.inbox().take(answer);
  EXPECT_EQ(read.number(), op == OpType::kDelete ? gsn::kLqhKeyRef : gsn::kLqhKeyConf);
}

TEST(LdmWithTcTest, UniqueKeyChangesCommittedOrRolledBackKeepTheHiddenTableInStep) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  const auto code_of = [&](uint64_t id) -> std::optional<uint32_t> {
    const TxResult r = api.run(t, OpType::kRead, item_key(id));
    EXPECT_TRUE(r.ok) << "row " << id;
    if (!r.ok || !r.rows.at(0).at(kCode)) return std::nullopt;
    return int_of<uint32_t>(r.rows.at(0).at(kCode));
  };
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20})).ok);
  // Many rows may have a NULL code (NDB's unique indexes skip NULLs).
  for (uint64_t id = 3; id < 6; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{3, "c", std::nullopt})).ok);
  expect_hidden_agrees(api, t, by_code);

  // To another row's value: refused, the row keeps its own.
  EXPECT_EQ(api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 20)).error, ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(code_of(1), 10u);
  expect_hidden_agrees(api, t, by_code);
  // To its own value, and a write of the same row: accepted, nothing moves.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 10)).ok);
  ASSERT_TRUE(api.run(t, OpType::kWrite, item_key(2), item_values(2, Item{9, "b", 20})).ok);
  expect_hidden_agrees(api, t, by_code);
  // From NULL to a value and back.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(3), Values().u32(kCode, 30)).ok);
  expect_hidden_agrees(api, t, by_code);
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(3), Values().null(kCode)).ok);
  expect_hidden_agrees(api, t, by_code);

  // A swap in one transaction, through a third value; rolled back, then committed.
  const auto swap = [&](TxId tx, uint32_t conn) {
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 99), false, tx, 0,
                                  LockMode::kExclusive, true, conn))
                    .ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().u32(kCode, 10), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 20), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
    // Inside the transaction the new mapping holds already.
    const TxResult own = api.wait(
        api.send(t, OpType::kRead, Values().u32(kCode, 20), {}, false, tx, by_code, LockMode::kExclusive, false, conn));
    ASSERT_TRUE(own.ok) << error_text(own.error);
    EXPECT_EQ(int_of<uint64_t>(own.rows.at(0).at(kId)), 1u);
  };
  swap(tx_id(501), 501);
  api.rollback(tx_id(501), 501);
  EXPECT_EQ(code_of(1), 10u);
  EXPECT_EQ(code_of(2), 20u);
  expect_hidden_agrees(api, t, by_code);
  swap(tx_id(502), 502);
  api.commit(tx_id(502), 502);
  EXPECT_EQ(code_of(1), 20u);
  EXPECT_EQ(code_of(2), 10u);
  expect_hidden_agrees(api, t, by_code);

  // Delete a row and give its value to a new one in one transaction; rolled back, then committed.
  const auto move_code = [&](TxId tx, uint32_t conn) {
    ASSERT_TRUE(
        api.wait(api.send(t, OpType::kDelete, item_key(2), {}, false, tx, 0, LockMode::kExclusive, true, conn)).ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kInsert, item_key(6), item_values(6, Item{6, "f", 10}), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
  };
  move_code(tx_id(503), 503);
  api.rollback(tx_id(503), 503);
  EXPECT_EQ(code_of(2), 10u);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(6)).error, ErrorCode::kNoSuchRow);
  expect_hidden_agrees(api, t, by_code);
  move_code(tx_id(504), 504);
  api.commit(tx_id(504), 504);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(2)).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(code_of(6), 10u);
  expect_hidden_agrees(api, t, by_code);

  // A failed update inside a longer transaction aborts all of it.
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(4), Values().u32(kCode, 40), false, tx_id(505), 0,
                                LockMode::kExclusive, true, 505))
                  .ok);
  EXPECT_EQ(api.wait(api.send(t, OpType::kUpdate, item_key(5), Values().u32(kCode, 20), true, tx_id(505), 0,
                              LockMode::kExclusive, false, 505))
                .error,
            ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(code_of(4), std::nullopt);
  EXPECT_EQ(code_of(5), std::nullopt);
  expect_hidden_agrees(api, t, by_code);
  EXPECT_EQ(cluster.ldm(0).stats().operation_records_in_use + cluster.ldm(1).stats().operation_records_in_use, 0u);
  EXPECT_EQ(cluster.ldm(0).stats().lock_records_in_use + cluster.ldm(1).stats().lock_records_in_use, 0u);
}

// Only TC writes a unique index's hidden table, in step with its base
// table. A request that names one by hand (the API never does) may read it
// but not write it: each write is refused with 4000 and changes nothing.
TEST(LdmWithTcTest, WritesToAHiddenUniqueIndexTableFromAnApiAreRefused) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  const TableDef hidden = hidden_of(t, by_code);
  const Values row = Values().u32(0, 20).u64(1, 1);
  for (const auto& [op, key, values] : {std::tuple{OpType::kDelete, Values().u32(0, 10), Values()},
                                        std::tuple{OpType::kUpdate, Values().u32(0, 10), Values().u64(1, 2)},
                                        std::tuple{OpType::kWrite, Values().u32(0, 10), Values().u32(0, 10).u64(1, 2)},
                                        std::tuple{OpType::kInsert, Values().u32(0, 20), row}}) {
    const TxResult r = api.run(hidden, op, key, values);
    EXPECT_FALSE(r.ok) << op_type_name(op);
    EXPECT_EQ(r.error, ErrorCode::kBadRequest) << op_type_name(op) << ": " << error_text(r.error);
  }
  EXPECT_TRUE(api.run(hidden, OpType::kRead, Values().u32(0, 10)).ok) << "reading it stays allowed";
  expect_hidden_agrees(api, t, by_code);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
}

// A hidden row missing when TC deletes it to keep a unique index in step
// with its table (it never deletes one for a NULL, so a missing row means
// the index disagrees with its table) is an internal error (4349), logged,
// that aborts the write's transaction, so the disagreement does not go
// unnoticed. The test makes the disagreement by deleting a hidden row
// straight at its LDM (the API is never given a hidden table).
TEST(LdmWithTcTest, AHiddenRowMissingForItsTablesRowAbortsTheWriteThatFindsItAndIsLogged) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20})).ok);
  const auto code_index =
      std::find_if(t.indexes.begin(), t.indexes.end(), [&](const IndexDef& i) { return i.index_id == by_code; });
  TableDef hidden = hidden_unique_table(t, *code_index);
  hidden.table_id = by_code;
  hidden.version = t.version;
  ldm_write(cluster, hidden, OpType::kDelete, Values().u32(0, 10));

  const std::string log_path = ::testing::TempDir() + "ldm_tc_test_index_" + std::to_string(::getpid()) + ".log";
  std::remove(log_path.c_str());
  ASSERT_TRUE(log_set_file(log_path));
  const TxResult removed = api.run(t, OpType::kDelete, item_key(1));
  const TxResult updated = api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 30));
  log_set_file("");
  EXPECT_EQ(removed.error, ErrorCode::kIndexInconsistent);
  EXPECT_EQ(removed.error_op, 0u);
  EXPECT_EQ(updated.error, ErrorCode::kIndexInconsistent);
  std::ifstream log_file(log_path);
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  std::remove(log_path.c_str());
  EXPECT_NE(log.find("ERROR"), std::string::npos) << log;
  EXPECT_NE(log.find("'items$by_code'"), std::string::npos) << log;
  EXPECT_NE(log.find("disagrees with its table"), std::string::npos) << log;

  // Neither write happened: row 1 keeps its code, and no hidden row for 30 was left.
  const TxResult row1 = api.run(t, OpType::kRead, item_key(1));
  ASSERT_TRUE(row1.ok) << error_text(row1.error);
  EXPECT_EQ(item_of(row1.rows.at(0)).code, 10u);
  EXPECT_EQ(api.run(t, OpType::kRead, Values().u32(kCode, 30), {}, true, std::nullopt, by_code).error,
            ErrorCode::kNoSuchRow);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
  // With the hidden row put back, the index agrees again and the same delete runs.
  ldm_write(cluster, hidden, OpType::kInsert, Values().u32(0, 10), Values().u32(0, 10).u64(1, 1));
  expect_hidden_agrees(api, t, by_code);
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(1)).ok);
  expect_hidden_agrees(api, t, by_code);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
