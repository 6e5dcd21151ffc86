// Key requests through TC: operations by primary and unique key, and
// read-committed reads that TC runs directly in an LDM of its own thread,
// answering as a read sent as a signal does.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

TEST(LdmWithTcTest, KeyOperationsUniqueIndexesAndScansThroughTc) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  for (uint64_t id = 0; id < 40; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id),
                        item_values(id, Item{int32_t(id % 5), long_name(id), uint32_t(100 + id)}))
                    .ok);
  // By primary key and by unique key.
  TxResult r = api.run(t, OpType::kRead, item_key(7));
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(int_of<uint32_t>(r.rows[0].at(kCode)), 107u);
  r = api.run(t, OpType::kRead, Values().u32(kCode, 107), {}, true, std::nullopt, by_code);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(int_of<uint64_t>(r.rows[0].at(kId)), 7u);
  // Change the unique value: the hidden table follows.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(7), Values().u32(kCode, 5007)).ok);
  EXPECT_EQ(api.run(t, OpType::kRead, Values().u32(kCode, 107), {}, true, std::nullopt, by_code).error,
            ErrorCode::kNoSuchRow);
  r = api.run(t, OpType::kRead, Values().u32(kCode, 5007), {}, true, std::nullopt, by_code);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(int_of<uint64_t>(r.rows.at(0).at(kId)), 7u);
  // A duplicate unique value aborts the insert; NULLs are not indexed.
  EXPECT_EQ(api.run(t, OpType::kInsert, item_key(100), item_values(100, Item{1, "dup", 5007})).error,
            ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(100)).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(101), item_values(101, Item{1, "a", std::nullopt})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(102), item_values(102, Item{1, "b", std::nullopt})).ok);
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(101)).ok);
  // Deleting frees the unique value.
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(7)).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(103), item_values(103, Item{1, "c", 5007})).ok);

  // Scans over all 8 partitions (both LDM instances).
  std::set<uint64_t> ids;
  for (const RowValues& row : api.scan(t, 0, {}, 3)) EXPECT_TRUE(ids.insert(int_of<uint64_t>(row.at(kId))).second);
  std::set<uint64_t> want;
  for (uint64_t id = 0; id < 40; ++id)
    if (id != 7) want.insert(id);
  want.insert({102, 103});
  EXPECT_EQ(ids, want);
  const auto bounds =
      bounds_section(Bounds{true, true, true, true, 1, 1, {}, {}}, Values().i32(kQty, 2), Values().i32(kQty, 2));
  std::size_t twos = 0;
  for (const RowValues& row : api.scan(t, index_id_of(t, "by_qty"), bounds, 2)) {
    EXPECT_EQ(int_of<int32_t>(row.at(kQty)), 2);
    ++twos;
  }
  EXPECT_EQ(twos, 7u);  // ids 2, 12, ..., 37 (7 was deleted)
}

// Where TC shares a thread with an LDM instance, read-committed reads of that
// instance's partitions run there directly (no LqhKeyReq/LqhKeyConf), and
// everything answers exactly as with every block on its own thread.
TEST(LdmWithTcTest, ReadCommittedRunsInACoLocatedLdmDirectlyWithTheSameAnswers) {
  std::vector<std::vector<TxResult>> answers;
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    BlockCluster cluster(layout, /*tc_timer_ms=*/600000);  // no timer signal during the test
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    // Which LDM instance owns each key (partition p lives on LDM p % 2).
    const KeyCodec pk = KeyCodec::for_primary_key(t);
    const auto ldm_of = [&](uint64_t id) {
      std::array<std::byte, kMaxKeyBytes> key{};
      const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
      return partition_of(hash_key(key.data(), n), t.partitions) % 2;
    };
    const LdmStats before[2] = {cluster.ldm(0).stats(), cluster.ldm(1).stats()};
    const uint64_t signals_before[2] = {cluster.signals_on("ldm 0"), cluster.signals_on("ldm 1")};
    uint64_t found[2] = {}, missing[2] = {};
    std::vector<TxResult> results;
    for (uint64_t id = 0; id < 50; ++id) {  // 40..49 do not exist
      results.push_back(api.run(t, OpType::kRead, item_key(id)));
      ++(id < 40 ? found : missing)[ldm_of(id)];
      // A read run directly ends its transaction itself: its values and the
      // TcKeyConf in one KeyDataConf.
      EXPECT_EQ(results.back().ended_with_data, layout == Layout::kTcWithLdm0 && ldm_of(id) == 0 && id < 40)
          << "id " << id;
    }
    ASSERT_GT(found[0] * found[1] * missing[0] * missing[1], 0u) << "keys on both instances, found and not";
    for (uint32_t i = 0; i < 2; ++i) {
      const LdmStats now = cluster.ldm(static_cast<uint16_t>(i)).stats();
      EXPECT_EQ(now.reads - before[i].reads, found[i]) << "LDM " << i;
      EXPECT_EQ(now.refused - before[i].refused, missing[i]) << "LDM " << i;
      EXPECT_EQ(now.key_operations - before[i].key_operations, found[i] + missing[i]) << "LDM " << i;
    }
    // LDM 1's thread ran one LqhKeyReq per read of its keys, and for a row
    // that is missing also TC's LqhAbortReq. LDM 0's thread ran the same for
    // its keys, or, with TC there, every TcKeyReq and LDM 1's answers
    // (LqhKeyConf, or LqhKeyRef and LqhAbortConf), and nothing more for its
    // own keys: they ran inside their TcKeyReq and left nothing to abort.
    const uint64_t signalled[2] = {found[0] + 2 * missing[0], found[1] + 2 * missing[1]};
    EXPECT_EQ(cluster.signals_on("ldm 1") - signals_before[1], signalled[1]);
    EXPECT_EQ(cluster.signals_on("ldm 0") - signals_before[0],
              layout == Layout::kSeparate ? signalled[0] : 50 + signalled[1]);
    answers.push_back(std::move(results));
  }
  ASSERT_EQ(answers[0].size(), answers[1].size());
  for (std::size_t i = 0; i < answers[0].size(); ++i) {
    EXPECT_EQ(answers[0][i].ok, answers[1][i].ok) << "id " << i;
    EXPECT_EQ(answers[0][i].error, answers[1][i].error) << "id " << i;
    EXPECT_EQ(answers[1][i].ok ? answers[1][i].rows.size() : 0u, i < 40 ? 1u : 0u) << "id " << i;
    if (answers[0][i].ok && answers[1][i].ok) {
      EXPECT_EQ(item_of(answers[0][i].rows.at(0)), item_of(answers[1][i].rows.at(0))) << "id " << i;
    }
  }
  EXPECT_EQ(answers[1][45].error, ErrorCode::kNoSuchRow);
}

// A transaction of one read-committed read, run directly, keeps no
// transaction record in TC: it answers as one that does (the row in a
// KeyDataConf, or a TcKeyRef naming the read and its error), counts as
// committed or aborted, and is refused as key_req refuses: a transaction id
// in use is a bad request, and the transaction using it goes on.
TEST(LdmWithTcTest, AOneReadTransactionRunDirectlyAnswersAsAnyOther) {
  BlockCluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const KeyCodec pk = KeyCodec::for_primary_key(t);
  const auto on_ldm0 = [&](uint64_t id) {
    std::array<std::byte, kMaxKeyBytes> key{};
    const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
    return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
  };
  std::vector<uint64_t> here;  // ids whose rows are LDM 0's
  for (uint64_t id = 0; id < 200 && here.size() < 12; ++id)
    if (on_ldm0(id)) here.push_back(id);
  ASSERT_EQ(here.size(), 12u);
  for (std::size_t i = 0; i < 8; ++i)
    ASSERT_TRUE(
        api.run(t, OpType::kInsert, item_key(here[i]), item_values(here[i], Item{int32_t(here[i]), "n", std::nullopt}))
            .ok);
  const TcStats before = cluster.tc().stats();
  for (std::size_t i = 0; i < 12; ++i) {  // the last four do not exist
    const TxResult r = api.run(t, OpType::kRead, item_key(here[i]));
    if (i < 8) {
      ASSERT_TRUE(r.ok) << "id " << here[i];
      EXPECT_TRUE(r.ended_with_data);
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_EQ(item_of(r.rows[0]).qty, static_cast<int32_t>(here[i]));
    } else {
      EXPECT_FALSE(r.ok);
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow) << "id " << here[i];
    }
  }
  const TcStats after = cluster.tc().stats();
  EXPECT_EQ(after.transactions_committed - before.transactions_committed, 8u);
  EXPECT_EQ(after.transactions_aborted - before.transactions_aborted, 4u);
  EXPECT_EQ(after.operations - before.operations, 12u);

  // A transaction holds an update of here[0], not yet committed; a
  // one-read transaction under its id is refused, and the update commits.
  const TxId open = api.tx_of_next();
  const uint32_t open_conn =
      api.send(t, OpType::kUpdate, item_key(here[0]), Values().i32(kQty, 500), /*commit=*/false, std::nullopt);
  ASSERT_TRUE(api.wait(open_conn).ok);
  const TxResult clash = api.run(t, OpType::kRead, item_key(here[1]), {}, true, open);
  EXPECT_FALSE(clash.ok);
  EXPECT_EQ(clash.error, ErrorCode::kBadRequest);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(here[0])).rows.at(0)).qty, static_cast<int32_t>(here[0]))
      << "a committed read sees the row as it was";
  api.commit(open, open_conn);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(here[0])).rows.at(0)).qty, 500);
}

// A read-committed read that runs directly sees what one sent as a signal
// sees: the last committed version, not its own transaction's pending
// change; when it fails, the whole transaction (its writes too) aborts; and
// many queued at once are routed right.
TEST(LdmWithTcTest, DirectReadsSeeCommittedRowsAndTheirFailureAbortsTheBatch) {
  BlockCluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  for (uint64_t id = 0; id < 16; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", std::nullopt})).ok);
  for (uint64_t id = 0; id < 16; ++id) {
    SCOPED_TRACE("id " + std::to_string(id));
    // Update, then read committed in the same batch: the old value.
    TxResult r = api.run_batch(t, {{OpType::kUpdate, LockMode::kExclusive, item_key(id), Values().i32(kQty, 2)},
                                   {OpType::kRead, LockMode::kCommitted, item_key(id), {}}});
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(item_of(r.rows[0]).qty, 1);
    // Committed now.
    r = api.run(t, OpType::kRead, item_key(id));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(item_of(r.rows.at(0)).qty, 2);
    // A read of a missing row aborts the batch: the update does not happen.
    r = api.run_batch(t, {{OpType::kUpdate, LockMode::kExclusive, item_key(id), Values().i32(kQty, 3)},
                          {OpType::kRead, LockMode::kCommitted, item_key(1000 + id), {}},
                          {OpType::kRead, LockMode::kCommitted, item_key(id), {}}});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    r = api.run(t, OpType::kRead, item_key(id));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(item_of(r.rows.at(0)).qty, 2);
  }
  // A batch of direct reads ends with its last read's KeyDataConf, counting
  // them all; one that must still commit a write ends with a TcKeyConf; with
  // a read of LDM 1 among them it depends on whether LDM 1 answered before
  // the last read ran, and every row arrives either way.
  const KeyCodec pk = KeyCodec::for_primary_key(t);
  const auto on_ldm0 = [&](uint64_t id) {
    std::array<std::byte, kMaxKeyBytes> key{};
    const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
    return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
  };
  std::vector<uint64_t> here, there;
  for (uint64_t id = 0; id < 16; ++id) (on_ldm0(id) ? here : there).push_back(id);
  ASSERT_GE(here.size(), 2u);
  ASSERT_GE(there.size(), 1u);
  const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };
  TxResult b = api.run_batch(t, {read(here[0]), read(there[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 3u);
  b = api.run_batch(t, {read(there[0]), read(here[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 3u);
  b = api.run_batch(t, {read(here[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 2u);
  EXPECT_TRUE(b.ended_with_data);
  b = api.run_batch(t,
                    {{OpType::kUpdate, LockMode::kExclusive, item_key(here[0]), Values().i32(kQty, 4)}, read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_FALSE(b.ended_with_data) << "the update still had to commit";
  // Reads sent all at once queue together, so TC prefetches them in windows
  // and routes them by the notes its prefetch left, and the LDM finds them
  // by the keys that prefetch encoded: every one still finds its own row (or
  // none). Keys that cannot be encoded (a width that is not the column's)
  // are mixed in, so some of a window's prefetches leave no note.
  std::vector<std::pair<uint32_t, uint64_t>> sent;
  constexpr uint64_t kBadKey = UINT64_MAX;
  for (uint64_t round = 0; round < 8; ++round) {
    for (uint64_t id = 0; id < 20; ++id) {
      sent.emplace_back(api.send(t, OpType::kRead, item_key(id), {}, true, std::nullopt), id);
      if ((id + round) % 7 == 0)
        sent.emplace_back(api.send(t, OpType::kRead, Values().u32(kId, 1), {}, true, std::nullopt), kBadKey);
    }
  }
  for (const auto& [conn, id] : sent) {
    const TxResult r = api.wait(conn);
    if (id == kBadKey) {
      EXPECT_EQ(r.error, ErrorCode::kBadRequest);
      continue;
    }
    if (id >= 16) {
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow) << "id " << id;
      continue;
    }
    ASSERT_TRUE(r.ok) << "id " << id << ": " << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(int_of<uint64_t>(r.rows[0].at(kId)), id);
  }
}

}  // namespace
}  // namespace fjord::engine::ldm_test
