// Commit, abort and timeouts in TC: deadlocks broken by TC's timeout,
// operation records running out, and a batch whose rest never comes.
#include <gtest/gtest.h>

#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

TEST(LdmWithTcTest, TcsTimeoutBreaksADeadlockAndTheOtherTransactionGoesOn) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "x", 1})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "y", 2})).ok);
  const TxId a = tx_id(1), b = tx_id(2);
  constexpr uint32_t kA = 901, kB = 902;  // the transactions' api_conn
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 10), false, a, 0,
                                LockMode::kExclusive, true, kA))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 20), false, b, 0,
                                LockMode::kExclusive, true, kB))
                  .ok);
  // a waits for b's row, b for a's: a deadlock that only TC's timeout breaks.
  api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 11), false, a, 0, LockMode::kExclusive, false, kA);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 21), false, b, 0, LockMode::kExclusive, false, kB);
  // TC aborts one with 266, or both when they time out in the same check;
  // a survivor is then granted the row its victim held.
  const TxResult ra = api.wait(kA);
  const TxResult rb = api.wait(kB);
  expect_a_deadlock_victim(ra, rb);
  if (ra.ok) api.commit(a, kA);
  if (rb.ok) api.commit(b, kB);
  const auto qty = [&](uint64_t id) {
    return int_of<int32_t>(api.run(t, OpType::kRead, item_key(id)).rows.at(0).at(kQty));
  };
  EXPECT_EQ(qty(1), ra.ok ? 10 : rb.ok ? 21 : 1);
  EXPECT_EQ(qty(2), ra.ok ? 11 : rb.ok ? 20 : 2);
  // Nothing stays locked: a new transaction writes both rows at once.
  const TxId c = tx_id(3);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 30), false, c, 0,
                                LockMode::kExclusive, true, 903))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 31), true, c, 0,
                                LockMode::kExclusive, false, 903))
                  .ok);
  EXPECT_EQ(qty(1), 30);
  EXPECT_EQ(qty(2), 31);
}

// Two transactions read a row with shared locks and then both update it:
// each upgrade waits for the other's shared lock, a deadlock that only TC's
// timeout breaks; the survivor gets the row and nothing stays locked.
TEST(LdmWithTcTest, TwoSharedHoldersUpgradingDeadlockAndTheTimeoutBreaksIt) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "x", 1})).ok);
  const TxId a = tx_id(11), b = tx_id(12);
  constexpr uint32_t kA = 911, kB = 912;
  ASSERT_TRUE(api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, a, 0, LockMode::kShared, true, kA)).ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, b, 0, LockMode::kShared, true, kB)).ok);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 10), true, a, 0, LockMode::kExclusive, false, kA);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 20), true, b, 0, LockMode::kExclusive, false, kB);
  const TxResult ra = api.wait(kA);
  const TxResult rb = api.wait(kB);
  expect_a_deadlock_victim(ra, rb);
  const int32_t qty = item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty;
  EXPECT_EQ(qty, ra.ok ? 10 : rb.ok ? 20 : 1);
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 30)).ok);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 30);
  EXPECT_EQ(cluster.ldm(0).stats().lock_records_in_use + cluster.ldm(1).stats().lock_records_in_use, 0u);
}

// MaxNoOfConcurrentOperations reached inside a transaction, in TC (each
// insert takes an operation record for the row and one for its hidden
// unique row) or in an LDM: the transaction fails with 233, everything it
// did is undone, every record is free again, and the next transactions run.
TEST(LdmWithTcTest, RunningOutOfOperationRecordsAbortsTheTransactionCleanly) {
  BlockCluster cluster(Layout::kSeparate, 20, /*max_operations=*/12);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  for (uint32_t attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const TxId tx = tx_id(600 + attempt);
    const uint32_t conn = 600 + attempt;
    TxResult r;
    uint64_t id = 0;
    for (; id < 40; ++id) {
      r = api.wait(api.send(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", uint32_t(id)}), false, tx, 0,
                            LockMode::kExclusive, id == 0, conn));
      if (!r.ok) break;
    }
    ASSERT_FALSE(r.ok) << "the records never ran out";
    EXPECT_EQ(r.error, ErrorCode::kTooManyOperations);
    EXPECT_EQ(r.error_op, 0u);  // every request was the batch's operation 0
    EXPECT_GT(id, 0u);
    // Nothing of it stays: no row, no hidden row, no record.
    EXPECT_EQ(api.scan(t, 0, {}, 7).size(), 0u);
    EXPECT_EQ(api.scan(hidden_of(t, by_code), 0, {}, 7).size(), 0u);
    for (uint16_t i = 0; i < 2; ++i) {
      EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
      EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
    }
  }
  // A transaction that fits runs, and its rows can be read by unique key.
  for (uint64_t id = 0; id < 3; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", uint32_t(id)})).ok);
  expect_hidden_agrees(api, t, by_code);
}

// An API that stops sending in the middle of a batch (it died without the
// link going down, or gave up when its send buffer stayed full) leaves TC
// waiting for the rest with the locks of what already ran. The inactive
// timeout covers that wait too: the transaction is aborted and its locks
// released, and a writer waiting for them goes on.
TEST(LdmWithTcTest, ABatchWhoseRestNeverComesIsAbortedByTheInactiveTimeout) {
  BlockCluster cluster(Layout::kSeparate, 20, 32768, /*inactive_timeout_ms=*/60);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "one", std::nullopt})).ok);
  const Values key = item_key(1);
  const Values values = Values().i32(kQty, 2);
  TcKeyReq first{.api_conn = 901,
                 .tx = tx_id(901),
                 .table_id = t.table_id,
                 .table_version = t.version,
                 .op = OpType::kUpdate,
                 .lock = LockMode::kExclusive,
                 .flags = kFlagStartTx,  // the first of a batch; the rest never comes
                 .op_index = 0,
                 .key = key.bytes(),
                 .values = values.bytes()};
  api.send_raw(first);
  // Its update runs and holds row 1; another writer waits for the lock,
  // longer than the inactive timeout and less than the deadlock timeout
  // (300 ms), unless TC gives the stalled batch up first.
  const TxResult other = api.run(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 3));
  EXPECT_TRUE(other.ok) << error_text(other.error) << ": the stalled batch kept its lock";
  const TxResult stalled = api.wait(901);
  EXPECT_EQ(stalled.error, ErrorCode::kInactiveTimeout);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 3);
  EXPECT_EQ(cluster.tc().stats().inactive_aborts, 1u);
  // The transaction is gone: the rest of its batch, arriving late now, is
  // refused as a transaction TC does not know, and its id is free again.
  TcKeyReq rest = first;
  rest.flags = kFlagExecute | kFlagCommit;
  rest.op_index = 1;
  rest.batch_ops = 2;
  api.send_raw(rest);
  EXPECT_EQ(api.wait(901).error, ErrorCode::kUnknownTransaction);
  first.flags = kFlagStartTx | kFlagExecute | kFlagCommit;
  first.batch_ops = 1;
  api.send_raw(first);
  const TxResult again = api.wait(901);
  EXPECT_TRUE(again.ok) << error_text(again.error);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 2);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
