// Tables dropped under a transaction: TC aborts the transactions that
// wrote to them.
#include <gtest/gtest.h>

#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

// A transaction wrote to a table that DICT then dropped: the LDMs forget
// those writes with the table, so a commit must not confirm them. TC
// aborts such a transaction when the table is dropped (283, in a
// TcAbortRep, before the commit that comes later is refused): its writes
// to a table that stays are undone and its locks released. A transaction
// that only read the dropped table, with a lock, commits.
TEST(LdmWithTcTest, ATransactionThatWroteToADroppedTableIsAbortedAndTheRestUndone) {
  BlockCluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  TableDef kept_def = plain_items();
  kept_def.name = "kept";
  const TableDef kept = cluster.create(kept_def);
  const uint32_t kept_by_code = index_id_of(kept, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(kept, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  // The writer: an insert (and its unique index's hidden row) in the table
  // to be dropped, an update and an insert in the one that stays.
  const TxId writer = tx_id(701), reader = tx_id(702);
  constexpr uint32_t kWriter = 701, kReader = 702;
  ASSERT_TRUE(api.wait(api.send(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20}), false, writer, 0,
                                LockMode::kExclusive, true, kWriter))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(kept, OpType::kUpdate, item_key(1), Values().u32(kCode, 11), false, writer, 0,
                                LockMode::kExclusive, false, kWriter))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(kept, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20}), false, writer, 0,
                                LockMode::kExclusive, false, kWriter))
                  .ok);
  const TxResult read =
      api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, reader, 0, LockMode::kShared, true, kReader));
  ASSERT_TRUE(read.ok) << error_text(read.error);
  EXPECT_EQ(item_of(read.rows.at(0)).code, 10u);

  cluster.drop("items");
  // The writer's commit: the first answer for it says it was aborted.
  cluster.send(block_numbers::kTc, encode(TcTxMessage{gsn::kTcCommitReq, kWriter, writer}));
  const Captured first = cluster.inbox().take([&](const Captured& x) {
    if (x.number() == gsn::kTcAbortRep) return decode_tc_abort_rep(x.signal())->api_conn == kWriter;
    if (x.number() == gsn::kTcKeyConf) return decode_tc_key_conf(x.signal())->api_conn == kWriter;
    if (x.number() == gsn::kTcKeyRef) return decode_tc_key_ref(x.signal())->api_conn == kWriter;
    return false;
  });
  ASSERT_EQ(first.number(), gsn::kTcAbortRep) << "the commit was answered as if the writes had gone somewhere";
  EXPECT_EQ(decode_tc_abort_rep(first.signal())->error, ErrorCode::kTableDropped);
  EXPECT_EQ(cluster.tc().stats().drop_aborts, 1u);
  api.commit(reader, kReader);
  // The drop is confirmed while the abort is still under way, so the commit
  // finds the transaction either gone (answered: unknown transaction) or
  // still aborting (no answer of its own: the abort report is the answer).
  // The reader's commit went through TC after it, so any answer is here now.
  const std::vector<Captured> late = cluster.inbox().drain([&](const Captured& x) {
    return (x.number() == gsn::kTcKeyRef && decode_tc_key_ref(x.signal())->api_conn == kWriter) ||
           (x.number() == gsn::kTcKeyConf && decode_tc_key_conf(x.signal())->api_conn == kWriter);
  });
  ASSERT_LE(late.size(), 1u);
  for (const Captured& x : late) {
    ASSERT_EQ(x.number(), gsn::kTcKeyRef) << "the commit succeeded after its transaction was aborted";
    EXPECT_EQ(decode_tc_key_ref(x.signal())->error, ErrorCode::kUnknownTransaction);
  }

  // Nothing of the writer stays in the table that stays, and nothing is locked.
  const TxResult row1 = api.run(kept, OpType::kRead, item_key(1));
  ASSERT_TRUE(row1.ok) << error_text(row1.error);
  EXPECT_EQ(item_of(row1.rows.at(0)).code, 10u);
  EXPECT_EQ(api.run(kept, OpType::kRead, item_key(2)).error, ErrorCode::kNoSuchRow);
  expect_hidden_agrees(api, kept, kept_by_code);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
  ASSERT_TRUE(api.run(kept, OpType::kUpdate, item_key(1), Values().u32(kCode, 12)).ok);
  expect_hidden_agrees(api, kept, kept_by_code);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
