// Many threads on one API node: a shared ClusterConnection and a Session per
// thread. Each thread's reads, writes and scans are checked against a model
// of its own rows; transfers between shared rows are checked by readers that
// lock both; a thread that goes with transactions open leaves nothing
// behind; closing the cluster connection ends every thread's wait.
// More threads than the host has cores: waiting sessions sleep.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "data_api_fixture.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::protocol::ErrorCode;
using engine::protocol::LockMode;

constexpr int kThreads = 6;
constexpr uint64_t kRowsPerThread = 200;
constexpr uint64_t kSharedA = 900'000, kSharedB = 900'001;
constexpr int64_t kSharedTotal = 1000;
constexpr auto kJoinBound = std::chrono::seconds(60);

// Joins each thread within kJoinBound (a thread that hangs fails the test).
void join_all(std::vector<std::future<void>>& threads) {
  for (auto& t : threads) ASSERT_EQ(t.wait_for(kJoinBound), std::future_status::ready) << "a thread hangs";
  for (auto& t : threads) t.get();
}

class DataApiThreadsTest : public DataApiTest {
 protected:
  // A cluster connection as API node 51 beside the fixture's Connection
  // (node 50); sessions sleep after a short spin.
  std::unique_ptr<api::ClusterConnection> connect_shared(uint32_t request_timeout_ms = 10000) {
    api::ConnectOptions o = cluster_->connect_options(51, api::PollMode::kSleep);
    o.spin_us = 5;
    o.request_timeout_ms = request_timeout_ms;
    auto c = api::ClusterConnection::connect(o);
    EXPECT_TRUE(c) << c.status().to_string();
    return c ? std::move(c).value() : nullptr;
  }
  std::unique_ptr<api::Session> session_of(api::ClusterConnection& cluster) {
    auto s = cluster.new_session();
    EXPECT_TRUE(s) << s.status().to_string();
    return s ? std::move(s).value() : nullptr;
  }
  void seed_shared_rows() {
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      tx.insert(*table_, account(kSharedA, kSharedTotal));
      tx.insert(*table_, account(kSharedB, 0));
    }));
  }
};

// One thread's workload: its own key range, a model of it, and transfers
// between the two shared rows, all through its own session.
class Worker {
 public:
  Worker(api::Session& session, const engine::TableDef& table, int id)
      : session_(session), table_(table), first_(1000 * static_cast<uint64_t>(id + 1)), random_(7919 * id + 1) {}

  void run(int rounds) {
    for (int round = 0; round < rounds && !::testing::Test::HasFailure(); ++round) {
      switch (random_() % 5) {
        case 0: write_batch(); break;
        case 1: read_batch(); break;
        case 2: transfer(); break;
        case 3: read_shared(); break;
        default: async_read(); break;
      }
      if (round % 25 == 24) check_scan();
    }
    check_scan();
  }

 private:
  uint64_t some_key() { return first_ + random_() % kRowsPerThread; }

  // Inserts, updates or deletes several rows of its range in one commit.
  void write_batch() {
    api::Transaction& tx = session_.start_transaction();
    std::map<uint64_t, std::optional<int64_t>> changes;
    for (int i = 0; i < 4; ++i) {
      const uint64_t key = some_key();
      if (changes.count(key)) continue;
      const auto value = static_cast<int64_t>(random_() % 100'000);
      if (!model_.count(key)) {
        tx.insert(table_, account(key, value));
        changes[key] = value;
      } else if (random_() % 3 == 0) {
        tx.remove(table_, key_of(key));
        changes[key] = std::nullopt;
      } else {
        tx.update(table_, key_of(key), Row().set(kBalance, value));
        changes[key] = value;
      }
    }
    const Status s = tx.execute(ExecType::kCommit);
    tx.close();
    ASSERT_TRUE(s) << s.to_string();
    for (const auto& [key, value] : changes) value ? void(model_[key] = *value) : void(model_.erase(key));
  }

  void read_batch() {
    api::Transaction& tx = session_.start_transaction();
    std::vector<std::pair<uint64_t, api::Operation*>> reads;
    for (int i = 0; i < 8; ++i) {
      const uint64_t key = some_key();
      if (model_.count(key)) reads.emplace_back(key, &tx.read(table_, key_of(key)));
    }
    const Status s = tx.execute(ExecType::kCommit);
    ASSERT_TRUE(s) << s.to_string();
    for (const auto& [key, op] : reads) EXPECT_EQ(op->value(kBalance).as_int64(), model_[key]) << "key " << key;
    tx.close();
  }

  void async_read() {
    if (model_.empty()) return;
    const uint64_t key = model_.begin()->first;
    api::Transaction& tx = session_.start_transaction();
    api::Operation& op = tx.read(table_, key_of(key));
    bool called = false;
    ASSERT_TRUE(tx.execute_async(ExecType::kCommit, [&](api::Transaction&, const Status& s) {
      called = true;
      EXPECT_TRUE(s) << s.to_string();
    }));
    while (!called && session_.in_flight() > 0) (void)session_.poll(10000, 1);
    EXPECT_TRUE(called);
    EXPECT_EQ(op.value(kBalance).as_int64(), model_[key]);
    tx.close();
  }

  // Moves an amount between the shared rows: the total stays. A deadlock
  // or lock timeout against another thread's transfer aborts it whole.
  void transfer() {
    api::Transaction& tx = session_.start_transaction();
    api::Operation& a = tx.read(table_, key_of(kSharedA), {}, LockMode::kExclusive);
    api::Operation& b = tx.read(table_, key_of(kSharedB), {}, LockMode::kExclusive);
    if (const Status locked = tx.execute(ExecType::kNoCommit); !locked) {
      EXPECT_NE(locked.code(), StatusCode::kTimeout) << locked.to_string();
    } else {
      const int64_t amount = static_cast<int64_t>(random_() % 50) - 25;
      tx.update(table_, key_of(kSharedA), Row().set(kBalance, a.value(kBalance).as_int64() - amount));
      tx.update(table_, key_of(kSharedB), Row().set(kBalance, b.value(kBalance).as_int64() + amount));
      const Status s = tx.execute(ExecType::kCommit);
      EXPECT_NE(s.code(), StatusCode::kTimeout) << s.to_string();
    }
    tx.close();
  }

  void read_shared() {
    api::Transaction& tx = session_.start_transaction();
    api::Operation& a = tx.read(table_, key_of(kSharedA), {}, LockMode::kShared);
    api::Operation& b = tx.read(table_, key_of(kSharedB), {}, LockMode::kShared);
    const Status s = tx.execute(ExecType::kCommit);
    if (s) {
      EXPECT_EQ(a.value(kBalance).as_int64() + b.value(kBalance).as_int64(), kSharedTotal) << "a transfer half seen";
    } else {
      EXPECT_NE(s.code(), StatusCode::kTimeout) << s.to_string();
    }
    tx.close();
  }

  // A full scan sees this thread's rows exactly as the model has them.
  void check_scan() {
    api::ScanSpec spec;
    spec.table = &table_;
    auto scan = session_.scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    std::map<uint64_t, int64_t> seen;
    api::RowView row;
    while ((*scan)->next(row)) {
      const uint64_t key = row.value(kId).as_uint64();
      if (key >= first_ && key < first_ + kRowsPerThread) seen[key] = row.value(kBalance).as_int64();
    }
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
    EXPECT_EQ(seen, model_);
  }

  api::Session& session_;
  const engine::TableDef& table_;
  uint64_t first_;
  std::mt19937_64 random_;
  std::map<uint64_t, int64_t> model_;
};

void run_workers(api::ClusterConnection& cluster, const std::string& table, int rounds) {
  std::vector<std::future<void>> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.push_back(std::async(std::launch::async, [&cluster, &table, t, rounds] {
      auto session = cluster.new_session();
      ASSERT_TRUE(session) << session.status().to_string();
      auto def = (*session)->get_table(table);
      ASSERT_TRUE(def) << def.status().to_string();
      Worker(**session, **def, t).run(rounds);
    }));
  join_all(threads);
}

TEST_F(DataApiThreadsTest, ThreadsOnOneApiNodeOverTcpMatchTheirModels) {
  seed_shared_rows();
  auto cluster = connect_shared();
  ASSERT_TRUE(cluster);
  run_workers(*cluster, table_->name, 150);
  // The total of the shared rows held through every transfer.
  EXPECT_EQ(*balance_of(kSharedA) + *balance_of(kSharedB), kSharedTotal);
}

TEST_F(DataApiThreadsTest, ThreadsOnOneApiNodeOverShmMatchTheirModels) {
  start_over_shm(false);
  seed_shared_rows();
  auto cluster = connect_shared();
  ASSERT_TRUE(cluster);
  run_workers(*cluster, table_->name, 150);
  EXPECT_EQ(*balance_of(kSharedA) + *balance_of(kSharedB), kSharedTotal);
}

// A thread whose session goes with a transaction open (rows inserted and
// locked, not committed): the session rolls it back, so nothing of it
// stays and its locks are free for the threads that go on.
TEST_F(DataApiThreadsTest, AThreadThatExitsWithTransactionsOpenLeavesNothingBehind) {
  seed_shared_rows();
  auto cluster = connect_shared();
  ASSERT_TRUE(cluster);
  auto gone = std::async(std::launch::async, [&] {
    auto session = session_of(*cluster);
    ASSERT_TRUE(session);
    api::Transaction& inserted = session->start_transaction();
    inserted.insert(*table_, account(500, 5));
    ASSERT_TRUE(inserted.execute(ExecType::kNoCommit));
    api::Transaction& locking = session->start_transaction();
    locking.update(*table_, key_of(kSharedA), Row().set(kBalance, int64_t{-1}));
    ASSERT_TRUE(locking.execute(ExecType::kNoCommit));
    // Leaves without closing either.
  });
  ASSERT_EQ(gone.wait_for(kJoinBound), std::future_status::ready);
  gone.get();
  auto other = session_of(*cluster);
  ASSERT_TRUE(other);
  api::Transaction& tx = other->start_transaction();
  api::Operation& a = tx.read(*table_, key_of(kSharedA), {}, LockMode::kExclusive);
  api::Operation& absent = tx.read(*table_, key_of(500));
  const Status s = tx.execute(ExecType::kCommit);
  EXPECT_EQ(tx.error(), ErrorCode::kNoSuchRow) << s.to_string();  // row 500 was rolled back
  tx.close();
  (void)absent;
  (void)a;
  // The exclusive lock on the shared row is free: taken and the old value seen.
  EXPECT_EQ(balance_of(kSharedA, LockMode::kExclusive), kSharedTotal);
  EXPECT_FALSE(balance_of(500).has_value());
}

// Threads waiting on a lock another holds: closing the cluster connection
// ends each wait at once with the reason, and no thread hangs.
TEST_F(DataApiThreadsTest, ClosingTheClusterConnectionEndsEveryWaitWithTheReason) {
  ClusterOptions options;
  options.deadlock_timeout_ms = 60'000;  // the waits end by the close, not a lock timeout
  start(options);
  seed_shared_rows();
  auto cluster = connect_shared(60'000);
  ASSERT_TRUE(cluster);
  auto holder = session_of(*cluster);
  ASSERT_TRUE(holder);
  api::Transaction& held = holder->start_transaction();
  held.update(*table_, key_of(kSharedA), Row().set(kBalance, int64_t{1}));
  ASSERT_TRUE(held.execute(ExecType::kNoCommit));
  std::atomic<int> waiting{0};
  std::vector<std::future<void>> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.push_back(std::async(std::launch::async, [&] {
      auto session = session_of(*cluster);
      ASSERT_TRUE(session);
      api::Transaction& tx = session->start_transaction();
      tx.update(*table_, key_of(kSharedA), Row().set(kBalance, int64_t{2}));
      ++waiting;
      const auto start = std::chrono::steady_clock::now();
      const Status s = tx.execute(ExecType::kCommit);
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "ended by the close";
      EXPECT_EQ(s.code(), StatusCode::kLinkDown) << s.to_string();
      EXPECT_NE(s.message().find("test closes the cluster connection"), std::string::npos) << s.to_string();
      tx.close();
    }));
  const auto bound = std::chrono::steady_clock::now() + kJoinBound;
  while (waiting < kThreads && std::chrono::steady_clock::now() < bound)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // their requests reach the lock queue
  cluster->close("the test closes the cluster connection");
  join_all(threads);
  // The holder's own transaction ended too, and the fixture's Connection
  // (another API node) goes on: the node rolled the closed node's work back.
  held.close();
  holder.reset();
  EXPECT_EQ(balance_of(kSharedA, LockMode::kExclusive), kSharedTotal);
  auto after = cluster->new_session();
  EXPECT_EQ(after.status().code(), StatusCode::kLinkDown);
}

}  // namespace
}  // namespace fjord::test
