#include "data_api_fixture.h"

namespace fjord::test {

using api::ExecType;
using api::Row;
using engine::ColumnType;
using engine::IndexKind;
using engine::protocol::LockMode;

engine::TableDef accounts_def(const std::string& name) {
  engine::TableDef t;
  t.name = name;
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"email", ColumnType::kVarChar, 64, false},
               {"name", ColumnType::kVarChar, 32, true},
               {"balance", ColumnType::kInt64, 0, false},
               {"tag", ColumnType::kBinary, 4, true}};
  t.primary_key = {kId};
  t.indexes = {{"by_email", IndexKind::kUnique, {kEmail}, 0}, {"by_balance", IndexKind::kOrdered, {kBalance}, 0}};
  return t;
}

Row account(uint64_t id, int64_t balance, const std::string& name) {
  Row r;
  r.set(kId, id).set(kEmail, "user" + std::to_string(id) + "@example.com").set(kBalance, balance);
  if (name.empty())
    r.set_null(kName);
  else
    r.set(kName, name);
  return r;
}

void DataApiTest::start_over_shm(bool single_threaded) {
  ClusterOptions options;
  options.medium = "shm";
  options.single_threaded = single_threaded;
  if (!single_threaded) options.thread_config = "ldm={count=2},tc={count=1},recv={count=1}";
  start(options);
}

void DataApiTest::start(const ClusterOptions& options) {
  conn_.reset();
  cluster_.reset();
  auto c = TestCluster::start(options);
  ASSERT_TRUE(c) << c.status().to_string();
  cluster_ = std::move(c).value();
  auto conn = cluster_->connect(50);
  ASSERT_TRUE(conn) << conn.status().to_string();
  conn_ = std::move(conn).value();
  auto t = conn_->create_table(accounts_def());
  ASSERT_TRUE(t) << t.status().to_string();
  table_ = *t;
}

Status DataApiTest::run(const std::function<void(api::Transaction&)>& define, ExecType type) {
  api::Transaction& tx = conn_->start_transaction();
  define(tx);
  Status s = tx.execute(type);
  tx.close();
  return s;
}

std::optional<int64_t> DataApiTest::balance_of(uint64_t id, LockMode lock) {
  api::Transaction& tx = conn_->start_transaction();
  api::Operation& op = tx.read(*table_, key_of(id), {}, lock);
  const Status s = tx.execute(ExecType::kCommit);
  std::optional<int64_t> out;
  if (s.is_ok()) out = op.value(kBalance).as_int64();
  tx.close();
  return out;
}

const engine::IndexDef& DataApiTest::index(const std::string& name) {
  for (const auto& i : table_->indexes)
    if (i.name == name) return i;
  ADD_FAILURE() << "no index " << name;
  return table_->indexes.front();
}

}  // namespace fjord::test
