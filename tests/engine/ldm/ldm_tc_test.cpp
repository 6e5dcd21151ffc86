// LDM with the real TC and DICT: the contract between them, end to end.
// DICT creates a table with a unique and an ordered index (installing it in
// TC and both LDM instances), an API double sends TcKeyReq and ScanReq, TC
// routes them to the LDMs, keeps the hidden unique table in step from the
// LDM's unique_before/after, counts KeyData, coordinates scans, and breaks
// a deadlock with its timeout.
#include <gtest/gtest.h>

#include <set>

#include "fjord/engine/blocks/dict.h"
#include "fjord/engine/blocks/tc.h"
#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

// The API double relays what the test injects (words: block, instance,
// signal, data...) so that answers come back to it, and captures the rest.
class Cluster {
 public:
  Cluster() {
    auto pool = storage::PagePool::create({32 << 20});
    EXPECT_TRUE(pool);
    pool_ = std::move(pool).value();
    // Four busy threads (200 us spin) and the test's on two cores.
    auto rt = Runtime::create(
        test::options_with({test::plan(ThreadType::kMain, 0, 200), test::plan(ThreadType::kTc, 0, 200),
                            test::plan(ThreadType::kLdm, 0, 200), test::plan(ThreadType::kLdm, 1, 200)}));
    EXPECT_TRUE(rt);
    rt_ = std::move(rt).value();
    TcOptions tc;
    tc.ldm_instances = 2;
    tc.deadlock_timeout_ms = 300;
    tc.timer_period_ms = 20;
    EXPECT_TRUE(rt_->add_block(std::make_unique<TcBlock>(tc), ThreadType::kTc, 0));
    EXPECT_TRUE(rt_->add_block(std::make_unique<DictBlock>(1, 2, 4), ThreadType::kMain, 0));
    for (uint16_t i = 0; i < 2; ++i) {
      LdmOptions o;
      o.instance = i;
      o.ldm_instances = 2;
      EXPECT_TRUE(rt_->add_block(std::make_unique<LdmBlock>(*pool_, o), ThreadType::kLdm, i));
    }
    EXPECT_TRUE(rt_->add_block(std::make_unique<test::LambdaBlock>(block_numbers::kApi, 0, "API-DOUBLE",
                                                                   [this](const Signal& s, BlockContext& c) {
                                                                     if (s.number() != kRelay)
                                                                       return inbox_.push(capture(s));
                                                                     relay(s, c);
                                                                   }),
                               ThreadType::kMain, 0));
    EXPECT_TRUE(rt_->start());
  }
  ~Cluster() { rt_->stop(); }

  void send(BlockNumber block, const SignalOut& out) {
    std::vector<uint32_t> words = {block, 0, out.number};
    words.insert(words.end(), out.words, out.words + out.word_count);
    ASSERT_TRUE(rt_->inject({kSelf, {block_numbers::kApi, 0}}, kRelay, words, out.section_list()).is_ok());
  }
  Inbox& inbox() { return inbox_; }

  TableDef create(const TableDef& t) {
    send(block_numbers::kDict, encode(SchemaMessage{gsn::kCreateTableReq, 1, encode_table(t)}));
    const Captured c = inbox_.take([](const Captured& x) { return x.number() == gsn::kCreateTableConf; });
    return decode_table(decode_schema_message(c.signal())->payload).value();
  }

 private:
  void relay(const Signal& s, BlockContext& c) {
    std::vector<uint32_t> words;
    for (std::size_t i = 3; i < s.word_count(); ++i) words.push_back(s.word(i));
    std::span<const std::byte> sections[frame::kMaxSections];
    for (std::size_t i = 0; i < s.section_count(); ++i) sections[i] = s.section(i);
    c.send({kSelf, {static_cast<BlockNumber>(s.word(0)), static_cast<uint16_t>(s.word(1))}},
           static_cast<uint16_t>(s.word(2)), words, {sections, s.section_count()});
  }

  std::unique_ptr<storage::PagePool> pool_;
  std::unique_ptr<Runtime> rt_;
  Inbox inbox_;
};

struct TxResult {
  bool ok = false;
  ErrorCode error = ErrorCode::kNone;
  std::vector<RowValues> rows;  // KeyData received for the batch
};

class Api {
 public:
  explicit Api(Cluster& cluster) : c_(cluster) {}

  // One operation in its own transaction, committed (or just executed).
  TxResult run(const TableDef& t, OpType op, const Values& key, const Values& values = {}, bool commit = true,
               std::optional<TxId> tx = std::nullopt, uint32_t index_id = 0, LockMode lock = LockMode::kCommitted,
               bool start = true) {
    const uint32_t conn = send(t, op, key, values, commit, tx, index_id, lock, start);
    return wait(conn);
  }
  // `conn`: the transaction's api_conn (TC answers every batch of a
  // transaction with the one it started with); 0: a new one.
  uint32_t send(const TableDef& t, OpType op, const Values& key, const Values& values, bool commit,
                std::optional<TxId> tx, uint32_t index_id = 0, LockMode lock = LockMode::kCommitted, bool start = true,
                uint32_t conn = 0) {
    TcKeyReq r;
    r.api_conn = conn != 0 ? conn : ++next_conn_;
    r.tx = tx.value_or(tx_id(1000 + r.api_conn));
    r.table_id = t.table_id;
    r.table_version = t.version;
    r.op = op;
    r.lock = op == OpType::kRead ? lock : LockMode::kExclusive;
    r.flags =
        (start ? kFlagStartTx : 0) | kFlagExecute | (commit ? kFlagCommit : 0) | (index_id != 0 ? kFlagViaUnique : 0);
    r.op_index = 0;
    r.index_id = index_id;
    r.batch_ops = 1;
    r.key = key.bytes();
    r.values = values.bytes();
    c_.send(block_numbers::kTc, encode(r));
    return r.api_conn;
  }
  TxResult wait(uint32_t conn) {
    const Captured c = c_.inbox().take([&](const Captured& x) {
      if (x.number() == gsn::kTcKeyConf) return decode_tc_key_conf(x.signal())->api_conn == conn;
      if (x.number() == gsn::kTcKeyRef) return decode_tc_key_ref(x.signal())->api_conn == conn;
      return false;
    });
    TxResult out;
    if (c.frame.empty()) return out;
    if (c.number() == gsn::kTcKeyRef) {
      out.error = decode_tc_key_ref(c.signal())->error;
      c_.inbox().drain([&](const Captured& x) {
        return x.number() == gsn::kKeyData && decode_key_data(x.signal())->api_conn == conn;
      });
      return out;
    }
    const TcKeyConf conf = decode_tc_key_conf(c.signal()).value();
    out.ok = true;
    for (uint32_t i = 0; i < conf.data_messages; ++i) {
      const Captured d = c_.inbox().take([&](const Captured& x) {
        return x.number() == gsn::kKeyData && decode_key_data(x.signal())->api_conn == conn;
      });
      if (!d.frame.empty()) out.rows.push_back(decode_values(decode_key_data(d.signal())->values));
    }
    return out;
  }
  void commit(TxId tx, uint32_t conn) {
    c_.send(block_numbers::kTc, encode(TcTxMessage{gsn::kTcCommitReq, conn, tx}));
    const Captured c = c_.inbox().take([&](const Captured& x) {
      return (x.number() == gsn::kTcKeyConf && decode_tc_key_conf(x.signal())->api_conn == conn) ||
             (x.number() == gsn::kTcKeyRef && decode_tc_key_ref(x.signal())->api_conn == conn);
    });
    EXPECT_EQ(c.number(), gsn::kTcKeyConf);
  }

  std::vector<RowValues> scan(const TableDef& t, uint32_t index_id, const std::vector<std::byte>& bounds,
                              uint32_t batch_rows) {
    ScanReq r;
    r.api_conn = ++next_conn_;
    r.scan_id = r.api_conn;
    r.table_id = t.table_id;
    r.table_version = t.version;
    r.index_id = index_id;
    r.flags = index_id != 0 ? kScanFlagOrderedIndex : 0;
    r.batch_rows = batch_rows;
    r.bounds = bounds;
    c_.send(block_numbers::kTc, encode(r));
    std::vector<RowValues> rows;
    for (;;) {
      const Captured c = c_.inbox().take([&](const Captured& x) {
        return (x.number() == gsn::kScanConf && decode_scan_conf(x.signal())->scan_id == r.scan_id) ||
               (x.number() == gsn::kScanRef && decode_scan_ref(x.signal())->scan_id == r.scan_id);
      });
      EXPECT_EQ(c.number(), gsn::kScanConf);
      if (c.number() != gsn::kScanConf) return rows;
      const ScanConf conf = decode_scan_conf(c.signal()).value();
      for (uint32_t i = 0; i < conf.messages; ++i) {
        const Captured m = c_.inbox().take([&](const Captured& x) {
          return x.number() == gsn::kScanRows && decode_scan_rows(x.signal())->scan_id == r.scan_id;
        });
        const ScanRows sr = decode_scan_rows(m.signal()).value();
        std::span<const std::byte> rest = sr.data;
        for (uint32_t k = 0; k < sr.rows; ++k) {
          uint32_t len;
          std::memcpy(&len, rest.data(), 4);
          rows.push_back(decode_values(rest.subspan(4, len)));
          rest = rest.subspan(4 + len);
        }
      }
      if (conf.finished) return rows;
      c_.send(block_numbers::kTc, encode(gsn::kScanNextReq, ScanNext{r.api_conn, r.scan_id}));
    }
  }

 private:
  Cluster& c_;
  uint32_t next_conn_ = 0;
};

TableDef plain_items() {
  TableDef t = items_table(8);
  t.table_id = 0;  // DICT assigns ids
  for (IndexDef& index : t.indexes) index.index_id = 0;
  return t;
}

uint32_t index_id_of(const TableDef& t, const std::string& name) {
  for (const IndexDef& index : t.indexes)
    if (index.name == name) return index.index_id;
  ADD_FAILURE() << "no index " << name;
  return 0;
}

TEST(LdmWithTcTest, KeyOperationsUniqueIndexesAndScansThroughTc) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  for (uint64_t id = 0; id < 40; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id),
                        item_values(id, Item{int32_t(id % 5), long_name(id), uint32_t(100 + id)}))
                    .ok);
  // By primary key and by unique key.
  TxResult r = api.run(t, OpType::kRead, item_key(7));
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(int_of<uint32_t>(r.rows[0].at(kCode)), 107u);
  r = api.run(t, OpType::kRead, Values().u32(kCode, 107), {}, true, std::nullopt, by_code);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(int_of<uint64_t>(r.rows[0].at(kId)), 7u);
  // Change the unique value: the hidden table follows.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(7), Values().u32(kCode, 5007)).ok);
  EXPECT_EQ(api.run(t, OpType::kRead, Values().u32(kCode, 107), {}, true, std::nullopt, by_code).error,
            ErrorCode::kNoSuchRow);
  r = api.run(t, OpType::kRead, Values().u32(kCode, 5007), {}, true, std::nullopt, by_code);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(int_of<uint64_t>(r.rows.at(0).at(kId)), 7u);
  // A duplicate unique value aborts the insert; NULLs are not indexed.
  EXPECT_EQ(api.run(t, OpType::kInsert, item_key(100), item_values(100, Item{1, "dup", 5007})).error,
            ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(100)).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(101), item_values(101, Item{1, "a", std::nullopt})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(102), item_values(102, Item{1, "b", std::nullopt})).ok);
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(101)).ok);
  // Deleting frees the unique value.
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(7)).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(103), item_values(103, Item{1, "c", 5007})).ok);

  // Scans over all 8 partitions (both LDM instances).
  std::set<uint64_t> ids;
  for (const RowValues& row : api.scan(t, 0, {}, 3)) EXPECT_TRUE(ids.insert(int_of<uint64_t>(row.at(kId))).second);
  std::set<uint64_t> want;
  for (uint64_t id = 0; id < 40; ++id)
    if (id != 7) want.insert(id);
  want.insert({102, 103});
  EXPECT_EQ(ids, want);
  const auto bounds =
      bounds_section(Bounds{true, true, true, true, 1, 1, {}, {}}, Values().i32(kQty, 2), Values().i32(kQty, 2));
  std::size_t twos = 0;
  for (const RowValues& row : api.scan(t, index_id_of(t, "by_qty"), bounds, 2)) {
    EXPECT_EQ(int_of<int32_t>(row.at(kQty)), 2);
    ++twos;
  }
  EXPECT_EQ(twos, 7u);  // ids 2, 12, ..., 37 (7 was deleted)
}

TEST(LdmWithTcTest, TcsTimeoutBreaksADeadlockAndTheOtherTransactionGoesOn) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "x", 1})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "y", 2})).ok);
  const TxId a = tx_id(1), b = tx_id(2);
  constexpr uint32_t kA = 901, kB = 902;  // the transactions' api_conn
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 10), false, a, 0,
                                LockMode::kExclusive, true, kA))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 20), false, b, 0,
                                LockMode::kExclusive, true, kB))
                  .ok);
  // a waits for b's row, b for a's: a deadlock that only TC's timeout breaks.
  api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 11), false, a, 0, LockMode::kExclusive, false, kA);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 21), false, b, 0, LockMode::kExclusive, false, kB);
  // TC aborts one with 266, or both when they time out in the same check;
  // a survivor is then granted the row its victim held.
  const TxResult ra = api.wait(kA);
  const TxResult rb = api.wait(kB);
  EXPECT_TRUE(!ra.ok || !rb.ok);
  if (!ra.ok) {
    EXPECT_EQ(ra.error, ErrorCode::kDeadlockTimeout);
  }
  if (!rb.ok) {
    EXPECT_EQ(rb.error, ErrorCode::kDeadlockTimeout);
  }
  if (ra.ok) api.commit(a, kA);
  if (rb.ok) api.commit(b, kB);
  const auto qty = [&](uint64_t id) {
    return int_of<int32_t>(api.run(t, OpType::kRead, item_key(id)).rows.at(0).at(kQty));
  };
  EXPECT_EQ(qty(1), ra.ok ? 10 : rb.ok ? 21 : 1);
  EXPECT_EQ(qty(2), ra.ok ? 11 : rb.ok ? 20 : 2);
  // Nothing stays locked: a new transaction writes both rows at once.
  const TxId c = tx_id(3);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 30), false, c, 0,
                                LockMode::kExclusive, true, 903))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().i32(kQty, 31), true, c, 0,
                                LockMode::kExclusive, false, 903))
                  .ok);
  EXPECT_EQ(qty(1), 30);
  EXPECT_EQ(qty(2), 31);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
