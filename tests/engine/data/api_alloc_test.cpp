// The API's key-operation paths allocate nothing per operation once their
// buffers have grown: hinted transactions on a data node with two TCs (the
// key is encoded and hashed to pick one), batches, and execute_async with
// poll. Many rounds make exactly as many heap allocations, on any thread of
// this process (the in-process data node's too), as a few. Own binary: it
// replaces the global operator new.
#include <gtest/gtest.h>

#include <vector>

#include "counting_new.h"
#include "node_cluster.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;

constexpr uint16_t kId = 0, kValue = 1;
constexpr uint64_t kRows = 64;
constexpr uint32_t kBatch = 8;

engine::TableDef table_def() {
  engine::TableDef t;
  t.name = "counted";
  t.columns = {{"id", engine::ColumnType::kUint64, 0, false}, {"value", engine::ColumnType::kInt64, 0, false}};
  t.primary_key = {kId};
  return t;
}

class ApiAllocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.medium = "shm";
    options.single_threaded = false;
    options.thread_config = "ldm={count=1},tc={count=2},recv={count=1}";
    auto c = TestCluster::start(options);
    ASSERT_TRUE(c) << c.status().to_string();
    cluster_ = std::move(c).value();
    auto conn = cluster_->connect(50);
    ASSERT_TRUE(conn) << conn.status().to_string();
    conn_ = std::move(conn).value();
    auto t = conn_->create_table(table_def());
    ASSERT_TRUE(t) << t.status().to_string();
    table_ = *t;
    api::Transaction& tx = conn_->start_transaction();
    for (uint64_t id = 0; id < kRows; ++id)
      tx.insert(*table_, Row().set(kId, id).set(kValue, static_cast<int64_t>(id)));
    ASSERT_TRUE(tx.execute(ExecType::kCommit));
    tx.close();
    keys_.resize(kBatch);
  }

  // One round: a hinted serial read, a batch of reads and an update, and a
  // hinted read through execute_async and poll. The keys are set again each
  // time, as a program reusing its Rows does.
  void round(uint64_t n) {
    keys_[0].set(kId, n % kRows);
    api::Transaction& serial = conn_->start_transaction(table_, &keys_[0]);
    const api::Operation& read = serial.read(*table_, keys_[0]);
    ASSERT_TRUE(serial.execute(ExecType::kCommit));
    ASSERT_EQ(read.value(kId).as_uint64(), n % kRows);
    serial.close();
    api::Transaction& batch = conn_->start_transaction();
    for (uint32_t i = 0; i < kBatch; ++i) {
      keys_[i].set(kId, (n + i) % kRows);
      batch.read(*table_, keys_[i]);
    }
    changes_.set(kValue, static_cast<int64_t>(n));
    batch.update(*table_, keys_[0], changes_);
    ASSERT_TRUE(batch.execute(ExecType::kCommit));
    ASSERT_TRUE(batch.operation(kBatch - 1).has_row());
    batch.close();
    keys_[1].set(kId, (n * 7) % kRows);
    api::Transaction& async = conn_->start_transaction(table_, &keys_[1]);
    async.read(*table_, keys_[1]);
    bool done = false;
    ASSERT_TRUE(async.execute_async(ExecType::kCommit, [&done](api::Transaction& t, const Status& s) {
      EXPECT_TRUE(s) << s.to_string();
      done = true;
      t.close();
    }));
    while (!done) (void)conn_->poll(1000, 1);
  }

  uint64_t allocations_over(uint64_t rounds) {
    g_allocations = 0;
    g_count_allocations = true;
    for (uint64_t n = 0; n < rounds && !HasFatalFailure(); ++n) round(n);
    g_count_allocations = false;
    return g_allocations.load();
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<api::Connection> conn_;
  const engine::TableDef* table_ = nullptr;
  std::vector<Row> keys_;
  Row changes_;
};

TEST_F(ApiAllocTest, KeyOperationsAllocateNothingPerRound) {
  (void)allocations_over(20);  // the API's buffers grow once
  const uint64_t few = allocations_over(20);
  const uint64_t many = allocations_over(500);
  EXPECT_EQ(few, many) << "allocations grow with the number of rounds";
}

}  // namespace
}  // namespace fjord::test
