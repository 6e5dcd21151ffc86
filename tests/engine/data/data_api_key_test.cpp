// Key operations through the API: every operation type and its errors,
// mixed batches, batches larger than the send buffer, batches sent as
// trains, reads by unique key, TC hints, and DataMemory running out.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data_api_fixture.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;
using engine::ColumnType;
using engine::protocol::LockMode;

TEST_F(DataApiTest, EveryOperationTypeAndItsErrors) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 100, "ann")); }));
  EXPECT_EQ(balance_of(1), 100);
  // insert duplicate
  Status dup = run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 5)); });
  EXPECT_EQ(dup.message(), "630: Tuple already existed when attempting to insert (operation 0)");
  // update, write (as update and as insert), delete
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{150})); }));
  EXPECT_EQ(balance_of(1), 150);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.write(*table_, account(1, 160, "ann")); }));
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.write(*table_, account(2, 200)); }));
  EXPECT_EQ(balance_of(1), 160);
  EXPECT_EQ(balance_of(2), 200);
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(2)); }));
  EXPECT_FALSE(balance_of(2).has_value());
  // errors on missing rows
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.read(*table_, key_of(9)); }).message(),
            "626: Tuple did not exist (operation 0)");
  EXPECT_EQ(
      run([&](api::Transaction& tx) { tx.update(*table_, key_of(9), Row().set(kBalance, int64_t{1})); }).message(),
      "626: Tuple did not exist (operation 0)");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(9)); }).message(),
            "626: Tuple did not exist (operation 0)");
  // malformed values: a string too long, a wrong-width integer, NULL in NOT NULL
  Row too_long = account(3, 1);
  too_long.set(kName, std::string(40, 'x'));
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.insert(*table_, too_long); }).message().substr(0, 4), "4000");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kBalance, int32_t{5})); })
                .message()
                .substr(0, 4),
            "4000");
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set_null(kBalance)); })
                .message()
                .substr(0, 4),
            "4000");
  // The failures changed nothing.
  EXPECT_EQ(balance_of(1), 160);
  // Only the requested columns come back; NULL reads as NULL.
  api::Transaction& tx = conn_->start_transaction();
  const uint16_t cols[] = {kName, kTag};
  api::Operation& read = tx.read(*table_, key_of(1), cols);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  EXPECT_EQ(read.value(kName).as_string(), "ann");
  EXPECT_TRUE(read.value(kTag).is_null);
  EXPECT_FALSE(read.row().has(kBalance));
  tx.close();
}

// Each operation of a batch carries its own key, values, column list and
// lock, and each read gets its own row back, in a batch that mixes them and
// in the next batch of the same transaction (the buffers are reused).
TEST_F(DataApiTest, EachOperationOfAMixedBatchGetsItsOwnRequestAndRow) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 1; id <= 4; ++id)
      tx.insert(*table_, account(id, static_cast<int64_t>(id) * 10, "n" + std::to_string(id)));
  }));
  const uint16_t name_only[] = {kName};
  const uint16_t balance_and_id[] = {kBalance, kId};
  api::Transaction& tx = conn_->start_transaction();
  api::Operation& all = tx.read(*table_, key_of(3));
  tx.update(*table_, key_of(1), Row().set(kBalance, int64_t{-1}));
  api::Operation& name = tx.read(*table_, key_of(2), name_only);
  tx.insert(*table_, account(5, 50, "five"));
  api::Operation& by_email = tx.read_unique(*table_, index("by_email"), Row().set(kEmail, "user4@example.com"),
                                            balance_and_id, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  EXPECT_EQ(all.value(kId).as_uint64(), 3u);
  EXPECT_EQ(all.value(kName).as_string(), "n3");
  EXPECT_EQ(all.value(kBalance).as_int64(), 30);
  EXPECT_EQ(name.value(kName).as_string(), "n2");
  EXPECT_FALSE(name.row().has(kBalance));
  EXPECT_EQ(by_email.value(kId).as_uint64(), 4u);
  EXPECT_EQ(by_email.value(kBalance).as_int64(), 40);
  EXPECT_FALSE(by_email.row().has(kName));
  // A second batch: its own writes and reads, and the first batch's rows.
  tx.write(*table_, account(2, 22, "two"));
  api::Operation& own_insert = tx.read(*table_, key_of(5), name_only, LockMode::kShared);
  api::Operation& own_update = tx.read(*table_, key_of(1), balance_and_id, LockMode::kExclusive);
  api::Operation& own_write = tx.read(*table_, key_of(2), {}, LockMode::kShared);
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  EXPECT_EQ(own_insert.value(kName).as_string(), "five");
  EXPECT_EQ(own_update.value(kBalance).as_int64(), -1);
  EXPECT_EQ(own_update.value(kId).as_uint64(), 1u);
  EXPECT_EQ(own_write.value(kName).as_string(), "two");
  EXPECT_EQ(own_write.value(kBalance).as_int64(), 22);
  EXPECT_EQ(tx.operation_count(), 9u);
  tx.close();
  EXPECT_EQ(balance_of(2), 22);
  EXPECT_EQ(balance_of(5), 50);
}

// A batch whose requests fill the link's 64 KB ring several times over: the
// API waits for room (receiving meanwhile) and packs the rest into the next
// reservations; every operation arrives once and in order.
TEST_F(DataApiTest, ABatchLargerThanTheSendBufferIsSentWhole) {
  ClusterOptions options;
  options.medium = "shm";
  options.extra_link = "ShmSize=64K\n";
  start(options);
  constexpr uint64_t kRows = 1500;  // about 200 KB of requests each way
  const std::string name(30, 'x');
  api::Transaction& tx = conn_->start_transaction();
  for (uint64_t id = 0; id < kRows; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id), name));
  ASSERT_TRUE(tx.execute(ExecType::kNoCommit));
  std::vector<api::Operation*> reads;
  for (uint64_t id = 0; id < kRows; ++id) reads.push_back(&tx.read(*table_, key_of(id), {}, LockMode::kShared));
  ASSERT_TRUE(tx.execute(ExecType::kCommit));
  for (uint64_t id = 0; id < kRows; ++id) {
    ASSERT_TRUE(reads[id]->has_row()) << id;
    EXPECT_EQ(reads[id]->value(kId).as_uint64(), id);
    EXPECT_EQ(reads[id]->value(kBalance).as_int64(), static_cast<int64_t>(id));
  }
  tx.close();
  EXPECT_EQ(balance_of(kRows - 1), static_cast<int64_t>(kRows - 1));
}

// Signals executed so far by the data node's thread `name` ("tc 1"), from
// its statistics text.
uint64_t thread_signals(const std::string& stats, const std::string& name) {
  const std::string label = "thread " + name + ": loops ";
  const std::size_t at = stats.find(label);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << name << " in " << stats;
    return 0;
  }
  const std::size_t signals = stats.find("signals ", at);
  return std::stoull(stats.substr(signals + 8));
}

// A batch goes to TC as trains of up to 32 requests, and the reads TC runs
// itself answer in KeyDataTrains that fill a frame and go on in the next:
// batches of 2..70 reads of rows up to 6 KB (a train's answer many frames
// long), with a missing row among them or not, get every row whole, in
// both layouts (single-threaded: trains answered whole by TC; with TC and
// LDM on their own threads: each read answered by the LDM).
TEST_F(DataApiTest, BatchesGoAsTrainsAndEveryRowComesBackWhole) {
  for (const bool single : {true, false}) {
    SCOPED_TRACE(single ? "single-threaded" : "multi-threaded");
    start_over_shm(single);
    engine::TableDef big;
    big.name = "big";
    big.columns = {{"id", ColumnType::kUint64, 0, false}, {"blob", ColumnType::kVarBinary, 6000, false}};
    big.primary_key = {0};
    auto created = conn_->create_table(big);
    ASSERT_TRUE(created) << created.status().to_string();
    const engine::TableDef& t = **created;
    constexpr uint64_t kRows = 70;
    const auto blob_of = [](uint64_t id) {
      std::string b(static_cast<std::size_t>(id * 85 % 6001), 'a');
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + (id + i) % 26);
      return b;
    };
    for (uint64_t id = 0; id < kRows; id += 10)
      ASSERT_TRUE(run([&](api::Transaction& tx) {
        for (uint64_t k = id; k < id + 10; ++k) tx.insert(t, Row().set(0, k).set(1, blob_of(k)));
      }));
    for (const std::size_t batch :
         {std::size_t{2}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{64}, std::size_t{70}}) {
      SCOPED_TRACE("batch of " + std::to_string(batch));
      api::Transaction& tx = conn_->start_transaction();
      std::vector<api::Operation*> reads;
      for (std::size_t i = 0; i < batch; ++i) reads.push_back(&tx.read(t, Row().set(0, uint64_t{(i * 37) % kRows})));
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 37) % kRows;
        ASSERT_TRUE(reads[i]->has_row()) << "read " << i;
        EXPECT_EQ(reads[i]->value(0).as_uint64(), id);
        EXPECT_EQ(reads[i]->value(1).as_string(), blob_of(id)) << "read " << i;
      }
      tx.close();
      // The same with a missing row in the middle: the batch fails naming it.
      api::Transaction& bad = conn_->start_transaction();
      for (std::size_t i = 0; i < batch; ++i) bad.read(t, Row().set(0, i == batch / 2 ? uint64_t{999} : uint64_t{i}));
      const Status s = bad.execute(ExecType::kCommit);
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation " + std::to_string(batch / 2) + ")");
      bad.close();
    }
  }
}

// A batch mixing reads by primary and by unique key (column subsets too)
// goes as trains; every operation gets its own row, and a unique value
// nobody has fails the batch naming that operation. Single-threaded, the
// unique lookups run in TC's own LDM and answer inside the train.
TEST_F(DataApiTest, BatchedUniqueKeyReadsGetTheirRowsInBothLayouts) {
  for (const bool single : {true, false}) {
    SCOPED_TRACE(single ? "single-threaded" : "multi-threaded");
    start_over_shm(single);
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 0; id < 40; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id) * 3, "n"));
    }));
    const uint16_t balance_only[] = {kBalance};
    const auto email_of = [](uint64_t id) { return "user" + std::to_string(id) + "@example.com"; };
    for (const std::size_t batch : {std::size_t{1}, std::size_t{2}, std::size_t{20}, std::size_t{45}}) {
      SCOPED_TRACE("batch of " + std::to_string(batch));
      api::Transaction& tx = conn_->start_transaction();
      std::vector<api::Operation*> ops;
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 7) % 40;
        if (i % 3 == 0)
          ops.push_back(&tx.read(*table_, key_of(id)));
        else
          ops.push_back(
              &tx.read_unique(*table_, index("by_email"), Row().set(kEmail, email_of(id)),
                              i % 3 == 2 ? std::span<const uint16_t>(balance_only) : std::span<const uint16_t>()));
      }
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      for (std::size_t i = 0; i < batch; ++i) {
        const uint64_t id = (i * 7) % 40;
        ASSERT_TRUE(ops[i]->has_row()) << "operation " << i;
        EXPECT_EQ(ops[i]->value(kBalance).as_int64(), static_cast<int64_t>(id) * 3) << "operation " << i;
        if (i % 3 == 2) {
          EXPECT_FALSE(ops[i]->row().has(kId)) << "operation " << i;
        } else {
          EXPECT_EQ(ops[i]->value(kId).as_uint64(), id) << "operation " << i;
          EXPECT_EQ(ops[i]->value(kEmail).as_string(), email_of(id)) << "operation " << i;
        }
      }
      tx.close();
      api::Transaction& bad = conn_->start_transaction();
      for (std::size_t i = 0; i < batch; ++i)
        bad.read_unique(*table_, index("by_email"), Row().set(kEmail, i == batch / 2 ? "nobody" : email_of(i % 40)));
      const Status s = bad.execute(ExecType::kCommit);
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation " + std::to_string(batch / 2) + ")");
      bad.close();
    }
  }
}

// start_transaction(table, &key) picks the TC of the key's partition
// (partition % TC count, the partition from the hash of the encoded key):
// transactions whose keys all belong to one TC keep the other one idle.
TEST_F(DataApiTest, AHintedTransactionGoesToTheTcOfItsKeysPartition) {
  ClusterOptions options;
  options.single_threaded = false;
  options.thread_config = "ldm={count=1},tc={count=2},recv={count=1}";
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 64; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  const engine::KeyCodec codec = engine::KeyCodec::for_primary_key(*table_);
  auto tc_of = [&](uint64_t id) {
    std::byte key[engine::kMaxKeyBytes];
    const engine::ValueRef value = engine::ValueRef::of(id);
    auto n = codec.encode({&value, 1}, key);
    EXPECT_TRUE(n);
    return engine::partition_of(engine::hash_key(key, *n), table_->partitions) % 2;
  };
  constexpr int kTransactions = 60;
  for (uint32_t target = 0; target < 2; ++target) {
    const std::string busy = "tc " + std::to_string(target), idle = "tc " + std::to_string(1 - target);
    const std::string before = cluster_->node().stats_text();
    int done = 0;
    for (uint64_t id = 0; done < kTransactions; id = (id + 1) % 64) {
      if (tc_of(id) != target) continue;
      const Row key = key_of(id);
      api::Transaction& tx = conn_->start_transaction(table_, &key);
      api::Operation& read = tx.read(*table_, key);
      ASSERT_TRUE(tx.execute(ExecType::kCommit));
      EXPECT_EQ(read.value(kId).as_uint64(), id);
      tx.close();
      ++done;
    }
    const std::string after = cluster_->node().stats_text();
    EXPECT_GE(thread_signals(after, busy) - thread_signals(before, busy), uint64_t{kTransactions});
    EXPECT_LT(thread_signals(after, idle) - thread_signals(before, idle), uint64_t{kTransactions / 4}) << after;
  }
}

TEST_F(DataApiTest, UniqueIndexReadsAndConstraints) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    tx.insert(*table_, account(1, 10));
    tx.insert(*table_, account(2, 20));
  }));
  const engine::IndexDef& by_email = index("by_email");
  auto read_email = [&](const std::string& email) -> std::optional<uint64_t> {
    api::Transaction& tx = conn_->start_transaction();
    api::Operation& op = tx.read_unique(*table_, by_email, Row().set(kEmail, email));
    const Status s = tx.execute(ExecType::kCommit);
    std::optional<uint64_t> out;
    if (s)
      out = op.value(kId).as_uint64();
    else
      EXPECT_EQ(s.message(), "626: Tuple did not exist (operation 0)");
    tx.close();
    return out;
  };
  EXPECT_EQ(read_email("user2@example.com"), 2u);
  EXPECT_FALSE(read_email("nobody@example.com"));
  // A second row with the same email: constraint violation, nothing inserted.
  Row clash = account(3, 30);
  clash.set(kEmail, std::string("user1@example.com"));
  Row clash_fixed = clash;
  EXPECT_EQ(run([&](api::Transaction& tx) { tx.insert(*table_, clash); }).message(),
            "893: Duplicate value in unique index (operation 0)");
  EXPECT_FALSE(balance_of(3).has_value());
  // Changing the email moves the index entry; deleting the row removes it.
  ASSERT_TRUE(run(
      [&](api::Transaction& tx) { tx.update(*table_, key_of(1), Row().set(kEmail, std::string("ann@example.com"))); }));
  EXPECT_EQ(read_email("ann@example.com"), 1u);
  EXPECT_FALSE(read_email("user1@example.com"));
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, clash_fixed); }));  // the old email is free now
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.remove(*table_, key_of(1)); }));
  EXPECT_FALSE(read_email("ann@example.com"));
}

TEST_F(DataApiTest, DataMemoryFullFailsInsertsClearlyAndBreaksNothingElse) {
  ClusterOptions options;
  options.data_memory = "2M";
  start(options);
  uint64_t inserted = 0;
  Status last;
  for (uint64_t batch = 0; batch < 2000 && last.is_ok(); ++batch) {
    last = run([&](api::Transaction& tx) {
      for (uint64_t i = 0; i < 20; ++i) tx.insert(*table_, account(batch * 20 + i, 1, std::string(30, 'n')));
    });
    if (last) inserted += 20;
  }
  ASSERT_FALSE(last.is_ok()) << "2M of DataMemory never filled";
  EXPECT_EQ(last.message().substr(0, 4), "827:") << last.message();
  EXPECT_GT(inserted, 100u);
  // Existing rows are intact and readable; updates in place work.
  EXPECT_EQ(balance_of(0), 1);
  EXPECT_EQ(balance_of(inserted - 1), 1);
  // Deleting makes room again.
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t i = 0; i < 20; ++i) tx.remove(*table_, key_of(i));
  }));
  EXPECT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(5, 5)); }));
}

}  // namespace
}  // namespace fjord::test
