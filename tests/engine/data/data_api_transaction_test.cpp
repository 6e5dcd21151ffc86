// Transactions and locks through the API: commit, no-commit and rollback,
// concurrent increments, deadlocks, the limit on open transactions, and
// asynchronous execution.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "data_api_fixture.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::protocol::ErrorCode;
using engine::protocol::LockMode;

TEST_F(DataApiTest, BatchesNoCommitCommitAndRollback) {
  // 20 inserts in one round trip, not committed yet.
  api::Transaction& tx = conn_->start_transaction();
  for (uint64_t id = 10; id < 30; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_FALSE(balance_of(10).has_value()) << "read committed must not see uncommitted rows";
  // The same transaction sees its own rows.
  api::Operation& own = tx.read(*table_, key_of(15), {}, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_EQ(own.value(kBalance).as_int64(), 15);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  tx.close();
  EXPECT_EQ(balance_of(29), 29);
  // Rollback undoes a batch.
  api::Transaction& tx2 = conn_->start_transaction();
  tx2.update(*table_, key_of(10), Row().set(kBalance, int64_t{-1}));
  tx2.remove(*table_, key_of(11));
  tx2.insert(*table_, account(99, 99));
  ASSERT_TRUE(tx2.execute(ExecType::kNoCommit));
  ASSERT_TRUE(tx2.execute(ExecType::kRollback));
  tx2.close();
  EXPECT_EQ(balance_of(10), 10);
  EXPECT_EQ(balance_of(11), 11);
  EXPECT_FALSE(balance_of(99).has_value());
  // An error in the middle of a batch aborts all of it.
  api::Transaction& tx3 = conn_->start_transaction();
  tx3.update(*table_, key_of(12), Row().set(kBalance, int64_t{-5}));
  tx3.insert(*table_, account(13, 0));  // duplicate
  tx3.update(*table_, key_of(14), Row().set(kBalance, int64_t{-5}));
  EXPECT_EQ(tx3.execute(ExecType::kCommit).message(),
            "630: Tuple already existed when attempting to insert (operation 1)");
  EXPECT_EQ(tx3.error(), ErrorCode::kDuplicateKey);
  tx3.close();
  EXPECT_EQ(balance_of(12), 12);
  EXPECT_EQ(balance_of(14), 14);
}

// A rollback ends the transaction, as a commit does, whether or not the
// node had started it: a later execute says it has finished (the node no
// longer knows it), and what it did stays undone.
TEST_F(DataApiTest, ARolledBackTransactionIsFinished) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::Transaction& tx = conn_->start_transaction();
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{5}));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  ASSERT_TRUE(tx.execute(ExecType::kRollback));
  EXPECT_TRUE(tx.finished());
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{6}));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.message(), "the transaction has finished");
  tx.close();
  EXPECT_EQ(balance_of(1), 1);
  api::Transaction& unstarted = conn_->start_transaction();
  ASSERT_TRUE(unstarted.execute(ExecType::kRollback));
  EXPECT_TRUE(unstarted.finished());
  unstarted.close();
}

TEST_F(DataApiTest, ConcurrentIncrementsLoseNoUpdate) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(7, 0)); }));
  constexpr int kThreads = 4, kIncrements = 150;
  std::atomic<int> committed{0}, retried{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = cluster_->connect(static_cast<NodeId>(51 + t));
      ASSERT_TRUE(c) << c.status().to_string();
      auto table = (*c)->get_table("accounts");
      ASSERT_TRUE(table);
      for (int i = 0; i < kIncrements;) {
        api::Transaction& tx = (*c)->start_transaction();
        api::Operation& read = tx.read(**table, key_of(7), {}, LockMode::kExclusive);
        Status s = tx.execute(ExecType::kNoCommit);
        if (s) {
          const int64_t v = read.value(kBalance).as_int64();
          tx.update(**table, key_of(7), Row().set(kBalance, v + 1));
          s = tx.execute(ExecType::kCommit);
        }
        tx.close();
        if (s) {
          ++i;
          ++committed;
        } else {
          ++retried;  // a lock wait that timed out: try again
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(committed.load(), kThreads * kIncrements);
  EXPECT_EQ(balance_of(7), kThreads * kIncrements) << retried.load() << " retries";
}

TEST_F(DataApiTest, DeadlockIsBrokenByTheTimeout) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 1));
    tx.insert(*table_, account(2, 2));
  }));
  auto other = cluster_->connect(51);
  ASSERT_TRUE(other);
  auto t2 = (*other)->get_table("accounts");
  api::Transaction& a = conn_->start_transaction();
  api::Transaction& b = (*other)->start_transaction();
  a.update(*table_, key_of(1), Row().set(kBalance, int64_t{10}));
  b.update(**t2, key_of(2), Row().set(kBalance, int64_t{20}));
  ASSERT_TRUE(a.execute(ExecType::kNoCommit));
  ASSERT_TRUE(b.execute(ExecType::kNoCommit));
  // Each now wants the other's row.
  a.update(*table_, key_of(2), Row().set(kBalance, int64_t{11}));
  b.update(**t2, key_of(1), Row().set(kBalance, int64_t{21}));
  Status sa, sb;
  std::thread tb([&] { sb = b.execute(ExecType::kCommit); });
  sa = a.execute(ExecType::kCommit);
  tb.join();
  const bool a_lost = sa.message().rfind("266:", 0) == 0;
  const bool b_lost = sb.message().rfind("266:", 0) == 0;
  EXPECT_TRUE(a_lost || b_lost) << sa.message() << " / " << sb.message();
  EXPECT_TRUE(a_lost != b_lost) << "exactly one transaction is the victim; the other commits: " << sa.message() << " / "
                                << sb.message();
  a.close();
  b.close();
  // Whoever won committed both of its updates; nothing is left locked.
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{0})); }));
}

// A program that holds ConnectOptions.max_transactions open and starts one
// more gets a transaction that says why it cannot run, not an end to the
// program; nothing of it reaches the node, and closing any transaction
// makes room again.
TEST_F(DataApiTest, ATransactionBeyondMaxTransactionsIsRefusedWithItsReasonAndTheProgramGoesOn) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 10)); }));
  api::ConnectOptions two = cluster_->connect_options(51);
  two.max_transactions = 2;
  auto c = api::Connection::connect(two);
  ASSERT_TRUE(c) << c.status().to_string();
  api::Connection& conn = **c;
  auto t = conn.get_table("accounts");
  ASSERT_TRUE(t);
  api::Transaction& a = conn.start_transaction();
  api::Transaction& b = conn.start_transaction();
  a.update(**t, key_of(1), Row().set(kBalance, int64_t{11}));
  ASSERT_TRUE(a.execute(ExecType::kNoCommit));  // holds its row lock: must survive what follows

  api::Transaction& refused = conn.start_transaction();
  EXPECT_NE(&refused, &a);
  EXPECT_NE(&refused, &b);
  EXPECT_TRUE(refused.finished());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_transactions"), std::string::npos) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find('2'), std::string::npos) << refused.status().to_string();
  refused.insert(**t, account(2, 20));  // taken, never sent
  const Status sent = refused.execute(ExecType::kCommit);
  EXPECT_EQ(sent.code(), StatusCode::kResourceExhausted) << sent.to_string();
  bool called = false;
  EXPECT_FALSE(refused.execute_async(ExecType::kCommit, [&](api::Transaction&, const Status&) { called = true; }));
  EXPECT_EQ(conn.in_flight(), 0);
  // Two refused at once are two transactions, each closed on its own.
  api::Transaction& refused_too = conn.start_transaction();
  EXPECT_NE(&refused_too, &refused);
  EXPECT_EQ(refused_too.status().code(), StatusCode::kResourceExhausted);
  refused.close();
  refused_too.close();
  EXPECT_EQ(conn.poll(0, 0), 0);
  EXPECT_FALSE(called);

  // The accepted transactions are untouched; closing one makes room.
  ASSERT_TRUE(a.execute(ExecType::kCommit));
  a.close();
  api::Transaction& c3 = conn.start_transaction();
  EXPECT_FALSE(c3.finished()) << c3.status().to_string();
  api::Operation& read = c3.read(**t, key_of(1));
  ASSERT_TRUE(c3.execute(ExecType::kCommit)) << c3.status().to_string();
  EXPECT_EQ(read.value(kBalance).as_int64(), 11);
  c3.close();
  b.close();
  EXPECT_EQ(balance_of(2), std::nullopt) << "a refused transaction's insert reached the node";

  two.max_transactions = 0;
  auto none = api::Connection::connect(two);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("max_transactions is 0, expected 1..65536"), std::string::npos)
      << none.status().to_string();
}

TEST_F(DataApiTest, AsynchronousTransactionsInFlightFromOneThread) {
  constexpr int kTransactions = 300;
  std::atomic<int> done{0}, failed{0};
  for (int i = 0; i < kTransactions; ++i) {
    api::Transaction& tx = conn_->start_transaction();
    tx.insert(*table_, account(static_cast<uint64_t>(i), i));
    ASSERT_TRUE(tx.execute_async(ExecType::kCommit, [&](api::Transaction& t, const Status& s) {
      s.is_ok() ? ++done : ++failed;
      t.close();
    }));
    if (conn_->in_flight() >= 64) conn_->poll(5000, 1);
  }
  while (conn_->in_flight() > 0) ASSERT_GT(conn_->poll(5000, 1), 0);
  EXPECT_EQ(done.load(), kTransactions);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(balance_of(299), 299);
}

// Closing a transaction whose asynchronous execute is still in flight
// waits for its answer (so nothing arrives for a recycled handle) but does
// not run its callback: the program has let the transaction go, and a
// callback that closes it too would free its slot a second time.
TEST_F(DataApiTest, ClosingAnAsynchronousTransactionInFlightRunsNoCallback) {
  int callbacks = 0;
  api::Transaction& tx = conn_->start_transaction();
  tx.insert(*table_, account(1, 1));
  ASSERT_TRUE(tx.execute_async(ExecType::kCommit, [&](api::Transaction& t, const Status&) {
    ++callbacks;
    t.close();
  }));
  tx.close();
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(conn_->in_flight(), 0);
  api::Transaction& a = conn_->start_transaction();
  api::Transaction& b = conn_->start_transaction();
  EXPECT_NE(&a, &b) << "one transaction slot was freed twice";
  a.close();
  b.close();
  EXPECT_EQ(balance_of(1), 1) << "the commit in flight was lost";
}

}  // namespace
}  // namespace fjord::test
