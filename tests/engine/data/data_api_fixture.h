// The fixture of the end-to-end API tests (data_api_*_test.cpp): a
// TestCluster with one data node, a connection as API node 50 and an
// "accounts" table, and the rows the tests write to it.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "fjord/api/api.h"
#include "node_cluster.h"

namespace fjord::test {

// accounts: id UINT64 (primary key), email VARCHAR(64) with a unique index
// (by_email), name VARCHAR(32) NULL, balance INT64 with an ordered index
// (by_balance), tag BINARY(4) NULL.
inline constexpr uint16_t kId = 0, kEmail = 1, kName = 2, kBalance = 3, kTag = 4;

engine::TableDef accounts_def(const std::string& name = "accounts");
inline api::Row key_of(uint64_t id) { return api::Row().set(kId, id); }
// An account row: email "user<id>@example.com", name NULL when empty.
api::Row account(uint64_t id, int64_t balance, const std::string& name = "");

class DataApiTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  // A fresh cluster over shm: one data node thread, or TC, two LDMs and a
  // receive thread each on their own.
  void start_over_shm(bool single_threaded);
  // A fresh cluster, connection and accounts table.
  void start(const ClusterOptions& options);
  // One transaction: `define` adds its operations, then one execute.
  Status run(const std::function<void(api::Transaction&)>& define, api::ExecType type = api::ExecType::kCommit);
  // Account `id`'s balance, read in a transaction of its own (none: no row).
  std::optional<int64_t> balance_of(uint64_t id,
                                    engine::protocol::LockMode lock = engine::protocol::LockMode::kCommitted);
  const engine::IndexDef& index(const std::string& name);

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<api::Connection> conn_;
  const engine::TableDef* table_ = nullptr;
};

}  // namespace fjord::test
