// Randomized model test: random transactions run against the engine and
// against a simple in-memory model; after each transaction the outcome must
// agree, and after each commit the whole table (read back by a scan) must
// equal the model. Reads take shared locks (they see the transaction's own
// changes) or none (read-committed: they see the last commit; a single-
// threaded node runs those inside TC's thread, directly in the LDM). Over the simulated transporter, TCP and SHM, and
// in single- and multi-threaded data nodes. Seeded: a failure prints its seed; FJORD_TEST_SEED=<n> replays one.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>

#include "node_cluster.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::ColumnType;
using engine::IndexKind;
using engine::protocol::LockMode;

constexpr uint16_t kKey = 0, kValue = 1, kNumber = 2, kUnique = 3;

struct Record {
  std::optional<std::string> value;  // nullable VARBINARY(40)
  int64_t number = 0;
  std::optional<std::string> unique;  // nullable VARCHAR(24), unique when not NULL
  bool operator==(const Record&) const = default;
};
using Model = std::map<uint32_t, Record>;

engine::TableDef model_table() {
  engine::TableDef t;
  t.name = "model";
  t.columns = {{"k", ColumnType::kUint32, 0, false},
               {"v", ColumnType::kVarBinary, 40, true},
               {"n", ColumnType::kInt64, 0, false},
               {"u", ColumnType::kVarChar, 24, true}};
  t.primary_key = {kKey};
  t.indexes = {{"by_u", IndexKind::kUnique, {kUnique}, 0}, {"by_n", IndexKind::kOrdered, {kNumber}, 0}};
  return t;
}

Row full_row(uint32_t k, const Record& r) {
  Row row;
  row.set(kKey, k).set(kNumber, r.number);
  r.value ? row.set(kValue, *r.value) : row.set_null(kValue);
  r.unique ? row.set(kUnique, *r.unique) : row.set_null(kUnique);
  return row;
}

Record record_of(const api::RowView& row) {
  Record r;
  const auto v = row.value(kValue);
  if (!v.is_null) r.value = std::string(v.as_string());
  r.number = row.value(kNumber).as_int64();
  const auto u = row.value(kUnique);
  if (!u.is_null) r.unique = std::string(u.as_string());
  return r;
}

class ModelTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

struct Op {
  engine::protocol::OpType type;
  uint32_t key;
  Record record;  // insert/write: the row; update: the new values
  api::Operation* handle = nullptr;
  std::optional<Record> expect;       // reads: the value the model says
  LockMode lock = LockMode::kShared;  // reads: kCommitted sees the last commit, not the transaction's own changes
};

bool unique_taken(const Model& m, uint32_t except, const std::optional<std::string>& u) {
  if (!u) return false;
  for (const auto& [k, r] : m)
    if (k != except && r.unique == u) return true;
  return false;
}

// Applies `op` to the model view; returns the NDB error code it must fail
// with, or 0.
uint32_t apply(Model& view, Op& op) {
  using engine::protocol::OpType;
  const auto it = view.find(op.key);
  switch (op.type) {
    case OpType::kRead:
      if (it == view.end()) return 626;
      op.expect = it->second;
      return 0;
    case OpType::kInsert:
      if (it != view.end()) return 630;
      if (unique_taken(view, op.key, op.record.unique)) return 893;
      view[op.key] = op.record;
      return 0;
    case OpType::kUpdate:
      if (it == view.end()) return 626;
      if (unique_taken(view, op.key, op.record.unique)) return 893;
      it->second = op.record;
      return 0;
    case OpType::kWrite:
      if (unique_taken(view, op.key, op.record.unique)) return 893;
      view[op.key] = op.record;
      return 0;
    case OpType::kDelete:
      if (it == view.end()) return 626;
      view.erase(it);
      return 0;
  }
  return 0;
}

TEST_P(ModelTest, RandomTransactionsMatchTheModel) {
  const auto& [medium, single] = GetParam();
  const char* fixed = std::getenv("FJORD_TEST_SEED");
  const uint64_t seed = fixed ? std::stoull(fixed) : std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (FJORD_TEST_SEED=" + std::to_string(seed) + " replays it)");
  std::mt19937_64 rng(seed);
  ClusterOptions options;
  options.medium = medium;
  options.single_threaded = single;
  options.sim_seed = seed;  // the simulated link's delays and partial writes replay with the test
  if (!single) options.thread_config = "ldm={count=2},tc={count=2},recv={count=1}";
  auto cluster = TestCluster::start(options);
  ASSERT_TRUE(cluster) << cluster.status().to_string();
  auto conn = (*cluster)->connect(50);
  ASSERT_TRUE(conn) << conn.status().to_string();
  auto table = (*conn)->create_table(model_table());
  ASSERT_TRUE(table) << table.status().to_string();
  const engine::TableDef& t = **table;

  Model model;
  uint64_t unique_counter = 0;
  // `reserved`: keys this batch uses. A unique value taken from a committed
  // row is only used if no operation of the batch touches that row, so the
  // hidden-index maintenance of one operation never races another's.
  auto random_record = [&](std::set<uint32_t>& reserved) {
    Record r;
    if (rng() % 5) r.value = std::string(rng() % 40, static_cast<char>('a' + rng() % 26));
    r.number = static_cast<int64_t>(rng() % 200) - 100;
    // Fresh unique values, or (rarely) one a committed row already holds:
    // a batch never reuses a value another of its operations frees.
    auto it = model.empty() ? model.end() : std::next(model.begin(), static_cast<long>(rng() % model.size()));
    if (rng() % 4 == 0 && it != model.end() && !reserved.count(it->first)) {
      r.unique = it->second.unique;
      reserved.insert(it->first);
    } else if (rng() % 3) {
      r.unique = "u" + std::to_string(++unique_counter);
    }
    return r;
  };
  constexpr int kTransactions = 1000;
  int commits = 0, aborts = 0, rollbacks = 0;
  for (int n = 0; n < kTransactions; ++n) {
    Model view = model;
    api::Transaction& tx = (*conn)->start_transaction();
    std::set<uint32_t> possible_errors;
    bool finished = false;
    const int batches = 1 + static_cast<int>(rng() % 3);
    for (int b = 0; b < batches && !finished; ++b) {
      std::vector<Op> ops;
      const int count = 1 + static_cast<int>(rng() % 8);
      std::set<uint32_t> batch_keys;
      for (int i = 0; i < count; ++i) {
        const uint32_t key = static_cast<uint32_t>(rng() % 48);
        const bool repeat = !batch_keys.insert(key).second;
        // Mostly operations that fit the row's state; one in ten deliberately not.
        using T = engine::protocol::OpType;
        const bool exists = view.count(key) != 0;
        static constexpr T kOnExisting[] = {T::kRead, T::kUpdate, T::kWrite, T::kDelete};
        static constexpr T kOnMissing[] = {T::kInsert, T::kWrite};
        T type = static_cast<T>(1 + rng() % 5);
        if (rng() % 10 != 0) type = exists ? kOnExisting[rng() % 4] : kOnMissing[rng() % 2];
        Op op{type, key, random_record(batch_keys)};
        if (repeat) op.type = engine::protocol::OpType::kRead;
        if (op.type == engine::protocol::OpType::kRead && rng() % 2) op.lock = LockMode::kCommitted;
        // A committed read sees the table as the last commit left it (a read
        // leaves the model it is applied to as it was).
        const uint32_t e = apply(op.lock == LockMode::kCommitted ? model : view, op);
        if (e) possible_errors.insert(e);
        ops.push_back(op);
      }
      for (Op& op : ops) {
        const Row key = Row().set(kKey, op.key);
        switch (op.type) {
          case engine::protocol::OpType::kRead: op.handle = &tx.read(t, key, {}, op.lock); break;
          case engine::protocol::OpType::kInsert: op.handle = &tx.insert(t, full_row(op.key, op.record)); break;
          case engine::protocol::OpType::kUpdate: {
            Row changes;  // every non-key column
            changes.set(kNumber, op.record.number);
            op.record.value ? changes.set(kValue, *op.record.value) : changes.set_null(kValue);
            op.record.unique ? changes.set(kUnique, *op.record.unique) : changes.set_null(kUnique);
            op.handle = &tx.update(t, key, changes);
            break;
          }
          case engine::protocol::OpType::kWrite: op.handle = &tx.write(t, full_row(op.key, op.record)); break;
          case engine::protocol::OpType::kDelete: op.handle = &tx.remove(t, key); break;
        }
      }
      const int roll = static_cast<int>(rng() % 10);
      const ExecType type = roll < 5 ? ExecType::kCommit : roll < 9 ? ExecType::kNoCommit : ExecType::kRollback;
      const Status s = tx.execute(type);
      if (!possible_errors.empty() && type != ExecType::kRollback) {
        ASSERT_FALSE(s.is_ok()) << "transaction " << n << " should have failed with one of the model's errors";
        const uint32_t got = static_cast<uint32_t>(tx.error());
        EXPECT_TRUE(possible_errors.count(got)) << "transaction " << n << ": " << s.message();
        ++aborts;
        finished = true;
        break;
      }
      ASSERT_TRUE(s) << "transaction " << n << ": " << s.message();
      if (type == ExecType::kRollback) {
        ++rollbacks;
        finished = true;
        break;
      }
      for (const Op& op : ops)
        if (op.expect) {
          ASSERT_TRUE(op.handle->has_row()) << "transaction " << n << " read of key " << op.key;
          EXPECT_EQ(record_of(op.handle->row()), *op.expect) << "transaction " << n << " read of key " << op.key;
        }
      if (type == ExecType::kCommit) {
        model = view;
        ++commits;
        finished = true;
      }
    }
    if (!finished) {
      ASSERT_TRUE(tx.execute(ExecType::kRollback));
    }
    tx.close();
    if (n % 50 == 49 || n == kTransactions - 1) {
      // The whole table, by a full scan, equals the model.
      api::ScanSpec spec;
      spec.table = &t;
      spec.batch_rows = 1 + static_cast<uint32_t>(rng() % 16);
      auto scan = (*conn)->scan(spec);
      ASSERT_TRUE(scan) << scan.status().to_string();
      Model seen;
      api::RowView row;
      while ((*scan)->next(row)) seen[row.value(kKey).as_uint32()] = record_of(row);
      ASSERT_TRUE((*scan)->status()) << (*scan)->status().to_string();
      (*scan)->close();
      ASSERT_EQ(seen.size(), model.size()) << "after transaction " << n;
      for (const auto& [k, r] : model) ASSERT_EQ(seen[k], r) << "key " << k << " after transaction " << n;
    }
  }
  EXPECT_GT(commits, 200);
  EXPECT_GT(aborts, 20);
  EXPECT_GT(rollbacks, 0);
}

INSTANTIATE_TEST_SUITE_P(Media, ModelTest,
                         ::testing::Values(std::make_tuple("sim", true), std::make_tuple("tcp", true),
                                           std::make_tuple("shm", true), std::make_tuple("tcp", false),
                                           std::make_tuple("shm", false)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) +
                                  (std::get<1>(param_info.param) ? "_single" : "_multi");
                         });

}  // namespace
}  // namespace fjord::test
