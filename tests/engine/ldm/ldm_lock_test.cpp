// LDM row locks: shared locks coexist, exclusive ones wait and are granted
// in FIFO order after commit or abort, upgrades, aborts drop waiting
// requests, bounded waiting memory, and dropping a table under locks.
// "Not answered" is proven with Harness::sync(), never with a timeout.
#include <gtest/gtest.h>

#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

const Item kApple{5, "apple", 100};

Client::Request read_req(TxId tx, uint64_t id, LockMode lock) { return {OpType::kRead, lock, tx, item_key(id), {}}; }
Client::Request update_req(TxId tx, uint64_t id, int32_t qty) {
  return {OpType::kUpdate, LockMode::kExclusive, tx, item_key(id), Values().i32(kQty, qty)};
}

TEST(LdmLockTest, SharedLocksCoexistExclusiveWaitsAndIsGrantedInOrder) {
  Db db;
  db.put(1, kApple);
  const TxId s1 = db.fresh_tx(), s2 = db.fresh_tx(), x3 = db.fresh_tx(), s4 = db.fresh_tx();
  ASSERT_TRUE(db.read(s1, 1, LockMode::kShared).ok);
  ASSERT_TRUE(db.read(s2, 1, LockMode::kShared).ok);
  const uint32_t op3 = db.client.send(update_req(x3, 1, 30));
  const uint32_t op4 = db.client.send(read_req(s4, 1, LockMode::kShared));  // behind the writer: FIFO
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(op3));
  EXPECT_FALSE(db.client.answered(op4));
  EXPECT_EQ(db.h.ldm(0).stats().parked_now, 2u);
  // Read-committed readers are not in the queue.
  EXPECT_EQ(db.committed(1), kApple);

  db.client.commit(s1);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(op3)) << "s2 still holds the row";
  db.client.commit(s2);
  ASSERT_TRUE(db.client.wait(op3).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(op4)) << "the shared read waits for the writer";
  db.client.commit(x3);
  const KeyOutcome r4 = db.client.wait(op4);
  ASSERT_TRUE(r4.ok);
  EXPECT_EQ(item_of(r4.values).qty, 30);  // granted after the commit: sees it
  db.client.commit(s4);
  EXPECT_EQ(db.h.ldm(0).stats().lock_waits, 2u);
  EXPECT_EQ(db.h.ldm(0).stats().lock_records_in_use, 0u);
}

TEST(LdmLockTest, WritersQueueInArrivalOrder) {
  Db db;
  db.put(1, kApple);
  const TxId holder = db.fresh_tx();
  ASSERT_TRUE(db.update(holder, 1, Values().i32(kQty, 0)).ok);
  std::vector<TxId> txs;
  std::vector<uint32_t> ops;
  for (int i = 1; i <= 5; ++i) {
    txs.push_back(db.fresh_tx());
    ops.push_back(db.client.send(update_req(txs.back(), 1, i)));
  }
  db.client.commit(holder);
  // Each one is granted only after the one before it commits, and sees its value.
  for (std::size_t i = 0; i < txs.size(); ++i) {
    ASSERT_TRUE(db.client.wait(ops[i]).ok);
    db.h.sync(0);
    for (std::size_t j = i + 1; j < txs.size(); ++j) EXPECT_FALSE(db.client.answered(ops[j]));
    EXPECT_EQ(item_of(db.read(txs[i], 1, LockMode::kShared).values).qty, static_cast<int32_t>(i + 1));
    db.client.commit(txs[i]);
  }
  EXPECT_EQ(db.committed(1)->qty, 5);
}

TEST(LdmLockTest, AbortOfTheHolderGrantsTheWaiterWhichSeesTheOldVersion) {
  Db db;
  db.put(1, kApple);
  const TxId t1 = db.fresh_tx(), t2 = db.fresh_tx();
  ASSERT_TRUE(db.update(t1, 1, Values().i32(kQty, 99)).ok);
  const uint32_t op = db.client.send(read_req(t2, 1, LockMode::kExclusive));
  db.client.abort(t1);
  const KeyOutcome r = db.client.wait(op);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(item_of(r.values), kApple);
  db.client.commit(t2);
}

TEST(LdmLockTest, AbortDropsTheTransactionsWaitingRequestsWithoutAnswer) {
  Db db;
  db.put(1, kApple);
  db.put(2, kApple);
  const TxId holder = db.fresh_tx(), waiter = db.fresh_tx(), later = db.fresh_tx();
  ASSERT_TRUE(db.update(holder, 1, Values().i32(kQty, 1)).ok);
  ASSERT_TRUE(db.update(holder, 2, Values().i32(kQty, 2)).ok);
  const uint32_t w1 = db.client.send(update_req(waiter, 1, 10));
  const uint32_t w2 = db.client.send(update_req(waiter, 2, 20));
  const uint32_t l1 = db.client.send(read_req(later, 1, LockMode::kShared));
  db.h.sync(0);
  EXPECT_EQ(db.h.ldm(0).stats().parked_now, 3u);
  // TC gives up on the waiter (a deadlock timeout): its requests vanish.
  EXPECT_EQ(db.client.abort(waiter), 0u);
  EXPECT_EQ(db.h.ldm(0).stats().parked_now, 1u);
  db.client.commit(holder);
  // `later` was behind the waiter; now it is granted.
  const KeyOutcome r = db.client.wait(l1);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(item_of(r.values).qty, 1);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(w1));
  EXPECT_FALSE(db.client.answered(w2));
  db.client.commit(later);
  EXPECT_EQ(db.committed(2)->qty, 2);
  EXPECT_EQ(db.h.ldm(0).stats().parked_now, 0u);
}

TEST(LdmLockTest, AbortOfAWaiterAheadLetsCompatibleRequestsThrough) {
  Db db;
  db.put(1, kApple);
  const TxId s1 = db.fresh_tx(), x2 = db.fresh_tx(), s3 = db.fresh_tx();
  ASSERT_TRUE(db.read(s1, 1, LockMode::kShared).ok);
  const uint32_t op2 = db.client.send(update_req(x2, 1, 2));
  const uint32_t op3 = db.client.send(read_req(s3, 1, LockMode::kShared));
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(op3));
  db.client.abort(x2);  // the writer ahead goes: the shared read joins s1
  ASSERT_TRUE(db.client.wait(op3).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(op2));
  db.client.commit(s1);
  db.client.commit(s3);
}

TEST(LdmLockTest, UpgradesAndTheHoldersOwnRequestsGoFirst) {
  Db db;
  db.put(1, kApple);
  // Sole shared holder: the upgrade is immediate.
  const TxId t = db.fresh_tx();
  ASSERT_TRUE(db.read(t, 1, LockMode::kShared).ok);
  ASSERT_TRUE(db.update(t, 1, Values().i32(kQty, 6)).ok);
  db.client.commit(t);

  // Two shared holders; a writer waits; then holder a upgrades: a's upgrade
  // goes before the writer (the writer waits for a anyway).
  const TxId a = db.fresh_tx(), b = db.fresh_tx(), w = db.fresh_tx();
  ASSERT_TRUE(db.read(a, 1, LockMode::kShared).ok);
  ASSERT_TRUE(db.read(b, 1, LockMode::kShared).ok);
  const uint32_t ow = db.client.send(update_req(w, 1, 100));
  const uint32_t oa = db.client.send(update_req(a, 1, 7));
  // Shared reads of a holder never wait, even behind the queue.
  ASSERT_TRUE(db.read(b, 1, LockMode::kShared).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(oa));
  db.client.commit(b);
  ASSERT_TRUE(db.client.wait(oa).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(ow));
  db.client.commit(a);
  ASSERT_TRUE(db.client.wait(ow).ok);
  db.client.commit(w);
  EXPECT_EQ(db.committed(1)->qty, 100);
}

// A transaction's operations queued behind a waiting writer (sent in one
// batch before the first was answered) are all granted when its first is.
TEST(LdmLockTest, ABatchOfOneTransactionIsNotStuckBehindOthers) {
  Db db;
  db.put(1, kApple);
  const TxId holder = db.fresh_tx(), t = db.fresh_tx(), w = db.fresh_tx();
  ASSERT_TRUE(db.update(holder, 1, Values().i32(kQty, 1)).ok);
  const uint32_t t1 = db.client.send(read_req(t, 1, LockMode::kShared));
  const uint32_t w1 = db.client.send(update_req(w, 1, 2));
  const uint32_t t2 = db.client.send(update_req(t, 1, 3));
  db.client.commit(holder);
  ASSERT_TRUE(db.client.wait(t1).ok);
  ASSERT_TRUE(db.client.wait(t2).ok);  // an upgrade of the only holder
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(w1));
  db.client.commit(t);
  ASSERT_TRUE(db.client.wait(w1).ok);
  db.client.commit(w);
  EXPECT_EQ(db.committed(1)->qty, 2);
}

TEST(LdmLockTest, InsertsWaitForAPendingInsertOfTheSameKey) {
  Db db;
  // Aborted: the waiting insert creates the row.
  const TxId a = db.fresh_tx(), b = db.fresh_tx();
  ASSERT_TRUE(db.insert(a, 1, kApple).ok);
  const uint32_t ob = db.client.send(
      {OpType::kInsert, LockMode::kExclusive, b, item_key(1), item_values(1, Item{2, "b", std::nullopt})});
  const uint32_t oc = db.client.send(read_req(db.fresh_tx(), 1, LockMode::kShared));
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(ob));
  EXPECT_EQ(db.committed(1), std::nullopt);
  db.client.abort(a);
  ASSERT_TRUE(db.client.wait(ob).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(oc)) << "the shared read now waits for b's insert";
  db.client.commit(b);
  const KeyOutcome rc = db.client.wait(oc);
  ASSERT_TRUE(rc.ok);
  EXPECT_EQ(item_of(rc.values).qty, 2);

  // Committed: the waiting insert finds a duplicate.
  const TxId c = db.fresh_tx(), d = db.fresh_tx();
  ASSERT_TRUE(db.insert(c, 2, kApple).ok);
  const uint32_t od = db.client.send({OpType::kInsert, LockMode::kExclusive, d, item_key(2), item_values(2, kApple)});
  db.client.commit(c);
  EXPECT_EQ(db.client.wait(od).error, ErrorCode::kDuplicateKey);
  // A waiting update of a row whose delete commits finds no row.
  const TxId e = db.fresh_tx(), f = db.fresh_tx();
  ASSERT_TRUE(db.remove(e, 2).ok);
  const uint32_t of = db.client.send(update_req(f, 2, 1));
  db.client.commit(e);
  EXPECT_EQ(db.client.wait(of).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(db.client.commit(f), 0u);
}

TEST(LdmLockTest, WaitingMemoryIsBoundedAndAFullArenaRefuses) {
  HarnessOptions options;
  options.ldm.parked_request_bytes = 2 * 256;  // two chunks: two small waiting requests
  Db db(options);
  db.put(1, kApple);
  const TxId holder = db.fresh_tx();
  ASSERT_TRUE(db.update(holder, 1, Values().i32(kQty, 1)).ok);
  const uint32_t a = db.client.send(update_req(db.fresh_tx(), 1, 2));
  const uint32_t b = db.client.send(read_req(db.fresh_tx(), 1, LockMode::kShared));
  const TxId c_tx = db.fresh_tx();
  EXPECT_EQ(db.client.run(update_req(c_tx, 1, 3)).error, ErrorCode::kTooManyOperations);
  // While it is full, every request that would wait is refused.
  Values big;
  big.str(kName, std::string(40, 'n'));
  EXPECT_EQ(db.client.run({OpType::kUpdate, LockMode::kExclusive, db.fresh_tx(), item_key(1), big}).error,
            ErrorCode::kTooManyOperations);
  db.client.commit(holder);
  EXPECT_TRUE(db.client.wait(a).ok);
  db.h.sync(0);
  EXPECT_FALSE(db.client.answered(b));
}

TEST(LdmLockTest, DroppingATableRefusesItsWaitersAndForgetsItsLocks) {
  Db db;
  db.put(1, kApple);
  const TxId holder = db.fresh_tx(), waiter = db.fresh_tx();
  ASSERT_TRUE(db.update(holder, 1, Values().i32(kQty, 1)).ok);
  const uint32_t op = db.client.send(update_req(waiter, 1, 2));
  drop(db.h, db.table.table_id);
  EXPECT_EQ(db.client.wait(op).error, ErrorCode::kNoSuchTable);
  EXPECT_EQ(db.client.commit(holder), 1u);
  EXPECT_EQ(db.client.commit(waiter), 0u);
  EXPECT_EQ(db.read(db.fresh_tx(), 1).error, ErrorCode::kNoSuchTable);
  const LdmStats s = db.h.ldm(0).stats();
  EXPECT_EQ(s.lock_records_in_use, 0u);
  EXPECT_EQ(s.operation_records_in_use, 0u);
  EXPECT_EQ(s.parked_now, 0u);
  EXPECT_EQ(s.data_memory_used_bytes, 0u);
  // Created again: empty and usable.
  install(db.h, db.table);
  EXPECT_EQ(db.committed(1), std::nullopt);
  db.put(1, kApple);
  EXPECT_EQ(db.committed(1), kApple);
}

// Concurrent transactions increment counters: read the row (shared or
// exclusive, at random), write value + 1, commit. The test plays TC: when
// every open transaction waits (a deadlock), it aborts one of them, which
// starts again. Locks that let two transactions interleave on a row would
// lose increments; the committed counters must equal the committed work.
TEST(LdmLockTest, ConcurrentIncrementsLoseNoUpdate) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("FJORD_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Db db;
  constexpr uint64_t kKeys = 5;
  for (uint64_t id = 0; id < kKeys; ++id) db.put(id, Item{0, std::nullopt, std::nullopt});
  struct Worker {
    TxId tx;
    std::vector<uint64_t> plan;  // keys to increment, in order
    std::size_t step = 0;        // index into plan
    bool reading = true;         // the next request reads (else it writes)
    int32_t value = 0;
    std::optional<uint32_t> awaiting;
  };
  std::vector<Worker> workers(4);
  const auto restart = [&](Worker& w) {
    w = Worker{};
    w.tx = db.fresh_tx();
    const std::size_t n = 1 + rng() % 3;
    for (std::size_t i = 0; i < n; ++i) w.plan.push_back(rng() % kKeys);
  };
  for (Worker& w : workers) restart(w);
  std::map<uint64_t, int32_t> expected;
  uint32_t committed = 0, deadlocks = 0;
  while (committed < 300 && !::testing::Test::HasFailure()) {
    for (Worker& w : workers) {
      if (w.awaiting) continue;
      if (w.step == w.plan.size()) {
        db.client.commit(w.tx);
        for (uint64_t id : w.plan) ++expected[id];
        ++committed;
        restart(w);
      }
      const uint64_t id = w.plan[w.step];
      w.awaiting = w.reading ? db.client.send(read_req(w.tx, id, rng() % 2 ? LockMode::kShared : LockMode::kExclusive))
                             : db.client.send(update_req(w.tx, id, w.value + 1));
    }
    db.h.sync(0);
    bool progress = false;
    for (Worker& w : workers) {
      const std::optional<KeyOutcome> r = db.client.poll(*w.awaiting);
      if (!r) continue;
      progress = true;
      ASSERT_TRUE(r->ok) << error_text(r->error);
      w.awaiting.reset();
      if (w.reading) {
        w.value = item_of(r->values).qty;
      } else {
        ++w.step;
      }
      w.reading = !w.reading;
    }
    if (!progress) {  // everyone waits: TC's timeout would abort one
      Worker& victim = workers[rng() % workers.size()];
      db.client.abort(victim.tx);
      db.h.sync(0);
      restart(victim);
      ++deadlocks;
    }
  }
  for (Worker& w : workers) db.client.abort(w.tx);
  for (uint64_t id = 0; id < kKeys; ++id) EXPECT_EQ(db.committed(id)->qty, expected[id]) << "key " << id;
  const LdmStats s = db.h.ldm(0).stats();
  EXPECT_EQ(s.parked_now, 0u);
  EXPECT_EQ(s.lock_records_in_use, 0u);
  EXPECT_EQ(s.operation_records_in_use, 0u);
  EXPECT_GT(s.lock_waits, 0u);
  RecordProperty("deadlocks", static_cast<int>(deadlocks));
}

}  // namespace
}  // namespace fjord::engine::ldm_test
