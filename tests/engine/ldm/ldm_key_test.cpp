// LDM key operations: every operation type and error, versions seen by
// read-committed readers, a transaction's own changes, unique-index
// columns before and after, DataMemory and record exhaustion.
#include <gtest/gtest.h>

#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

const Item kApple{5, "apple", 100};
const Item kPear{7, std::nullopt, std::nullopt};

TEST(LdmKeyTest, InsertReadUpdateDeleteWithCommits) {
  Db db;
  const TxId t1 = db.fresh_tx();
  const KeyOutcome ins = db.insert(t1, 1, kApple);
  ASSERT_TRUE(ins.ok) << error_text(ins.error);
  EXPECT_EQ(db.client.commit(t1), 1u);
  EXPECT_EQ(db.committed(1), kApple);

  const TxId t2 = db.fresh_tx();
  ASSERT_TRUE(db.update(t2, 1, Values().i32(kQty, 9).null(kName)).ok);
  EXPECT_EQ(db.client.commit(t2), 1u);
  EXPECT_EQ(db.committed(1), (Item{9, std::nullopt, 100}));

  const TxId t3 = db.fresh_tx();
  ASSERT_TRUE(db.remove(t3, 1).ok);
  EXPECT_EQ(db.client.commit(t3), 1u);
  EXPECT_EQ(db.committed(1), std::nullopt);
  const LdmStats stats = db.h.ldm(0).stats();
  EXPECT_EQ(stats.inserts, 1u);
  EXPECT_EQ(stats.updates, 1u);
  EXPECT_EQ(stats.deletes, 1u);
  EXPECT_EQ(stats.committed_rows, 0u);
  EXPECT_EQ(stats.operation_records_in_use, 0u);
  EXPECT_EQ(stats.lock_records_in_use, 0u);
}

TEST(LdmKeyTest, WriteInsertsThenUpdates) {
  Db db;
  const TxId t1 = db.fresh_tx();
  ASSERT_TRUE(db.write(t1, 4, kApple).ok);
  db.client.commit(t1);
  EXPECT_EQ(db.committed(4), kApple);
  const TxId t2 = db.fresh_tx();
  ASSERT_TRUE(db.write(t2, 4, kPear).ok);
  db.client.commit(t2);
  EXPECT_EQ(db.committed(4), kPear);
}

TEST(LdmKeyTest, ReadsReturnTheRequestedColumnsToTheApiOrToTc) {
  Db db;
  db.put(1, kApple);
  Client::Request r{OpType::kRead, LockMode::kCommitted, db.fresh_tx(), item_key(1), {}, column_list({kCode, kQty})};
  KeyOutcome to_api = db.client.run(r);
  ASSERT_TRUE(to_api.ok);
  EXPECT_TRUE(to_api.data_sent_to_api);
  ASSERT_EQ(to_api.values.size(), 2u);
  EXPECT_EQ(int_of<uint32_t>(to_api.values.at(kCode)), 100u);
  EXPECT_EQ(int_of<int32_t>(to_api.values.at(kQty)), 5);

  r.result_to = ResultTo::kTc;
  r.columns.clear();  // all of them
  KeyOutcome to_tc = db.client.run(r);
  ASSERT_TRUE(to_tc.ok);
  EXPECT_FALSE(to_tc.data_sent_to_api);
  ASSERT_EQ(to_tc.values.size(), 4u);
  EXPECT_EQ(item_of(to_tc.values), kApple);
  EXPECT_EQ(int_of<uint64_t>(to_tc.values.at(kId)), 1u);
}

// A table whose columns are all fixed-size and NOT NULL is read whole from
// ready entry headers (LdmTable::fixed_entries): the same bytes as a read
// that lists every column, padding included, to the API and to TC.
TEST(LdmKeyTest, AllFixedColumnsReadWholeGiveTheBytesAListedReadGives) {
  TableDef t;
  t.name = "fixed";
  t.table_id = 9;
  t.version = 1;
  t.partitions = 4;
  t.columns = {column("id", ColumnType::kUint64), column("small", ColumnType::kInt32),
               column("odd", ColumnType::kBinary, 5), column("code", ColumnType::kUint32),
               column("tail", ColumnType::kChar, 11)};
  t.primary_key = {0};
  Db db({}, t);
  for (uint64_t id = 0; id < 20; ++id) {
    const TxId tx = db.fresh_tx();
    const Values row = Values()
                           .u64(0, id)
                           .i32(1, -static_cast<int32_t>(id))
                           .str(2, std::string(5, static_cast<char>('a' + id)))
                           .u32(3, static_cast<uint32_t>(id * 7))
                           .str(4, std::string(11, static_cast<char>('A' + id)));
    ASSERT_TRUE(db.client.run({OpType::kInsert, LockMode::kExclusive, tx, Values().u64(0, id), row}).ok);
    db.client.commit(tx);
  }
  for (uint64_t id = 0; id < 20; ++id) {
    for (const ResultTo to : {ResultTo::kApi, ResultTo::kTc}) {
      Client::Request r{OpType::kRead, LockMode::kCommitted, db.fresh_tx(), Values().u64(0, id)};
      r.result_to = to;
      // First a read in another order, which leaves other bytes where the
      // whole read has padding to zero.
      r.columns = column_list({4, 2, 3, 0, 1});
      ASSERT_TRUE(db.client.run(r).ok);
      r.columns.clear();
      const KeyOutcome whole = db.client.run(r);
      r.columns = column_list({0, 1, 2, 3, 4});
      const KeyOutcome listed = db.client.run(r);
      ASSERT_TRUE(whole.ok && listed.ok) << "id " << id;
      EXPECT_EQ(whole.raw_values, listed.raw_values) << "id " << id;
      EXPECT_EQ(whole.raw_values.size(), 8 + 8 + 8 + 4 + 8 + 8 + 8 + 4 + 8 + 12) << "id " << id;
      EXPECT_EQ(int_of<uint32_t>(whole.values.at(3)), id * 7);
      EXPECT_EQ(whole.values.at(2)->size(), 5u);
    }
  }
}

TEST(LdmKeyTest, MissingRowsAndDuplicateKeys) {
  Db db;
  db.put(1, kApple);
  const TxId t = db.fresh_tx();
  EXPECT_EQ(db.insert(t, 1, kPear).error, ErrorCode::kDuplicateKey);
  EXPECT_EQ(db.update(t, 2, Values().i32(kQty, 1)).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.remove(t, 2).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.read(t, 2).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.read(t, 2, LockMode::kShared).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.read(t, 2, LockMode::kExclusive).error, ErrorCode::kNoSuchRow);
  // Refused operations hold nothing: the transaction has nothing to commit.
  EXPECT_EQ(db.client.commit(t), 0u);
  EXPECT_EQ(db.h.ldm(0).stats().operation_records_in_use, 0u);
  EXPECT_EQ(db.committed(1), kApple);
}

TEST(LdmKeyTest, UnknownTableAndSchemaVersion) {
  Db db;
  TableDef other = db.table;
  other.table_id = 99;
  Client stranger(db.h, other);
  EXPECT_EQ(stranger.run({OpType::kRead, LockMode::kCommitted, db.fresh_tx(), item_key(1), {}}).error,
            ErrorCode::kNoSuchTable);
  Client::Request r{OpType::kRead, LockMode::kCommitted, db.fresh_tx(), item_key(1), {}};
  r.table_version = db.table.version + 1;
  EXPECT_EQ(db.client.run(r).error, ErrorCode::kSchemaVersion);
}

TEST(LdmKeyTest, MalformedRequestsAreRefusedAsBadRequests) {
  Db db;
  db.put(1, kApple);
  const auto op = [&](OpType type, Values key, Values values, std::vector<std::byte> columns = {}) {
    return db.client.run({type, LockMode::kExclusive, db.fresh_tx(), std::move(key), std::move(values), columns}).error;
  };
  const auto bad = ErrorCode::kBadRequest;
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().i32(9, 1)), bad) << "unknown column";
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().null(kQty)), bad) << "NULL in NOT NULL";
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().i64(kQty, 1)), bad) << "wrong width";
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().str(kName, std::string(41, 'x'))), bad) << "too long";
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().i32(kQty, 1).i32(kQty, 2)), bad) << "column twice";
  EXPECT_EQ(op(OpType::kUpdate, item_key(1), Values().u64(kId, 2)), bad) << "changes the primary key";
  EXPECT_EQ(op(OpType::kInsert, item_key(2), Values().u64(kId, 2).null(kName)), bad) << "NOT NULL qty missing";
  EXPECT_EQ(op(OpType::kDelete, item_key(1), Values().i32(kQty, 1)), bad) << "delete with values";
  EXPECT_EQ(op(OpType::kRead, item_key(1), {}, column_list({7})), bad) << "unknown column to read";
  EXPECT_EQ(op(OpType::kRead, item_key(1), {}, column_list({1, 1})), bad) << "column to read twice";
  EXPECT_EQ(op(OpType::kRead, Values().u32(kId, 1), {}), bad) << "key of the wrong width";
  EXPECT_EQ(op(OpType::kRead, Values().u64(kQty, 1), {}), bad) << "key names a non-key column";
  EXPECT_EQ(op(OpType::kRead, item_key(1).u64(kId, 1), {}), bad) << "key column twice";
  // A partition that the key does not hash to.
  Client::Request wrong{OpType::kRead, LockMode::kCommitted, db.fresh_tx(), item_key(1), {}};
  wrong.partition = (db.client.partition_of_key(item_key(1)) + 1) % db.table.partitions;
  EXPECT_EQ(db.client.run(wrong).error, bad);
  wrong.partition = db.table.partitions;  // no such partition
  EXPECT_EQ(db.client.run(wrong).error, bad);
  // The right partition with a key hash that is not the key's, for a read
  // and for a write.
  wrong.partition.reset();
  wrong.key_hash = db.client.key_hash_of(item_key(1)) ^ 1;
  EXPECT_EQ(db.client.run(wrong).error, bad);
  Client::Request wrong_write{OpType::kUpdate, LockMode::kExclusive, db.fresh_tx(), item_key(1), Values().i32(kQty, 7)};
  wrong_write.key_hash = db.client.key_hash_of(item_key(1)) + 1;
  EXPECT_EQ(db.client.run(wrong_write).error, bad);
  // Nothing of it changed the row.
  EXPECT_EQ(db.committed(1), kApple);
}

TEST(LdmKeyTest, PrefetchHintsIgnoreWhatTheyCannotUseAndChangeNothing) {
  HarnessOptions options;
  options.ldm_threads = 2;
  Db db(options);
  for (uint64_t id = 0; id < 50; ++id) db.put(id, kApple);
  // The LDM threads are idle now; prefetch() only reads their tables.
  std::vector<std::byte> buffer(frame::kMaxFrameBytes);
  Signal s;
  const auto signal_of = [&](const SignalOut& out, std::size_t words) -> const Signal& {
    const std::size_t n = frame::pack_frame(buffer, {out.number, {block_numbers::kLdm, 0}, {block_numbers::kTc, 0}, 0},
                                            out.data().first(words), out.section_list(), false);
    EXPECT_GT(n, 0u);
    frame::decode_validated({buffer.data(), n}, s.view);
    return s;
  };
  const Values key = item_key(3);
  LqhKeyReq m;
  m.table_id = db.table.table_id;
  m.table_version = db.table.version;
  m.key = key.bytes();
  m.key_hash = db.client.key_hash_of(key);
  const uint32_t right = db.client.partition_of_key(key);
  const auto hint_all = [&](const LqhKeyReq& req, std::size_t words = 12) {
    for (uint16_t ldm = 0; ldm < 2; ++ldm)
      for (int stage = 0; stage < 2; ++stage) db.h.ldm(ldm).prefetch(signal_of(encode(req), words), stage);
  };
  hint_all(m);  // the key's partition, and on the instance that does not own it
  LqhKeyReq other = m;
  other.table_id = 99;  // no such table
  hint_all(other);
  other = m;
  other.partition = db.table.partitions;  // no such partition
  hint_all(other);
  other.partition = right;
  other.key_hash = ~m.key_hash;  // a hash of no row here
  hint_all(other);
  hint_all(m, 11);  // too few words: not an LqhKeyReq of this version
  db.h.ldm(0).prefetch(signal_of(encode(LqhKeyRef{1, TxId{2}, ErrorCode::kNoSuchRow}), 4), 1);  // another signal
  for (uint64_t id = 0; id < 50; ++id) EXPECT_EQ(db.committed(id), kApple) << id;
}

TEST(LdmKeyTest, AnUndecodableSignalIsRefused) {
  Db db;
  // Three words: a tc_op and a transaction id, nothing else.
  db.h.send_raw(0, gsn::kLqhKeyReq, {42, 1, 2});
  const Captured c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kLqhKeyRef; });
  const LqhKeyRef ref = decode_lqh_key_ref(c.signal()).value();
  EXPECT_EQ(ref.tc_op, 42u);
  EXPECT_EQ(ref.error, ErrorCode::kBadRequest);
}

TEST(LdmKeyTest, APartitionOfAnotherInstanceIsRefused) {
  HarnessOptions options;
  options.ldm_threads = 2;
  Db db(options);
  // Find a key of a partition owned by instance 1, and send it to instance 0.
  uint64_t id = 0;
  while (db.client.partition_of_key(item_key(id)) % 2 != 1) ++id;
  LqhKeyReq m;
  m.tc_op = 77;
  m.tx = db.fresh_tx();
  m.table_id = db.table.table_id;
  m.table_version = db.table.version;
  m.partition = db.client.partition_of_key(item_key(id));
  m.key_hash = db.client.key_hash_of(item_key(id));  // right: the partition alone is wrong
  m.api_node = kSelf;
  const Values key = item_key(id);
  m.key = key.bytes();
  db.h.send(0, encode(m));
  const Captured c = db.h.tc().take([](const Captured& x) { return x.number() == gsn::kLqhKeyRef; });
  EXPECT_EQ(decode_lqh_key_ref(c.signal())->error, ErrorCode::kBadRequest);
  // The owner takes it.
  ASSERT_TRUE(db.insert(db.fresh_tx(), id, kApple).ok);
}

TEST(LdmKeyTest, ReadCommittedSeesTheOldVersionUntilCommitAndNeverWaits) {
  Db db;
  db.put(1, kApple);
  db.put(2, kPear);
  const TxId writer = db.fresh_tx();
  ASSERT_TRUE(db.update(writer, 1, Values().i32(kQty, 50).str(kName, "changed")).ok);
  ASSERT_TRUE(db.remove(writer, 2).ok);
  ASSERT_TRUE(db.insert(writer, 3, kApple).ok);
  // Another transaction reads committed rows at once, while the writer
  // holds all three exclusively.
  EXPECT_EQ(db.committed(1), kApple);
  EXPECT_EQ(db.committed(2), kPear);
  EXPECT_EQ(db.committed(3), std::nullopt);
  // The writer itself, reading committed, sees the same.
  EXPECT_EQ(item_of(db.read(writer, 1).values), kApple);
  EXPECT_EQ(db.client.commit(writer), 3u);
  EXPECT_EQ(db.committed(1), (Item{50, "changed", 100}));
  EXPECT_EQ(db.committed(2), std::nullopt);
  EXPECT_EQ(db.committed(3), kApple);
  EXPECT_EQ(db.h.ldm(0).stats().lock_waits, 0u);
}

TEST(LdmKeyTest, AbortDiscardsEveryPendingChange) {
  Db db;
  db.put(1, kApple);
  db.put(2, kPear);
  const TxId t = db.fresh_tx();
  ASSERT_TRUE(db.update(t, 1, Values().i32(kQty, 50)).ok);
  ASSERT_TRUE(db.remove(t, 2).ok);
  ASSERT_TRUE(db.insert(t, 3, kApple).ok);
  EXPECT_EQ(db.client.abort(t), 3u);
  EXPECT_EQ(db.committed(1), kApple);
  EXPECT_EQ(db.committed(2), kPear);
  EXPECT_EQ(db.committed(3), std::nullopt);
  const LdmStats s = db.h.ldm(0).stats();
  EXPECT_EQ(s.committed_rows, 2u);
  EXPECT_EQ(s.lock_records_in_use, 0u);
  // The key is free again.
  db.put(3, kPear);
  EXPECT_EQ(db.committed(3), kPear);
}

TEST(LdmKeyTest, ATransactionSeesItsOwnChanges) {
  Db db;
  const TxId t = db.fresh_tx();
  // insert, update, update, read: the last update.
  ASSERT_TRUE(db.insert(t, 1, kApple).ok);
  ASSERT_TRUE(db.update(t, 1, Values().i32(kQty, 6)).ok);
  ASSERT_TRUE(db.update(t, 1, Values().str(kName, long_name(1))).ok);
  EXPECT_EQ(item_of(db.read(t, 1, LockMode::kShared).values), (Item{6, long_name(1), 100}));
  EXPECT_EQ(item_of(db.read(t, 1, LockMode::kExclusive).values), (Item{6, long_name(1), 100}));
  // insert then delete: gone for it; insert again works.
  ASSERT_TRUE(db.insert(t, 2, kPear).ok);
  ASSERT_TRUE(db.remove(t, 2).ok);
  EXPECT_EQ(db.read(t, 2, LockMode::kShared).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.update(t, 2, Values().i32(kQty, 1)).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.remove(t, 2).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(db.insert(t, 2, kApple).ok);
  EXPECT_EQ(db.insert(t, 2, kApple).error, ErrorCode::kDuplicateKey);
  EXPECT_EQ(db.client.commit(t), 8u);  // the operations that succeeded
  EXPECT_EQ(db.committed(1), (Item{6, long_name(1), 100}));
  EXPECT_EQ(db.committed(2), kApple);

  // delete then insert of a committed row: the new image replaces it.
  const TxId u = db.fresh_tx();
  ASSERT_TRUE(db.remove(u, 1).ok);
  EXPECT_EQ(db.read(u, 1, LockMode::kExclusive).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(db.insert(u, 1, kPear).ok);
  EXPECT_EQ(item_of(db.read(u, 1, LockMode::kShared).values), kPear);
  EXPECT_EQ(db.committed(1), (Item{6, long_name(1), 100}));
  db.client.commit(u);
  EXPECT_EQ(db.committed(1), kPear);
}

// Unique-index columns (code) and the primary key (id), before and after
// each write, as TC needs them to keep the hidden unique table in step.
TEST(LdmKeyTest, WritesReportUniqueColumnsBeforeAndAfter) {
  Db db;
  const TxId t = db.fresh_tx();
  KeyOutcome r = db.insert(t, 1, kApple);
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.unique_before.empty());
  RowValues after = decode_values(r.unique_after);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(int_of<uint32_t>(after.at(kCode)), 100u);
  EXPECT_EQ(int_of<uint64_t>(after.at(kId)), 1u);

  r = db.update(t, 1, Values().u32(kCode, 200));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(int_of<uint32_t>(decode_values(r.unique_before).at(kCode)), 100u);
  EXPECT_EQ(int_of<uint32_t>(decode_values(r.unique_after).at(kCode)), 200u);

  r = db.update(t, 1, Values().null(kCode));
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(decode_values(r.unique_after).at(kCode).has_value());

  r = db.remove(t, 1);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(decode_values(r.unique_before).at(kCode).has_value());
  EXPECT_EQ(int_of<uint64_t>(decode_values(r.unique_before).at(kId)), 1u);
  EXPECT_TRUE(r.unique_after.empty());
  db.client.commit(t);

  // A table without unique indexes reports nothing.
  TableDef plain = items_table(4, 8);
  plain.indexes.pop_back();
  install(db.h, plain);
  Client c(db.h, plain);
  r = c.run({OpType::kInsert, LockMode::kExclusive, db.fresh_tx(), item_key(1), item_values(1, kApple)});
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.unique_before.empty());
  EXPECT_TRUE(r.unique_after.empty());
}

TEST(LdmKeyTest, CommitAndAbortOfUnknownTransactionsSucceed) {
  Db db;
  EXPECT_EQ(db.client.commit(db.fresh_tx()), 0u);
  EXPECT_EQ(db.client.abort(db.fresh_tx()), 0u);
  // A read-committed read leaves nothing to commit.
  db.put(1, kApple);
  const TxId t = db.fresh_tx();
  ASSERT_TRUE(db.read(t, 1).ok);
  EXPECT_EQ(db.client.commit(t), 0u);
}

TEST(LdmKeyTest, DataMemoryFullRefusesWritesAndKeepsEverythingCommitted) {
  HarnessOptions options;
  options.data_memory_bytes = 40 * storage::PagePool::kPageBytes;
  Db db(options);
  uint64_t stored = 0;
  KeyOutcome r;
  // Insert, one committed row at a time, until DataMemory is full.
  for (;; ++stored) {
    const TxId t = db.fresh_tx();
    r = db.insert(t, stored, Item{static_cast<int32_t>(stored), long_name(stored), static_cast<uint32_t>(stored)});
    if (!r.ok) {
      db.client.abort(t);
      break;
    }
    db.client.commit(t);
  }
  ASSERT_EQ(r.error, ErrorCode::kOutOfDataMemory);
  ASSERT_GT(stored, 100u);
  EXPECT_GE(db.h.ldm(0).stats().out_of_memory, 1u);
  // An update needs a version: it may be refused too, and must then leave the row alone.
  const TxId u = db.fresh_tx();
  for (uint64_t id = 0; id < stored; ++id) {
    const KeyOutcome up = db.update(u, id, Values().i32(kQty, -1).str(kName, "x"));
    if (!up.ok) {
      EXPECT_EQ(up.error, ErrorCode::kOutOfDataMemory);
      break;
    }
  }
  db.client.abort(u);
  for (uint64_t id = 0; id < stored; ++id)
    ASSERT_EQ(db.committed(id), (Item{static_cast<int32_t>(id), long_name(id), static_cast<uint32_t>(id)}));
  ScanResult all = scan_table(db.h, db.table, {});
  EXPECT_EQ(all.rows.size(), stored);
  EXPECT_EQ(db.h.ldm(0).stats().committed_rows, stored);
  // Delete half; inserts work again.
  const TxId d = db.fresh_tx();
  for (uint64_t id = 0; id < stored; id += 2) ASSERT_TRUE(db.remove(d, id).ok);
  db.client.commit(d);
  for (uint64_t id = 0; id < stored / 4; ++id) db.put(stored + id, kPear);
  EXPECT_EQ(db.committed(stored), kPear);
}

TEST(LdmKeyTest, OutOfOperationRecordsIsTooManyOperations) {
  HarnessOptions options;
  options.ldm.max_operations = 8;
  Db db(options);
  const TxId t = db.fresh_tx();
  uint64_t id = 0;
  KeyOutcome r;
  while ((r = db.insert(t, id, kPear)).ok) ++id;
  EXPECT_EQ(r.error, ErrorCode::kTooManyOperations);
  EXPECT_EQ(id, 8u);
  // Further operations on rows it already holds need no new records.
  EXPECT_TRUE(db.update(t, 0, Values().i32(kQty, 1)).ok);
  EXPECT_EQ(db.client.commit(t), id + 1);
  EXPECT_EQ(db.h.ldm(0).stats().operation_records_in_use, 0u);
  db.put(100, kApple);
}

// The longest keys a table may have: a VARCHAR(511) primary key and a
// nullable VARCHAR(510) ordered-index column, whose all-zero values encode
// to kMaxKeyBytes (1024) and 1023 bytes. Such rows are stored, found by key,
// scanned in order and erased; a key one byte longer is a bad request.
TEST(LdmKeyTest, TheLongestKeysWorkAndALongerOneIsRefused) {
  TableDef t;
  t.name = "long_keys";
  t.table_id = 9;
  t.version = 1;
  t.partitions = 2;
  t.columns = {column("k", ColumnType::kVarChar, 511), column("s", ColumnType::kVarChar, 510, true)};
  t.primary_key = {0};
  t.indexes = {IndexDef{"by_s", IndexKind::kOrdered, {1}, 61}};
  ASSERT_TRUE(validate_table(t)) << validate_table(t).message();
  Db db({}, t);
  const std::string zeros(511, '\0');
  const std::vector<std::string> keys = {zeros, zeros.substr(0, 510) + "a", zeros.substr(0, 510), "a" + zeros.substr(1),
                                         ""};
  const std::vector<std::optional<std::string>> names = {zeros.substr(0, 510), zeros.substr(0, 509) + "\x01",
                                                         zeros.substr(0, 509), std::nullopt, ""};
  const auto key = [](const std::string& k) { return Values().str(0, k); };
  const auto value = [](const std::string& k, const std::optional<std::string>& n) {
    Values v;
    v.str(0, k);
    n ? v.str(1, *n) : v.null(1);
    return v;
  };
  TxId tx = db.fresh_tx();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const KeyOutcome r =
        db.client.run({OpType::kInsert, LockMode::kExclusive, tx, key(keys[i]), value(keys[i], names[i])});
    ASSERT_TRUE(r.ok) << "key " << i << ": " << error_text(r.error);
  }
  db.client.commit(tx);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const KeyOutcome r = db.client.run({OpType::kRead, LockMode::kCommitted, db.fresh_tx(), key(keys[i]), {}});
    ASSERT_TRUE(r.ok) << "key " << i;
    EXPECT_EQ(str_of(r.values.at(0)), keys[i]);
    EXPECT_EQ(r.values.at(1) ? std::optional(str_of(r.values.at(1))) : std::nullopt, names[i]);
  }
  // Ordered by s, NULL first, in each partition.
  ScanSpec spec;
  spec.ordered = true;
  spec.index_id = 61;
  spec.batch_rows = 1;
  std::size_t rows = 0;
  for (uint32_t p = 0; p < t.partitions; ++p) {
    const ScanResult r = scan_partition(db.h, t, p, spec);
    ASSERT_EQ(r.error, ErrorCode::kNone);
    for (std::size_t i = 1; i < r.rows.size(); ++i) {
      const auto& a = r.rows[i - 1].at(1);
      const auto& b = r.rows[i].at(1);
      EXPECT_TRUE(!a || (b && str_of(a) <= str_of(b)));
    }
    rows += r.rows.size();
  }
  EXPECT_EQ(rows, keys.size());
  // One byte more than the column takes: refused, nothing stored.
  const std::string too_long(512, '\0');
  EXPECT_EQ(
      db.client.run({OpType::kInsert, LockMode::kExclusive, db.fresh_tx(), key(too_long), value(too_long, "")}).error,
      ErrorCode::kBadRequest);
  EXPECT_EQ(db.client.run({OpType::kRead, LockMode::kCommitted, db.fresh_tx(), key(too_long), {}}).error,
            ErrorCode::kBadRequest);
  tx = db.fresh_tx();
  for (const std::string& k : keys)
    ASSERT_TRUE(db.client.run({OpType::kDelete, LockMode::kExclusive, tx, key(k), {}}).ok);
  db.client.commit(tx);
  EXPECT_EQ(db.h.ldm(0).stats().committed_rows, 0u);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
