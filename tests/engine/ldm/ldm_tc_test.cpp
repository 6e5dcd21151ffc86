// LDM with the real TC and DICT: the contract between them, end to end.
// DICT creates a table with a unique and an ordered index (installing it in
// TC and both LDM instances), an API double sends TcKeyReq and ScanReq, TC
// routes them to the LDMs, keeps the hidden unique table in step from the
// LDM's unique_before/after, counts KeyData, coordinates scans, and breaks
// a deadlock with its timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/engine/blocks/dict.h"
#include "fjord/engine/blocks/tc.h"
#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

// The API double relays what the test injects (words: block, instance,
// signal, data...) so that answers come back to it, and captures the rest.
// Layouts: every block on a thread of its own, or TC on LDM 0's thread
// (TC then runs read-committed reads of LDM 0's partitions there directly,
// and sends everything else, and all of LDM 1's, as signals).
enum class Layout { kSeparate, kTcWithLdm0 };

class Cluster {
 public:
  // `max_operations`: TC's and each LDM's MaxNoOfConcurrentOperations;
  // `inactive_timeout_ms`: TC's TransactionInactiveTimeout (0 = none);
  // `max_scans`: TC's MaxNoOfConcurrentScans.
  explicit Cluster(Layout layout = Layout::kSeparate, uint32_t tc_timer_ms = 20, uint32_t max_operations = 32768,
                   uint32_t inactive_timeout_ms = 0, uint32_t max_scans = 256) {
    auto pool = storage::PagePool::create({32 << 20});
    EXPECT_TRUE(pool);
    pool_ = std::move(pool).value();
    // Up to four busy threads (200 us spin) and the test's on two cores.
    std::vector<ThreadSpec> threads = {test::plan(ThreadType::kMain, 0, 200), test::plan(ThreadType::kLdm, 0, 200),
                                       test::plan(ThreadType::kLdm, 1, 200)};
    if (layout == Layout::kSeparate) threads.push_back(test::plan(ThreadType::kTc, 0, 200));
    auto rt = Runtime::create(test::options_with(threads));
    EXPECT_TRUE(rt);
    rt_ = std::move(rt).value();
    TcOptions tc;
    tc.ldm_instances = 2;
    tc.deadlock_timeout_ms = 300;
    tc.timer_period_ms = tc_timer_ms;
    tc.max_operations = max_operations;
    tc.inactive_timeout_ms = inactive_timeout_ms;
    tc.max_scans = max_scans;
    auto tc_block = std::make_unique<TcBlock>(tc);
    tc_ = tc_block.get();
    EXPECT_TRUE(
        rt_->add_block(std::move(tc_block), layout == Layout::kSeparate ? ThreadType::kTc : ThreadType::kLdm, 0));
    EXPECT_TRUE(rt_->add_block(std::make_unique<DictBlock>(1, 2, 4), ThreadType::kMain, 0));
    for (uint16_t i = 0; i < 2; ++i) {
      LdmOptions o;
      o.instance = i;
      o.ldm_instances = 2;
      o.max_operations = max_operations;
      auto ldm = std::make_unique<LdmBlock>(*pool_, o);
      ldm_[i] = ldm.get();
      EXPECT_TRUE(rt_->add_block(std::move(ldm), ThreadType::kLdm, i));
    }
    EXPECT_TRUE(rt_->add_block(std::make_unique<test::LambdaBlock>(block_numbers::kApi, 0, "API-DOUBLE",
                                                                   [this](const Signal& s, BlockContext& c) {
                                                                     if (s.number() != kRelay)
                                                                       return inbox_.push(capture(s));
                                                                     relay(s, c);
                                                                   }),
                               ThreadType::kMain, 0));
    // Holds LDM 0's thread while stalled_ (stall_ldm0): a slow node.
    EXPECT_TRUE(rt_->add_block(
        std::make_unique<test::LambdaBlock>(kStaller, 0, "STALLER", [this](const Signal&, BlockContext&) { hold(); }),
        ThreadType::kLdm, 0));
    EXPECT_TRUE(rt_->start());
  }
  ~Cluster() {
    stalled_ = false;
    rt_->stop();
  }

  void send(BlockNumber block, const SignalOut& out, uint16_t instance = 0) {
    std::vector<uint32_t> words = {block, instance, out.number};
    words.insert(words.end(), out.words, out.words + out.word_count);
    ASSERT_TRUE(rt_->inject({kSelf, {block_numbers::kApi, 0}}, kRelay, words, out.section_list()).is_ok());
  }
  Inbox& inbox() { return inbox_; }
  // LDM 0 runs nothing from when this returns until resume_ldm0() (or 10 s).
  void stall_ldm0() {
    stalled_ = true;
    ASSERT_TRUE(rt_->inject({kSelf, {kStaller, 0}}, kStall, {}).is_ok());
    while (!holding_) std::this_thread::sleep_for(kStallPoll);
  }
  void resume_ldm0() { stalled_ = false; }
  const LdmBlock& ldm(uint16_t instance) const { return *ldm_[instance]; }
  // Read once the cluster is quiet (the test has its answers).
  const TcBlock& tc() const { return *tc_; }
  // Signals the thread named ("ldm 0") has executed, once it is quiet: a
  // thread counts a batch's signals after it ran them (and sent answers).
  uint64_t signals_on(const std::string& thread_name) const {
    const auto read = [&] {
      for (const ThreadStats& t : rt_->thread_stats())
        if (t.name == thread_name) return t.signals;
      ADD_FAILURE() << "no thread " << thread_name;
      return uint64_t{0};
    };
    for (uint64_t last = read();;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const uint64_t now = read();
      if (now == last) return now;
      last = now;
    }
  }

  TableDef create(const TableDef& t) {
    send(block_numbers::kDict, encode(SchemaMessage{gsn::kCreateTableReq, 1, encode_table(t)}));
    const Captured c = inbox_.take([](const Captured& x) { return x.number() == gsn::kCreateTableConf; });
    return decode_table(decode_schema_message(c.signal())->payload).value();
  }
  void drop(const std::string& name) {
    send(block_numbers::kDict, encode(SchemaMessage{gsn::kDropTableReq, 2, std::as_bytes(std::span(name))}));
    (void)inbox_.take([](const Captured& x) { return x.number() == gsn::kDropTableConf; });
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

  // The staller's signal: holds its thread until resume_ldm0().
  void hold() {
    holding_ = true;
    const uint64_t until = monotonic_ns() + kStallNsMax;
    while (stalled_ && monotonic_ns() < until) std::this_thread::sleep_for(kStallPoll);
    holding_ = false;
  }

  static constexpr BlockNumber kStaller = block_numbers::kFirstTest;
  static constexpr uint16_t kStall = runtime_signals::kFirstUser;
  static constexpr uint64_t kStallNsMax = 10'000'000'000;
  static constexpr std::chrono::milliseconds kStallPoll{1};

  std::unique_ptr<storage::PagePool> pool_;
  std::unique_ptr<Runtime> rt_;
  std::atomic<bool> stalled_{false};  // set and cleared by the test, read by the staller
  std::atomic<bool> holding_{false};  // the staller holds LDM 0's thread
  Inbox inbox_;
  LdmBlock* ldm_[2] = {};
  TcBlock* tc_ = nullptr;
};

struct TxResult {
  bool ok = false;
  ErrorCode error = ErrorCode::kNone;
  uint32_t error_op = UINT32_MAX;   // the TcKeyRef's operation
  std::vector<RowValues> rows;      // KeyData received for the batch
  bool ended_with_data = false;     // the batch's end came as a KeyDataConf or a KeyDataTrain
  uint32_t data_trains = 0;         // KeyDataTrain signals received
  std::vector<uint32_t> train_ops;  // op_index of each KeyDataTrain record, in order
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
  // A request as given (any flags and batch count).
  void send_raw(const TcKeyReq& r) { c_.send(block_numbers::kTc, encode(r)); }
  // One transaction of several operations in one execute (with commit).
  struct BatchOp {
    OpType op;
    LockMode lock;
    Values key;
    Values values;
    uint32_t index_id = 0;            // a read by this unique index
    const TableDef* table = nullptr;  // another table than the batch's
    std::vector<uint16_t> columns;    // a read's column list (empty: all)
  };
  // `train`: the batch goes as one TcKeyTrain (at most kMaxTrainOps).
  TxResult run_batch(const TableDef& t, const std::vector<BatchOp>& batch, bool train = false) {
    const uint32_t conn = ++next_conn_;
    std::vector<std::byte> records(frame::kMaxFrameBytes);
    std::size_t used = 0;
    for (uint32_t i = 0; i < batch.size(); ++i) {
      const bool last = i + 1 == batch.size();
      TcKeyReq r;
      r.api_conn = conn;
      r.tx = tx_id(1000 + conn);
      const TableDef& table = batch[i].table != nullptr ? *batch[i].table : t;
      r.table_id = table.table_id;
      r.table_version = table.version;
      r.columns = std::as_bytes(std::span(batch[i].columns));
      r.op = batch[i].op;
      r.lock = batch[i].lock;
      r.flags = (i == 0 ? kFlagStartTx : 0) | (last ? kFlagExecute | kFlagCommit : 0) |
                (batch[i].index_id != 0 ? kFlagViaUnique : 0);
      r.index_id = batch[i].index_id;
      r.op_index = i;
      r.batch_ops = last ? static_cast<uint32_t>(batch.size()) : 0;
      r.key = batch[i].key.bytes();
      r.values = batch[i].values.bytes();
      if (!train) {
        c_.send(block_numbers::kTc, encode(r));
        continue;
      }
      const std::size_t n = put_tc_key_train_record(std::span(records).subspan(used), r);
      EXPECT_NE(n, 0u) << "the train outgrew a frame";
      used += n;
    }
    if (train)
      c_.send(block_numbers::kTc, encode(TcKeyTrain{conn, tx_id(1000 + conn), static_cast<uint32_t>(batch.size()),
                                                    std::span(records).first(used)}));
    return wait(conn);
  }
  // A train whose records are given as bytes (to break them), for a new transaction.
  TxResult run_raw_train(uint32_t count, std::span<const std::byte> records) {
    const uint32_t conn = ++next_conn_;
    c_.send(block_numbers::kTc, encode(TcKeyTrain{conn, tx_id(1000 + conn), count, records}));
    return wait(conn);
  }
  TxId tx_of_next() const { return tx_id(1000 + next_conn_ + 1); }
  TxResult wait(uint32_t conn) {
    const Captured c = c_.inbox().take([&](const Captured& x) {
      if (x.number() == gsn::kTcKeyConf) return decode_tc_key_conf(x.signal())->api_conn == conn;
      if (x.number() == gsn::kTcKeyRef) return decode_tc_key_ref(x.signal())->api_conn == conn;
      if (x.number() == gsn::kKeyDataConf) return decode_key_data(x.signal())->api_conn == conn;
      if (x.number() == gsn::kKeyDataTrain) {
        const auto m = decode_key_data_train(x.signal());
        return m->api_conn == conn && m->ends_batch;
      }
      return false;
    });
    TxResult out;
    if (c.frame.empty()) return out;
    const auto is_data = [&](const Captured& x) {
      if (x.number() == gsn::kKeyData) return decode_key_data(x.signal())->api_conn == conn;
      if (x.number() == gsn::kKeyDataTrain) return decode_key_data_train(x.signal())->api_conn == conn;
      return false;
    };
    if (c.number() == gsn::kTcKeyRef) {
      out.error = decode_tc_key_ref(c.signal())->error;
      out.error_op = decode_tc_key_ref(c.signal())->op_index;
      c_.inbox().drain(is_data);
      return out;
    }
    // The batch's end: a TcKeyConf, or a KeyDataConf (its last read's values
    // and the TcKeyConf in one, from a read run directly in the LDM), or a
    // KeyDataTrain that ends the batch.
    uint32_t data_messages = 0;
    out.ok = true;
    if (c.number() == gsn::kKeyDataConf) {
      const KeyData end = decode_key_data(c.signal()).value();
      out.rows.push_back(decode_values(end.values));
      out.ended_with_data = true;
      data_messages = end.data_messages;
    } else if (c.number() == gsn::kKeyDataTrain) {
      const KeyDataTrain end = decode_key_data_train(c.signal()).value();
      take_train(end, out);
      out.ended_with_data = true;
      data_messages = end.data_messages;
    } else {
      data_messages = decode_tc_key_conf(c.signal()).value().data_messages;
    }
    while (out.rows.size() < data_messages) {
      const Captured d = c_.inbox().take(is_data);
      if (d.frame.empty()) break;
      if (d.number() == gsn::kKeyData)
        out.rows.push_back(decode_values(decode_key_data(d.signal())->values));
      else
        take_train(decode_key_data_train(d.signal()).value(), out);
    }
    EXPECT_EQ(out.rows.size(), data_messages);
    return out;
  }
  static void take_train(const KeyDataTrain& m, TxResult& out) {
    ++out.data_trains;
    KeyDataTrainCursor cursor(m.records);
    uint32_t op_index = 0;
    std::span<const std::byte> values;
    while (cursor.next(op_index, values)) {
      out.rows.push_back(decode_values(values));
      out.train_ops.push_back(op_index);
    }
  }
  void commit(TxId tx, uint32_t conn) {
    c_.send(block_numbers::kTc, encode(TcTxMessage{gsn::kTcCommitReq, conn, tx}));
    const Captured c = c_.inbox().take([&](const Captured& x) {
      return (x.number() == gsn::kTcKeyConf && decode_tc_key_conf(x.signal())->api_conn == conn) ||
             (x.number() == gsn::kTcKeyRef && decode_tc_key_ref(x.signal())->api_conn == conn);
    });
    EXPECT_EQ(c.number(), gsn::kTcKeyConf);
  }

  void rollback(TxId tx, uint32_t conn) {
    c_.send(block_numbers::kTc, encode(TcTxMessage{gsn::kTcRollbackReq, conn, tx}));
    const Captured c = c_.inbox().take([&](const Captured& x) {
      return x.number() == gsn::kTcRollbackConf && decode_tc_tx_message(x.signal())->api_conn == conn;
    });
    EXPECT_FALSE(c.frame.empty());
  }

  std::vector<RowValues> scan(const TableDef& t, uint32_t index_id, const std::vector<std::byte>& bounds,
                              uint32_t batch_rows) {
    const ScanReq r = start_scan(t, index_id, bounds, batch_rows);
    std::vector<RowValues> rows;
    for (;;) {
      ScanRound round = take_round(r);
      EXPECT_EQ(round.error, ErrorCode::kNone);
      rows.insert(rows.end(), round.rows.begin(), round.rows.end());
      if (round.error != ErrorCode::kNone || round.conf.finished) return rows;
      scan_message(gsn::kScanNextReq, r);
    }
  }
  // Sends a ScanReq (its answers are take_round's).
  ScanReq start_scan(const TableDef& t, uint32_t index_id, const std::vector<std::byte>& bounds, uint32_t batch_rows) {
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
    return r;
  }
  // ScanNextReq or ScanCloseReq for r's scan.
  void scan_message(uint16_t number, const ScanReq& r) {
    c_.send(block_numbers::kTc, encode(number, ScanNext{r.api_conn, r.scan_id}));
  }
  // The answer to a round of r's scan (ScanConf or ScanRef) and, after a
  // ScanConf, the rows of the ScanRows it counts.
  struct ScanRound {
    ErrorCode error = ErrorCode::kNone;  // from a ScanRef
    ScanConf conf;
    std::vector<RowValues> rows;
  };
  ScanRound take_round(const ScanReq& r) {
    ScanRound round;
    const Captured c = c_.inbox().take([&](const Captured& x) {
      return (x.number() == gsn::kScanConf && decode_scan_conf(x.signal())->scan_id == r.scan_id) ||
             (x.number() == gsn::kScanRef && decode_scan_ref(x.signal())->scan_id == r.scan_id);
    });
    if (c.frame.empty()) {  // none came (take failed the test)
      round.error = ErrorCode::kScanError;
      return round;
    }
    if (c.number() == gsn::kScanRef) {
      round.error = decode_scan_ref(c.signal())->error;
      return round;
    }
    round.conf = decode_scan_conf(c.signal()).value();
    for (uint32_t i = 0; i < round.conf.messages; ++i) {
      const Captured m = c_.inbox().take([&](const Captured& x) {
        return x.number() == gsn::kScanRows && decode_scan_rows(x.signal())->scan_id == r.scan_id;
      });
      append_scan_rows(decode_scan_rows(m.signal()).value(), round.rows);
    }
    EXPECT_EQ(round.rows.size(), round.conf.rows);
    return round;
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

// Whether `key`'s row is in LDM 0's partitions (the even ones, with two
// LDMs): where the tests expect direct reads and look-ahead hits.
bool in_ldm0(const TableDef& table, const Values& key) {
  std::array<std::byte, kMaxKeyBytes> encoded{};
  const uint32_t n = encode_key_section(KeyCodec::for_primary_key(table), key.bytes(), encoded).value();
  return partition_of(hash_key(encoded.data(), n), table.partitions) % 2 == 0;
}

// A table of an id and a nullable VARCHAR tag of `tag_bytes` with a unique
// index on the tag ("by_tag").
TableDef tagged_table(uint32_t tag_bytes) {
  TableDef wide;
  wide.name = "wide";
  wide.partitions = 8;
  wide.columns = {column("id", ColumnType::kUint64), column("tag", ColumnType::kVarChar, tag_bytes, true)};
  wide.primary_key = {0};
  wide.indexes = {IndexDef{"by_tag", IndexKind::kUnique, {1}, 0}};
  return wide;
}

uint32_t index_id_of(const TableDef& t, const std::string& name) {
  for (const IndexDef& index : t.indexes)
    if (index.name == name) return index.index_id;
  ADD_FAILURE() << "no index " << name;
  return 0;
}

// Two transactions deadlocked: TC's timeout aborted at least one of them,
// each with 266 (both when they timed out in the same check).
void expect_a_deadlock_victim(const TxResult& a, const TxResult& b) {
  EXPECT_TRUE(!a.ok || !b.ok) << "neither was aborted";
  for (const TxResult* r : {&a, &b})
    if (!r->ok) {
      EXPECT_EQ(r->error, ErrorCode::kDeadlockTimeout);
    }
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

// A close that comes while a round runs (the API gave the round up at its
// request timeout: the node was slow) is remembered: once the round's
// answers are in, TC closes the partitions still open and ends the scan,
// counting the round's rows and messages so that the API knows what is still
// on its way, and every record (TC's, the LDMs') is free again. Before, TC
// ignored such a close and the records stayed until the API disconnected:
// after MaxNoOfConcurrentScans of them no scan opened.
TEST(LdmWithTcTest, AScanClosedWhileItsRoundRunsEndsWhenTheRoundIsInAndFreesItsRecords) {
  constexpr uint32_t kMaxScans = 2;
  Cluster cluster(Layout::kSeparate, 1000, 32768, 0, kMaxScans);  // a quiet TC timer: see signals_on
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  for (uint64_t id = 0; id < 80; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, long_name(id), std::nullopt})).ok);
  for (uint32_t i = 0; i < 2 * kMaxScans + 1; ++i) {
    SCOPED_TRACE("scan " + std::to_string(i));
    const ScanReq r = api.start_scan(t, 0, {}, 1);
    const Api::ScanRound first = api.take_round(r);
    ASSERT_EQ(first.error, ErrorCode::kNone) << error_text(first.error);
    ASSERT_FALSE(first.conf.finished);
    // The next round waits at LDM 0 (the even partitions) while the close
    // reaches TC; LDM 1 answers its part meanwhile.
    cluster.stall_ldm0();
    api.scan_message(gsn::kScanNextReq, r);
    api.scan_message(gsn::kScanCloseReq, r);
    (void)cluster.signals_on("tc 0");  // quiet: TC has had both and LDM 1's answers
    cluster.resume_ldm0();
    const Api::ScanRound closed = api.take_round(r);
    ASSERT_EQ(closed.error, ErrorCode::kNone) << error_text(closed.error);
    EXPECT_TRUE(closed.conf.finished) << "the close was not remembered: TC answered the round";
    EXPECT_EQ(closed.conf.rows, 8u) << "one row from each partition in the round given up";
  }
  // The records came back: kMaxScans scans open at once, and read to the end.
  std::vector<ScanReq> open;
  for (uint32_t i = 0; i < kMaxScans; ++i) open.push_back(api.start_scan(t, 0, {}, 40));
  for (const ScanReq& r : open) {
    std::set<uint64_t> ids;
    for (Api::ScanRound round;; api.scan_message(gsn::kScanNextReq, r)) {
      round = api.take_round(r);
      ASSERT_EQ(round.error, ErrorCode::kNone) << error_text(round.error);
      for (const RowValues& row : round.rows) ids.insert(int_of<uint64_t>(row.at(kId)));
      if (round.conf.finished) break;
    }
    EXPECT_EQ(ids.size(), 80u);
  }
  (void)cluster.signals_on("ldm 0");
  EXPECT_EQ(cluster.ldm(0).stats().scans_open + cluster.ldm(1).stats().scans_open, 0u);
  EXPECT_EQ(cluster.inbox().size(), 0u) << "a signal nobody expected";
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
  expect_a_deadlock_victim(ra, rb);
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

// Where TC shares a thread with an LDM instance, read-committed reads of that
// instance's partitions run there directly (no LqhKeyReq/LqhKeyConf), and
// everything answers exactly as with every block on its own thread.
TEST(LdmWithTcTest, ReadCommittedRunsInACoLocatedLdmDirectlyWithTheSameAnswers) {
  std::vector<std::vector<TxResult>> answers;
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    Cluster cluster(layout, /*tc_timer_ms=*/600000);  // no timer signal during the test
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    // Which LDM instance owns each key (partition p lives on LDM p % 2).
    const KeyCodec pk = KeyCodec::for_primary_key(t);
    const auto ldm_of = [&](uint64_t id) {
      std::array<std::byte, kMaxKeyBytes> key{};
      const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
      return partition_of(hash_key(key.data(), n), t.partitions) % 2;
    };
    const LdmStats before[2] = {cluster.ldm(0).stats(), cluster.ldm(1).stats()};
    const uint64_t signals_before[2] = {cluster.signals_on("ldm 0"), cluster.signals_on("ldm 1")};
    uint64_t found[2] = {}, missing[2] = {};
    std::vector<TxResult> results;
    for (uint64_t id = 0; id < 50; ++id) {  // 40..49 do not exist
      results.push_back(api.run(t, OpType::kRead, item_key(id)));
      ++(id < 40 ? found : missing)[ldm_of(id)];
      // A read run directly ends its transaction itself: its values and the
      // TcKeyConf in one KeyDataConf.
      EXPECT_EQ(results.back().ended_with_data, layout == Layout::kTcWithLdm0 && ldm_of(id) == 0 && id < 40)
          << "id " << id;
    }
    ASSERT_GT(found[0] * found[1] * missing[0] * missing[1], 0u) << "keys on both instances, found and not";
    for (uint32_t i = 0; i < 2; ++i) {
      const LdmStats now = cluster.ldm(static_cast<uint16_t>(i)).stats();
      EXPECT_EQ(now.reads - before[i].reads, found[i]) << "LDM " << i;
      EXPECT_EQ(now.refused - before[i].refused, missing[i]) << "LDM " << i;
      EXPECT_EQ(now.key_operations - before[i].key_operations, found[i] + missing[i]) << "LDM " << i;
    }
    // LDM 1's thread ran one LqhKeyReq per read of its keys, and for a row
    // that is missing also TC's LqhAbortReq. LDM 0's thread ran the same for
    // its keys, or, with TC there, every TcKeyReq and LDM 1's answers
    // (LqhKeyConf, or LqhKeyRef and LqhAbortConf), and nothing more for its
    // own keys: they ran inside their TcKeyReq and left nothing to abort.
    const uint64_t signalled[2] = {found[0] + 2 * missing[0], found[1] + 2 * missing[1]};
    EXPECT_EQ(cluster.signals_on("ldm 1") - signals_before[1], signalled[1]);
    EXPECT_EQ(cluster.signals_on("ldm 0") - signals_before[0],
              layout == Layout::kSeparate ? signalled[0] : 50 + signalled[1]);
    answers.push_back(std::move(results));
  }
  ASSERT_EQ(answers[0].size(), answers[1].size());
  for (std::size_t i = 0; i < answers[0].size(); ++i) {
    EXPECT_EQ(answers[0][i].ok, answers[1][i].ok) << "id " << i;
    EXPECT_EQ(answers[0][i].error, answers[1][i].error) << "id " << i;
    EXPECT_EQ(answers[1][i].ok ? answers[1][i].rows.size() : 0u, i < 40 ? 1u : 0u) << "id " << i;
    if (answers[0][i].ok && answers[1][i].ok) {
      EXPECT_EQ(item_of(answers[0][i].rows.at(0)), item_of(answers[1][i].rows.at(0))) << "id " << i;
    }
  }
  EXPECT_EQ(answers[1][45].error, ErrorCode::kNoSuchRow);
}

// A transaction of one read-committed read, run directly, keeps no
// transaction record in TC: it answers as one that does (the row in a
// KeyDataConf, or a TcKeyRef naming the read and its error), counts as
// committed or aborted, and is refused as key_req refuses: a transaction id
// in use is a bad request, and the transaction using it goes on.
TEST(LdmWithTcTest, AOneReadTransactionRunDirectlyAnswersAsAnyOther) {
  Cluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const KeyCodec pk = KeyCodec::for_primary_key(t);
  const auto on_ldm0 = [&](uint64_t id) {
    std::array<std::byte, kMaxKeyBytes> key{};
    const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
    return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
  };
  std::vector<uint64_t> here;  // ids whose rows are LDM 0's
  for (uint64_t id = 0; id < 200 && here.size() < 12; ++id)
    if (on_ldm0(id)) here.push_back(id);
  ASSERT_EQ(here.size(), 12u);
  for (std::size_t i = 0; i < 8; ++i)
    ASSERT_TRUE(
        api.run(t, OpType::kInsert, item_key(here[i]), item_values(here[i], Item{int32_t(here[i]), "n", std::nullopt}))
            .ok);
  const TcStats before = cluster.tc().stats();
  for (std::size_t i = 0; i < 12; ++i) {  // the last four do not exist
    const TxResult r = api.run(t, OpType::kRead, item_key(here[i]));
    if (i < 8) {
      ASSERT_TRUE(r.ok) << "id " << here[i];
      EXPECT_TRUE(r.ended_with_data);
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_EQ(item_of(r.rows[0]).qty, static_cast<int32_t>(here[i]));
    } else {
      EXPECT_FALSE(r.ok);
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow) << "id " << here[i];
    }
  }
  const TcStats after = cluster.tc().stats();
  EXPECT_EQ(after.transactions_committed - before.transactions_committed, 8u);
  EXPECT_EQ(after.transactions_aborted - before.transactions_aborted, 4u);
  EXPECT_EQ(after.operations - before.operations, 12u);

  // A transaction holds an update of here[0], not yet committed; a
  // one-read transaction under its id is refused, and the update commits.
  const TxId open = api.tx_of_next();
  const uint32_t open_conn =
      api.send(t, OpType::kUpdate, item_key(here[0]), Values().i32(kQty, 500), /*commit=*/false, std::nullopt);
  ASSERT_TRUE(api.wait(open_conn).ok);
  const TxResult clash = api.run(t, OpType::kRead, item_key(here[1]), {}, true, open);
  EXPECT_FALSE(clash.ok);
  EXPECT_EQ(clash.error, ErrorCode::kBadRequest);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(here[0])).rows.at(0)).qty, static_cast<int32_t>(here[0]))
      << "a committed read sees the row as it was";
  api.commit(open, open_conn);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(here[0])).rows.at(0)).qty, 500);
}

// A read by unique key whose hidden row lies in an LDM of TC's own thread
// looks that row up directly (no LqhKeyReq and LqhKeyConf), and, when the
// base row is there too, ends its transaction with its values (one
// KeyDataConf): with the same answers as every block on its own thread.
TEST(LdmWithTcTest, AUniqueKeyLookupInACoLocatedLdmRunsDirectlyWithTheSameAnswers) {
  std::vector<std::vector<TxResult>> answers;
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    Cluster cluster(layout, /*tc_timer_ms=*/600000);
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    const uint32_t by_code = index_id_of(t, "by_code");
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id),
                          item_values(id, Item{int32_t(id), long_name(id), uint32_t(1000 + id)}))
                      .ok);
    const LdmStats before[2] = {cluster.ldm(0).stats(), cluster.ldm(1).stats()};
    std::vector<TxResult> results;
    uint32_t direct_ends = 0;
    for (uint32_t code = 1000; code < 1050; ++code) {  // 1040..1049 are nobody's
      results.push_back(api.run(t, OpType::kRead, Values().u32(kCode, code), {}, true, std::nullopt, by_code));
      if (results.back().ended_with_data) {
        ++direct_ends;
        EXPECT_TRUE(results.back().ok) << "code " << code;
      }
    }
    // Both lookups and base reads count as key operations; 40 hidden rows
    // and 40 base rows found, 10 hidden rows missing, wherever they ran.
    uint64_t reads = 0, refused = 0;
    for (uint32_t i = 0; i < 2; ++i) {
      const LdmStats now = cluster.ldm(static_cast<uint16_t>(i)).stats();
      reads += now.reads - before[i].reads;
      refused += now.refused - before[i].refused;
    }
    EXPECT_EQ(reads, 80u);
    EXPECT_EQ(refused, 10u);
    if (layout == Layout::kSeparate) {
      EXPECT_EQ(direct_ends, 0u);
    } else {
      // About a quarter of the codes have both rows in LDM 0's partitions.
      EXPECT_GT(direct_ends, 0u) << "no lookup ran directly";
    }
    answers.push_back(std::move(results));
    // The same 20 codes in one train: every row, each its own; with TC
    // beside LDM 0, those whose lookup and base row are both there answer
    // in the train's KeyDataTrain, as many as ended their own transaction
    // above.
    std::vector<Api::BatchOp> by_code_reads;
    for (uint32_t code = 1000; code < 1020; ++code)
      by_code_reads.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
    const LdmStats train_before = cluster.ldm(0).stats();
    const TxResult train = api.run_batch(t, by_code_reads, /*train=*/true);
    ASSERT_TRUE(train.ok) << error_text(train.error);
    ASSERT_EQ(train.rows.size(), 20u);
    std::set<uint64_t> ids;
    for (const RowValues& row : train.rows) ids.insert(int_of<uint64_t>(row.at(kId)));
    EXPECT_EQ(ids.size(), 20u);
    EXPECT_EQ(*ids.rbegin(), 19u);
    uint32_t ended_alone = 0;
    for (uint32_t i = 0; i < 20; ++i) ended_alone += answers.back()[i].ended_with_data ? 1 : 0;
    EXPECT_EQ(train.train_ops.size(), ended_alone);
    if (layout == Layout::kTcWithLdm0) {
      // The train looks its hidden rows in LDM 0 up ahead, and then the
      // base rows of those: each found among the rows its look-ahead listed.
      // A base row in LDM 0 whose hidden row is LDM 1's is searched for.
      const IndexDef& index =
          *std::find_if(t.indexes.begin(), t.indexes.end(), [&](const IndexDef& x) { return x.index_id == by_code; });
      const TableDef hidden = hidden_unique_table(t, index);
      uint64_t hidden_here = 0, both_here = 0, base_only_here = 0;
      for (uint32_t code = 1000; code < 1020; ++code) {
        const bool h = in_ldm0(hidden, Values().u32(0, code));
        const bool b = in_ldm0(t, item_key(code - 1000));
        hidden_here += h ? 1 : 0;
        both_here += h && b ? 1 : 0;
        base_only_here += !h && b ? 1 : 0;
      }
      EXPECT_EQ(both_here, ended_alone);
      const LdmStats after = cluster.ldm(0).stats();
      EXPECT_EQ(after.lookahead_hits - train_before.lookahead_hits, hidden_here + both_here);
      EXPECT_EQ(after.index_searches - train_before.index_searches, base_only_here);
    }

    // A missing unique value in the middle of a train aborts it at its
    // turn, wherever its hidden row would be: the train's update before it
    // does not happen, and the lookups after it answer nothing.
    for (uint32_t missing = 1040; missing < 1050; ++missing) {
      std::vector<Api::BatchOp> ops;
      for (uint32_t code = 1000; code < 1006; ++code)
        ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
      ops.push_back({OpType::kUpdate, LockMode::kExclusive, item_key(2), Values().i32(kQty, 22)});
      ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, missing), {}, by_code});
      for (uint32_t code = 1006; code < 1012; ++code)
        ops.push_back({OpType::kRead, LockMode::kCommitted, Values().u32(kCode, code), {}, by_code});
      const TxResult failed = api.run_batch(t, ops, /*train=*/true);
      EXPECT_FALSE(failed.ok) << "code " << missing;
      EXPECT_EQ(failed.error, ErrorCode::kNoSuchRow) << "code " << missing;
    }
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(2)).rows.at(0)).qty, 2);
  }
  for (std::size_t i = 0; i < answers[0].size(); ++i) {
    SCOPED_TRACE("code " + std::to_string(1000 + i));
    EXPECT_EQ(answers[0][i].ok, i < 40);
    EXPECT_EQ(answers[1][i].ok, i < 40);
    EXPECT_EQ(answers[0][i].error, answers[1][i].error);
    if (i < 40) {
      ASSERT_EQ(answers[1][i].rows.size(), 1u);
      EXPECT_EQ(item_of(answers[0][i].rows.at(0)), item_of(answers[1][i].rows.at(0)));
      EXPECT_EQ(int_of<uint64_t>(answers[1][i].rows.at(0).at(kId)), i);
    } else {
      EXPECT_EQ(answers[1][i].error, ErrorCode::kNoSuchRow);
    }
  }
}

// A train's reads by a unique key whose hidden rows are too wide for the
// look-ahead's room (a 300-byte VARCHAR key: over 256 bytes) are not looked
// up ahead: they take the path of a lone read by unique key, with the same
// answers, a missing value aborting the train.
TEST(LdmWithTcTest, WideUniqueKeysInATrainAreLookedUpAtTheirTurn) {
  Cluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(tagged_table(300));
  const uint32_t by_tag = index_id_of(t, "by_tag");
  const auto tag = [](uint64_t id) { return std::string(290, 'x') + std::to_string(id); };
  for (uint64_t id = 0; id < 24; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, tag(id))).ok);
  const LdmStats before = cluster.ldm(0).stats();
  std::vector<Api::BatchOp> reads;
  for (uint64_t id = 0; id < 24; ++id)
    reads.push_back({OpType::kRead, LockMode::kCommitted, Values().str(1, tag(id)), {}, by_tag});
  const TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 24u);
  std::set<uint64_t> ids;
  for (const RowValues& row : r.rows) {
    const uint64_t id = int_of<uint64_t>(row.at(0));
    EXPECT_EQ(str_of(row.at(1)), tag(id));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 24u);
  // Stages 0-1 still listed each hidden key's candidates, but no lookup ran
  // ahead, so no base key was: every base row in LDM 0 was searched for.
  const TableDef hidden = hidden_unique_table(t, t.indexes.at(0));
  uint64_t hidden_here = 0, base_here = 0;
  for (uint64_t id = 0; id < 24; ++id) {
    hidden_here += in_ldm0(hidden, Values().str(0, tag(id))) ? 1 : 0;
    base_here += in_ldm0(t, Values().u64(0, id)) ? 1 : 0;
  }
  const LdmStats after = cluster.ldm(0).stats();
  EXPECT_EQ(after.lookahead_hits - before.lookahead_hits, hidden_here);
  EXPECT_EQ(after.index_searches - before.index_searches, base_here);
  reads.insert(reads.begin() + 5, {OpType::kRead, LockMode::kCommitted, Values().str(1, tag(99)), {}, by_tag});
  const TxResult missing = api.run_batch(t, reads, /*train=*/true);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.error, ErrorCode::kNoSuchRow);
}

// TC's prefetch of a read by unique key builds its hidden key in a 2 KB
// room: a key section longer than that (here the unique column given
// twice, the second time 2,100 bytes long) gets no hint, and the read is
// refused as the column given twice, as it is without the prefetch; a
// hint from the part that fitted would have found the first value's row.
TEST(LdmWithTcTest, AUniqueKeyTooLongForThePrefetchIsJudgedWhole) {
  Cluster cluster(Layout::kTcWithLdm0, /*tc_timer_ms=*/600000);
  Api api(cluster);
  const TableDef t = cluster.create(tagged_table(500));
  const uint32_t by_tag = index_id_of(t, "by_tag");
  for (uint64_t id = 0; id < 8; ++id)
    ASSERT_TRUE(
        api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, "t" + std::to_string(id))).ok);
  for (uint64_t id = 0; id < 8; ++id) {
    SCOPED_TRACE("id " + std::to_string(id));
    const TxResult found =
        api.run(t, OpType::kRead, Values().str(1, "t" + std::to_string(id)), {}, true, std::nullopt, by_tag);
    ASSERT_TRUE(found.ok) << error_text(found.error);
    const TxResult twice =
        api.run(t, OpType::kRead, Values().str(1, "t" + std::to_string(id)).str(1, std::string(2100, 'y')), {}, true,
                std::nullopt, by_tag);
    EXPECT_FALSE(twice.ok);
    EXPECT_EQ(twice.error, ErrorCode::kBadRequest);
  }
}

// A train's direct reads take the LDM's read plan for their table and
// column list, made once per train and LDM: a train mixing two tables and
// three column lists, record by record, answers each read from its own
// table with its own columns, in both layouts; a record whose table
// version is stale aborts the batch as it does alone, and so does one of a
// table dropped since an earlier train read it.
TEST(LdmWithTcTest, ATrainMixingTablesAndColumnListsAnswersEachReadAsAlone) {
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    Cluster cluster(layout, /*tc_timer_ms=*/600000);
    Api api(cluster);
    const TableDef items = cluster.create(plain_items());
    TableDef other_def;
    other_def.name = "other";
    other_def.partitions = 4;
    other_def.columns = {column("k", ColumnType::kUint64), column("a", ColumnType::kUint32),
                         column("b", ColumnType::kUint64)};
    other_def.primary_key = {0};
    const TableDef other = cluster.create(other_def);
    for (uint64_t id = 0; id < 120; ++id) {
      ASSERT_TRUE(api.run(items, OpType::kInsert, item_key(id),
                          item_values(id, Item{int32_t(id), long_name(id), uint32_t(500 + id)}))
                      .ok);
      ASSERT_TRUE(
          api.run(other, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).u32(1, 7000 + id).u64(2, 9 * id))
              .ok);
    }
    // Kind id % 4: 0 items (every column), 1 other (every column), 2 other
    // (b), 3 other (a, k). The reads in LDM 0 go through the kinds in
    // turn: other with every column follows items with every column (the
    // table tells their plans apart), then other with b follows it, and
    // with a and k follows that (the column list does). Then a few in
    // LDM 1.
    const auto read_of = [&](uint64_t id) {
      if (id % 4 == 0) return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}};
      static const std::vector<uint16_t> lists[] = {{}, {}, {2}, {1, 0}};
      return Api::BatchOp{OpType::kRead, LockMode::kCommitted, Values().u64(0, id), {}, 0, &other, lists[id % 4]};
    };
    const auto here = [&](const Api::BatchOp& op) { return in_ldm0(op.table != nullptr ? *op.table : items, op.key); };
    std::vector<uint64_t> kinds[4], elsewhere;
    for (uint64_t id = 1; id < 120; ++id) (here(read_of(id)) ? kinds[id % 4] : elsewhere).push_back(id);
    std::vector<Api::BatchOp> reads = {read_of(0)};  // starts the transaction: key_req's way
    for (std::size_t j = 0; j < 6; ++j)
      for (const std::vector<uint64_t>& kind : kinds) reads.push_back(read_of(kind.at(j)));
    for (std::size_t j = 0; j < 5; ++j) reads.push_back(read_of(elsewhere.at(j)));
    const TxResult r = api.run_batch(items, reads, /*train=*/true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), reads.size());
    // KeyData of the separate layout come in any order: each row says
    // which read it answers by its columns and values.
    std::set<uint64_t> answered;
    for (const RowValues& row : r.rows) {
      if (row.size() == 1) {  // other, column b only
        const uint64_t b = int_of<uint64_t>(row.at(2));
        EXPECT_EQ(b % 9, 0u);
        EXPECT_EQ(b / 9 % 4, 2u);
        answered.insert(b / 9);
      } else if (row.size() == 2) {  // other, columns a and k
        const uint64_t id = int_of<uint64_t>(row.at(0));
        EXPECT_EQ(int_of<uint32_t>(row.at(1)), 7000 + id);
        EXPECT_EQ(id % 4, 3u);
        answered.insert(id);
      } else if (row.size() == 3) {  // other, every column
        const uint64_t id = int_of<uint64_t>(row.at(0));
        EXPECT_EQ(int_of<uint32_t>(row.at(1)), 7000 + id);
        EXPECT_EQ(int_of<uint64_t>(row.at(2)), 9 * id);
        EXPECT_EQ(id % 4, 1u);
        answered.insert(id);
      } else {  // items, every column
        const uint64_t id = int_of<uint64_t>(row.at(kId));
        EXPECT_EQ(item_of(row).qty, int32_t(id));
        EXPECT_EQ(int_of<uint32_t>(row.at(kCode)), 500 + id);
        EXPECT_EQ(id % 4, 0u);
        answered.insert(id);
      }
    }
    EXPECT_EQ(answered.size(), reads.size());
    if (layout == Layout::kTcWithLdm0) {
      // Every read whose row is in LDM 0 ran directly, into the train.
      const auto direct = static_cast<std::size_t>(std::count_if(reads.begin(), reads.end(), here));
      EXPECT_GE(direct, 24u);
      EXPECT_EQ(r.train_ops.size(), direct);
    }
    TableDef stale = other;
    stale.version += 1;
    reads[10].table = &stale;
    const TxResult refused = api.run_batch(items, reads, /*train=*/true);
    EXPECT_FALSE(refused.ok);
    EXPECT_EQ(refused.error, ErrorCode::kSchemaVersion);
    // A plan is the train's own: after a drop, the same reads of the table
    // find it gone.
    reads[10].table = &other;
    cluster.drop("other");
    const TxResult gone = api.run_batch(items, reads, /*train=*/true);
    EXPECT_FALSE(gone.ok);
    EXPECT_EQ(gone.error, ErrorCode::kNoSuchTable);
  }
}

// A read-committed read that runs directly sees what one sent as a signal
// sees: the last committed version, not its own transaction's pending
// change; when it fails, the whole transaction (its writes too) aborts; and
// many queued at once are routed right.
TEST(LdmWithTcTest, DirectReadsSeeCommittedRowsAndTheirFailureAbortsTheBatch) {
  Cluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  for (uint64_t id = 0; id < 16; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", std::nullopt})).ok);
  for (uint64_t id = 0; id < 16; ++id) {
    SCOPED_TRACE("id " + std::to_string(id));
    // Update, then read committed in the same batch: the old value.
    TxResult r = api.run_batch(t, {{OpType::kUpdate, LockMode::kExclusive, item_key(id), Values().i32(kQty, 2)},
                                   {OpType::kRead, LockMode::kCommitted, item_key(id), {}}});
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(item_of(r.rows[0]).qty, 1);
    // Committed now.
    r = api.run(t, OpType::kRead, item_key(id));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(item_of(r.rows.at(0)).qty, 2);
    // A read of a missing row aborts the batch: the update does not happen.
    r = api.run_batch(t, {{OpType::kUpdate, LockMode::kExclusive, item_key(id), Values().i32(kQty, 3)},
                          {OpType::kRead, LockMode::kCommitted, item_key(1000 + id), {}},
                          {OpType::kRead, LockMode::kCommitted, item_key(id), {}}});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    r = api.run(t, OpType::kRead, item_key(id));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(item_of(r.rows.at(0)).qty, 2);
  }
  // A batch of direct reads ends with its last read's KeyDataConf, counting
  // them all; one that must still commit a write ends with a TcKeyConf; with
  // a read of LDM 1 among them it depends on whether LDM 1 answered before
  // the last read ran, and every row arrives either way.
  const KeyCodec pk = KeyCodec::for_primary_key(t);
  const auto on_ldm0 = [&](uint64_t id) {
    std::array<std::byte, kMaxKeyBytes> key{};
    const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
    return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
  };
  std::vector<uint64_t> here, there;
  for (uint64_t id = 0; id < 16; ++id) (on_ldm0(id) ? here : there).push_back(id);
  ASSERT_GE(here.size(), 2u);
  ASSERT_GE(there.size(), 1u);
  const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };
  TxResult b = api.run_batch(t, {read(here[0]), read(there[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 3u);
  b = api.run_batch(t, {read(there[0]), read(here[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 3u);
  b = api.run_batch(t, {read(here[0]), read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.rows.size(), 2u);
  EXPECT_TRUE(b.ended_with_data);
  b = api.run_batch(t,
                    {{OpType::kUpdate, LockMode::kExclusive, item_key(here[0]), Values().i32(kQty, 4)}, read(here[1])});
  ASSERT_TRUE(b.ok);
  EXPECT_FALSE(b.ended_with_data) << "the update still had to commit";
  // Reads sent all at once queue together, so TC prefetches them in windows
  // and routes them by the notes its prefetch left, and the LDM finds them
  // by the keys that prefetch encoded: every one still finds its own row (or
  // none). Keys that cannot be encoded (a width that is not the column's)
  // are mixed in, so some of a window's prefetches leave no note.
  std::vector<std::pair<uint32_t, uint64_t>> sent;
  constexpr uint64_t kBadKey = UINT64_MAX;
  for (uint64_t round = 0; round < 8; ++round) {
    for (uint64_t id = 0; id < 20; ++id) {
      sent.emplace_back(api.send(t, OpType::kRead, item_key(id), {}, true, std::nullopt), id);
      if ((id + round) % 7 == 0)
        sent.emplace_back(api.send(t, OpType::kRead, Values().u32(kId, 1), {}, true, std::nullopt), kBadKey);
    }
  }
  for (const auto& [conn, id] : sent) {
    const TxResult r = api.wait(conn);
    if (id == kBadKey) {
      EXPECT_EQ(r.error, ErrorCode::kBadRequest);
      continue;
    }
    if (id >= 16) {
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow) << "id " << id;
      continue;
    }
    ASSERT_TRUE(r.ok) << "id " << id << ": " << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(int_of<uint64_t>(r.rows[0].at(kId)), id);
  }
}

// The reads in the middle of a train that share a table and a column list
// run in TC's LDM as one run of a read plan. A run longer than the reply
// train has room for sends the reply when full and goes on; a run stops at
// the read that fails: the reads before it ran, the ones after it do not,
// and the transaction aborts with that read's error.
TEST(LdmWithTcTest, ARunOfPlannedReadsFillsReplyAfterReplyAndStopsAtTheReadThatFails) {
  Cluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  // 6,000-byte tags: a reply train holds five reads' records.
  TableDef wide;
  wide.name = "wide";
  wide.partitions = 8;
  wide.columns = {column("id", ColumnType::kUint64), column("tag", ColumnType::kVarChar, 6000)};
  wide.primary_key = {0};
  const TableDef t = cluster.create(wide);
  const auto tag = [](uint64_t id) { return std::string(5990, 't') + std::to_string(id); };
  std::vector<uint64_t> here, missing;
  for (uint64_t id = 0; here.size() < 24; ++id) {
    ASSERT_TRUE(api.run(t, OpType::kInsert, Values().u64(0, id), Values().u64(0, id).str(1, tag(id))).ok);
    if (in_ldm0(t, Values().u64(0, id))) here.push_back(id);
  }
  for (uint64_t id = 100000; missing.empty(); ++id)
    if (in_ldm0(t, Values().u64(0, id))) missing.push_back(id);
  const auto read = [](uint64_t id) {
    return Api::BatchOp{OpType::kRead, LockMode::kCommitted, Values().u64(0, id), {}};
  };

  std::vector<Api::BatchOp> reads;
  for (const uint64_t id : here) reads.push_back(read(id));
  LdmStats before = cluster.ldm(0).stats();
  TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), here.size());
  std::set<uint64_t> ids;
  for (const RowValues& row : r.rows) {
    const uint64_t id = int_of<uint64_t>(row.at(0));
    ids.insert(id);
    EXPECT_EQ(str_of(row.at(1)), tag(id));
  }
  EXPECT_EQ(ids, std::set<uint64_t>(here.begin(), here.end()));
  EXPECT_GE(r.data_trains, 5u) << "24 reads of 6 KB rows do not fit in fewer KeyDataTrains";
  // Each record once (the harness takes the train that ends the batch first).
  std::vector<uint32_t> ops = r.train_ops;
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(std::adjacent_find(ops.begin(), ops.end()), ops.end());
  EXPECT_EQ(ops.size(), here.size());
  LdmStats after = cluster.ldm(0).stats();
  EXPECT_EQ(after.reads - before.reads, here.size());

  // The 8th read of the train (the 7th of its run) finds no row.
  reads.clear();
  for (std::size_t i = 0; i < 16; ++i) reads.push_back(read(i == 7 ? missing[0] : here[i]));
  before = cluster.ldm(0).stats();
  r = api.run_batch(t, reads, true);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
  after = cluster.ldm(0).stats();
  EXPECT_EQ(after.reads - before.reads, 7u) << "the first record and the six planned reads before the failing one";
  EXPECT_EQ(after.refused - before.refused, 1u);
  EXPECT_EQ(after.key_operations - before.key_operations, 8u) << "nothing after the failing read ran";
  // The transaction is gone and nothing of it stays: the rows read as before.
  r = api.run(t, OpType::kRead, Values().u64(0, here[8]));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(str_of(r.rows.at(0).at(1)), tag(here[8]));
}

// A TcKeyTrain runs as its requests would one by one, in either layout:
// the same rows, the same errors, the same aborts. With TC beside LDM 0 the
// reads it runs there answer in one KeyDataTrain per train (in order), and
// a train of reads all on LDM 0 ends its batch with that KeyDataTrain.
TEST(LdmWithTcTest, TrainsRunAsTheirRequestsWouldAloneInBothLayouts) {
  for (const Layout layout : {Layout::kSeparate, Layout::kTcWithLdm0}) {
    SCOPED_TRACE(layout == Layout::kSeparate ? "separate threads" : "TC with LDM 0");
    Cluster cluster(layout);
    Api api(cluster);
    const TableDef t = cluster.create(plain_items());
    for (uint64_t id = 0; id < 40; ++id)
      ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };
    const KeyCodec pk = KeyCodec::for_primary_key(t);
    const auto on_ldm0 = [&](uint64_t id) {
      std::array<std::byte, kMaxKeyBytes> key{};
      const uint32_t n = encode_key_section(pk, item_key(id).bytes(), key).value();
      return partition_of(hash_key(key.data(), n), t.partitions) % 2 == 0;
    };

    // The longest train: 32 reads, each row its own.
    std::vector<Api::BatchOp> reads;
    for (uint64_t id = 0; id < kMaxTrainOps; ++id) reads.push_back(read(id));
    TxResult r = api.run_batch(t, reads, /*train=*/true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), kMaxTrainOps);
    std::set<uint64_t> ids;
    for (const RowValues& row : r.rows) {
      const uint64_t id = int_of<uint64_t>(row.at(kId));
      ids.insert(id);
      EXPECT_EQ(item_of(row).qty, static_cast<int32_t>(id));
    }
    EXPECT_EQ(ids.size(), kMaxTrainOps);
    if (layout == Layout::kTcWithLdm0) {
      EXPECT_EQ(r.data_trains, 1u) << "the direct reads answered in one KeyDataTrain";
      EXPECT_TRUE(std::is_sorted(r.train_ops.begin(), r.train_ops.end()));
      uint32_t here = 0;
      for (uint64_t id = 0; id < kMaxTrainOps; ++id) here += on_ldm0(id) ? 1 : 0;
      EXPECT_EQ(r.train_ops.size(), here);
    } else {
      EXPECT_EQ(r.data_trains, 0u) << "no read runs on TC's thread";
    }
    std::vector<Api::BatchOp> local;
    for (uint64_t id = 0; id < 40 && local.size() < 5; ++id)
      if (on_ldm0(id)) local.push_back(read(id));
    r = api.run_batch(t, local, true);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.rows.size(), local.size());
    EXPECT_EQ(r.ended_with_data, layout == Layout::kTcWithLdm0);

    // Writes and reads mixed: a committed read sees the row as committed,
    // not the train's own update; the update commits with the train.
    r = api.run_batch(
        t,
        {{OpType::kUpdate, LockMode::kExclusive, item_key(5), Values().i32(kQty, 55)},
         read(5),
         {OpType::kInsert, LockMode::kExclusive, item_key(100), item_values(100, Item{100, "new", std::nullopt})},
         {OpType::kRead, LockMode::kShared, item_key(100), {}}},
        true);
    ASSERT_TRUE(r.ok) << error_text(r.error);
    ASSERT_EQ(r.rows.size(), 2u);
    std::map<uint64_t, int32_t> qty;
    for (const RowValues& row : r.rows) qty[int_of<uint64_t>(row.at(kId))] = item_of(row).qty;
    EXPECT_EQ(qty[5], 5);
    EXPECT_EQ(qty[100], 100);
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(5)).rows.at(0)).qty, 55);

    // Enough rows that some hash buckets overflow (about one key in ten
    // sits in an overflow block): a train's direct read whose bucket does
    // not list it is looked for in the overflow block a few records ahead
    // (stage 2), so it too finds its row among the candidates instead of
    // searching the index. Every row found, each its own; inserted by
    // trains too.
    constexpr uint64_t kMany = 3000;
    for (uint64_t first = 1000; first < 1000 + kMany; first += kMaxTrainOps) {
      std::vector<Api::BatchOp> inserts;
      for (uint64_t id = first; id < std::min<uint64_t>(first + kMaxTrainOps, 1000 + kMany); ++id)
        inserts.push_back({OpType::kInsert, LockMode::kExclusive, item_key(id),
                           item_values(id, Item{int32_t(id), "m", std::nullopt})});
      ASSERT_TRUE(api.run_batch(t, inserts, true).ok);
    }
    uint64_t found = 0;
    const LdmStats before = cluster.ldm(0).stats();
    for (uint64_t first = 1000; first < 1000 + kMany; first += kMaxTrainOps) {
      std::vector<Api::BatchOp> batch;
      for (uint64_t id = first; id < std::min<uint64_t>(first + kMaxTrainOps, 1000 + kMany); ++id)
        batch.push_back(read(id));
      const TxResult many = api.run_batch(t, batch, true);
      ASSERT_TRUE(many.ok) << error_text(many.error);
      ASSERT_EQ(many.rows.size(), batch.size());
      for (const RowValues& row : many.rows) {
        const uint64_t id = int_of<uint64_t>(row.at(kId));
        EXPECT_GE(id, first);
        EXPECT_EQ(item_of(row).qty, static_cast<int32_t>(id));
        ++found;
      }
    }
    EXPECT_EQ(found, kMany);
    if (layout == Layout::kTcWithLdm0) {
      const LdmStats after = cluster.ldm(0).stats();
      const uint64_t hits = after.lookahead_hits - before.lookahead_hits;
      const uint64_t searches = after.index_searches - before.index_searches;
      EXPECT_EQ(hits + searches, after.reads - before.reads) << "every read looked its key up once";
      EXPECT_GT(hits, kMany / 3) << "about half the rows are LDM 0's";
      // Only a key two overflow blocks down its chain is searched for.
      EXPECT_LE(searches, hits / 100) << hits << " found among candidates, " << searches << " searched";
    }

    // A read of a missing row in the middle aborts the train's transaction:
    // its update does not happen.
    r = api.run_batch(
        t,
        {read(1), {OpType::kUpdate, LockMode::kExclusive, item_key(2), Values().i32(kQty, 22)}, read(100000), read(3)},
        true);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(2)).rows.at(0)).qty, 2);
  }
}

// A train that is a whole transaction of committed reads for LDM 0 (what
// a batched pk read sends) runs without a transaction record. It answers,
// counts and fails exactly as the record-by-record path: a missing row
// first, in the middle or last is reported with its operation, nothing after
// it runs, and the transaction is gone (its id starts a new one).
TEST(LdmWithTcTest, AWholeTrainOfReadsAnswersAndFailsAsRecordByRecord) {
  Cluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  std::vector<uint64_t> local;
  for (uint64_t id = 0; local.size() < 8; ++id) {
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{int32_t(id), "n", std::nullopt})).ok);
    if (in_ldm0(t, item_key(id))) local.push_back(id);
  }
  uint64_t missing = 100000;
  while (!in_ldm0(t, item_key(missing))) ++missing;
  const auto read = [&](uint64_t id) { return Api::BatchOp{OpType::kRead, LockMode::kCommitted, item_key(id), {}}; };

  std::vector<Api::BatchOp> reads;
  for (const uint64_t id : local) reads.push_back(read(id));
  LdmStats ldm_before = cluster.ldm(0).stats();
  TcStats tc_before = cluster.tc().stats();
  TxResult r = api.run_batch(t, reads, /*train=*/true);
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), local.size());
  for (std::size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(int_of<uint64_t>(r.rows[i].at(kId)), local[i]);
    EXPECT_EQ(item_of(r.rows[i]).qty, static_cast<int32_t>(local[i]));
  }
  EXPECT_EQ(r.data_trains, 1u);
  EXPECT_TRUE(r.ended_with_data);
  EXPECT_EQ(cluster.ldm(0).stats().reads - ldm_before.reads, local.size());
  EXPECT_EQ(cluster.tc().stats().transactions_committed - tc_before.transactions_committed, 1u);
  EXPECT_EQ(cluster.tc().stats().operations - tc_before.operations, local.size());

  for (const uint32_t at : {0u, 3u, 7u}) {
    SCOPED_TRACE(at);
    reads[at] = read(missing);
    ldm_before = cluster.ldm(0).stats();
    tc_before = cluster.tc().stats();
    const TxId tx = api.tx_of_next();
    r = api.run_batch(t, reads, true);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
    EXPECT_EQ(r.error_op, at);
    const LdmStats ldm_after = cluster.ldm(0).stats();
    EXPECT_EQ(ldm_after.reads - ldm_before.reads, at) << "the reads before the missing row";
    EXPECT_EQ(ldm_after.refused - ldm_before.refused, 1u);
    EXPECT_EQ(ldm_after.key_operations - ldm_before.key_operations, at + 1u) << "nothing after it ran";
    const TcStats tc_after = cluster.tc().stats();
    EXPECT_EQ(tc_after.transactions_aborted - tc_before.transactions_aborted, 1u);
    EXPECT_EQ(tc_after.transactions_committed, tc_before.transactions_committed);
    EXPECT_EQ(tc_after.operations - tc_before.operations, at + 1u);
    // The failed transaction left nothing behind: its id starts a new one.
    const TxResult again = api.run(t, OpType::kRead, item_key(local[1]), {}, true, tx);
    ASSERT_TRUE(again.ok) << error_text(again.error);
    EXPECT_EQ(int_of<uint64_t>(again.rows.at(0).at(kId)), local[1]);
    reads[at] = read(local[at]);
  }
}

// A train with a fault in any record is refused whole (kBadRequest) before
// any of it runs: the insert in its first record never happens.
TEST(LdmWithTcTest, AMalformedTrainIsRefusedWholeAndRunsNothing) {
  Cluster cluster(Layout::kTcWithLdm0);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const Values key = item_key(7);
  const Values values = item_values(7, Item{7, "seven", std::nullopt});
  const Values read_key = item_key(8);
  std::vector<std::byte> records(4096);
  const auto build = [&](TxId tx, uint32_t second_flags) {
    TcKeyReq insert{.api_conn = 0,
                    .tx = tx,
                    .table_id = t.table_id,
                    .table_version = t.version,
                    .op = OpType::kInsert,
                    .lock = LockMode::kExclusive,
                    .flags = kFlagStartTx,
                    .op_index = 0,
                    .key = key.bytes(),
                    .values = values.bytes()};
    TcKeyReq second = insert;
    second.op = OpType::kRead;
    second.lock = LockMode::kCommitted;
    second.flags = second_flags;
    second.op_index = 1;
    second.batch_ops = 2;
    second.key = read_key.bytes();
    second.values = {};
    std::size_t n = put_tc_key_train_record(records, insert);
    n += put_tc_key_train_record(std::span(records).subspan(n), second);
    return n;
  };
  // Each: what to break, and how many records the train claims.
  struct Case {
    const char* what;
    uint32_t second_flags;
    uint32_t count;
    std::size_t trim;  // bytes cut off the records' end
  };
  const Case cases[] = {
      {"unknown flag", kFlagExecute | kFlagCommit | (1u << 9), 2, 0},
      {"second record starts the transaction", kFlagStartTx | kFlagExecute | kFlagCommit, 2, 0},
      {"more records than the section holds", 0, 3, 0},
      {"the count says one, two are there", kFlagExecute | kFlagCommit, 1, 0},
      {"the section ends inside the second record", kFlagExecute | kFlagCommit, 2, 4},
      {"a count of zero", kFlagExecute | kFlagCommit, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::size_t n = build(api.tx_of_next(), c.second_flags);
    const TxResult r = api.run_raw_train(c.count, std::span(records).first(n - c.trim));
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ErrorCode::kBadRequest);
    EXPECT_EQ(api.run(t, OpType::kRead, item_key(7)).error, ErrorCode::kNoSuchRow) << "nothing of it ran";
  }
  // The same train well formed: the insert happens, the read of 8 fails.
  const std::size_t n = build(api.tx_of_next(), kFlagExecute | kFlagCommit);
  EXPECT_EQ(api.run_raw_train(2, std::span(records).first(n)).error, ErrorCode::kNoSuchRow);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(8), item_values(8, Item{8, "eight", std::nullopt})).ok);
  const std::size_t again = build(api.tx_of_next(), kFlagExecute | kFlagCommit);
  const TxResult r = api.run_raw_train(2, std::span(records).first(again));
  ASSERT_TRUE(r.ok) << error_text(r.error);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(item_of(r.rows[0]).qty, 8);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(7)).rows.at(0)).qty, 7);
}

// The hidden table of a unique index, as DICT makes it: the unique columns
// and then the primary key, under the index's id and the table's version.
TableDef hidden_of(const TableDef& t, uint32_t index_id) {
  TableDef hidden = t;
  hidden.table_id = index_id;
  return hidden;
}

// A write committed straight at the LDM that owns the key, as only TC may
// send one: how a test makes a unique index and its table disagree (TC
// refuses writes to a hidden table from an API). `table` is the table as
// the LDM has it (for a hidden one, hidden_unique_table with the index's id).
void ldm_write(Cluster& cluster, const TableDef& table, OpType op, const Values& key, const Values& values = {}) {
  std::array<std::byte, kMaxKeyBytes> encoded{};
  const uint32_t n = encode_key_section(KeyCodec::for_primary_key(table), key.bytes(), encoded).value();
  const uint64_t hash = hash_key(encoded.data(), n);
  LqhKeyReq req;
  req.tc_op = 7;
  req.tx = tx_id(900'000 + static_cast<uint32_t>(op));
  req.table_id = table.table_id;
  req.table_version = table.version;
  req.op = op;
  req.lock = op == OpType::kRead ? LockMode::kCommitted : LockMode::kExclusive;
  req.result_to = ResultTo::kTc;
  req.partition = partition_of(hash, table.partitions);
  req.key_hash = static_cast<uint32_t>(hash);
  req.key = key.bytes();
  req.values = values.bytes();
  const auto ldm = static_cast<uint16_t>(req.partition % 2);
  const auto answer = [&](const Captured& x) {
    return x.number() == gsn::kLqhKeyConf || x.number() == gsn::kLqhKeyRef;
  };
  cluster.send(block_numbers::kLdm, encode(req), ldm);
  ASSERT_EQ(cluster.inbox().take(answer).number(), gsn::kLqhKeyConf) << "the LDM refused the write";
  // The commit's confirmation goes to TC, which knows no such transaction
  // and drops it; a read sent after it in the same queue says it is done.
  cluster.send(block_numbers::kLdm, encode(gsn::kLqhCommitReq, LqhTxReq{req.tx, 0}), ldm);
  req.tx = tx_id(900'100);
  req.op = OpType::kRead;
  req.lock = LockMode::kCommitted;
  req.values = {};
  cluster.send(block_numbers::kLdm, encode(req), ldm);
  const Captured read = cluster.inbox().take(answer);
  EXPECT_EQ(read.number(), op == OpType::kDelete ? gsn::kLqhKeyRef : gsn::kLqhKeyConf);
}

// The hidden table of by_code agrees with the base table: one row per
// non-NULL code, naming the row that has it, and nothing else.
void expect_hidden_agrees(Api& api, const TableDef& t, uint32_t by_code) {
  std::map<uint32_t, uint64_t> base, hidden;
  for (const RowValues& row : api.scan(t, 0, {}, 5))
    if (row.at(kCode)) {
      EXPECT_TRUE(base.emplace(int_of<uint32_t>(row.at(kCode)), int_of<uint64_t>(row.at(kId))).second);
    }
  for (const RowValues& row : api.scan(hidden_of(t, by_code), 0, {}, 5))
    EXPECT_TRUE(hidden.emplace(int_of<uint32_t>(row.at(0)), int_of<uint64_t>(row.at(1))).second);
  EXPECT_EQ(hidden, base);
  for (const auto& [code, id] : base) {
    const TxResult r = api.run(t, OpType::kRead, Values().u32(kCode, code), {}, true, std::nullopt, by_code);
    ASSERT_TRUE(r.ok) << "code " << code << ": " << error_text(r.error);
    EXPECT_EQ(int_of<uint64_t>(r.rows.at(0).at(kId)), id);
  }
}

TEST(LdmWithTcTest, UniqueKeyChangesCommittedOrRolledBackKeepTheHiddenTableInStep) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  const auto code_of = [&](uint64_t id) -> std::optional<uint32_t> {
    const TxResult r = api.run(t, OpType::kRead, item_key(id));
    EXPECT_TRUE(r.ok) << "row " << id;
    if (!r.ok || !r.rows.at(0).at(kCode)) return std::nullopt;
    return int_of<uint32_t>(r.rows.at(0).at(kCode));
  };
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20})).ok);
  // Many rows may have a NULL code (NDB's unique indexes skip NULLs).
  for (uint64_t id = 3; id < 6; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{3, "c", std::nullopt})).ok);
  expect_hidden_agrees(api, t, by_code);

  // To another row's value: refused, the row keeps its own.
  EXPECT_EQ(api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 20)).error, ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(code_of(1), 10u);
  expect_hidden_agrees(api, t, by_code);
  // To its own value, and a write of the same row: accepted, nothing moves.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 10)).ok);
  ASSERT_TRUE(api.run(t, OpType::kWrite, item_key(2), item_values(2, Item{9, "b", 20})).ok);
  expect_hidden_agrees(api, t, by_code);
  // From NULL to a value and back.
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(3), Values().u32(kCode, 30)).ok);
  expect_hidden_agrees(api, t, by_code);
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(3), Values().null(kCode)).ok);
  expect_hidden_agrees(api, t, by_code);

  // A swap in one transaction, through a third value; rolled back, then committed.
  const auto swap = [&](TxId tx, uint32_t conn) {
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 99), false, tx, 0,
                                  LockMode::kExclusive, true, conn))
                    .ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(2), Values().u32(kCode, 10), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 20), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
    // Inside the transaction the new mapping holds already.
    const TxResult own = api.wait(
        api.send(t, OpType::kRead, Values().u32(kCode, 20), {}, false, tx, by_code, LockMode::kExclusive, false, conn));
    ASSERT_TRUE(own.ok) << error_text(own.error);
    EXPECT_EQ(int_of<uint64_t>(own.rows.at(0).at(kId)), 1u);
  };
  swap(tx_id(501), 501);
  api.rollback(tx_id(501), 501);
  EXPECT_EQ(code_of(1), 10u);
  EXPECT_EQ(code_of(2), 20u);
  expect_hidden_agrees(api, t, by_code);
  swap(tx_id(502), 502);
  api.commit(tx_id(502), 502);
  EXPECT_EQ(code_of(1), 20u);
  EXPECT_EQ(code_of(2), 10u);
  expect_hidden_agrees(api, t, by_code);

  // Delete a row and give its value to a new one in one transaction; rolled back, then committed.
  const auto move_code = [&](TxId tx, uint32_t conn) {
    ASSERT_TRUE(
        api.wait(api.send(t, OpType::kDelete, item_key(2), {}, false, tx, 0, LockMode::kExclusive, true, conn)).ok);
    ASSERT_TRUE(api.wait(api.send(t, OpType::kInsert, item_key(6), item_values(6, Item{6, "f", 10}), false, tx, 0,
                                  LockMode::kExclusive, false, conn))
                    .ok);
  };
  move_code(tx_id(503), 503);
  api.rollback(tx_id(503), 503);
  EXPECT_EQ(code_of(2), 10u);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(6)).error, ErrorCode::kNoSuchRow);
  expect_hidden_agrees(api, t, by_code);
  move_code(tx_id(504), 504);
  api.commit(tx_id(504), 504);
  EXPECT_EQ(api.run(t, OpType::kRead, item_key(2)).error, ErrorCode::kNoSuchRow);
  EXPECT_EQ(code_of(6), 10u);
  expect_hidden_agrees(api, t, by_code);

  // A failed update inside a longer transaction aborts all of it.
  ASSERT_TRUE(api.wait(api.send(t, OpType::kUpdate, item_key(4), Values().u32(kCode, 40), false, tx_id(505), 0,
                                LockMode::kExclusive, true, 505))
                  .ok);
  EXPECT_EQ(api.wait(api.send(t, OpType::kUpdate, item_key(5), Values().u32(kCode, 20), true, tx_id(505), 0,
                              LockMode::kExclusive, false, 505))
                .error,
            ErrorCode::kDuplicateUniqueKey);
  EXPECT_EQ(code_of(4), std::nullopt);
  EXPECT_EQ(code_of(5), std::nullopt);
  expect_hidden_agrees(api, t, by_code);
  EXPECT_EQ(cluster.ldm(0).stats().operation_records_in_use + cluster.ldm(1).stats().operation_records_in_use, 0u);
  EXPECT_EQ(cluster.ldm(0).stats().lock_records_in_use + cluster.ldm(1).stats().lock_records_in_use, 0u);
}

// Two transactions read a row with shared locks and then both update it:
// each upgrade waits for the other's shared lock, a deadlock that only TC's
// timeout breaks; the survivor gets the row and nothing stays locked.
TEST(LdmWithTcTest, TwoSharedHoldersUpgradingDeadlockAndTheTimeoutBreaksIt) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "x", 1})).ok);
  const TxId a = tx_id(11), b = tx_id(12);
  constexpr uint32_t kA = 911, kB = 912;
  ASSERT_TRUE(api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, a, 0, LockMode::kShared, true, kA)).ok);
  ASSERT_TRUE(api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, b, 0, LockMode::kShared, true, kB)).ok);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 10), true, a, 0, LockMode::kExclusive, false, kA);
  api.send(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 20), true, b, 0, LockMode::kExclusive, false, kB);
  const TxResult ra = api.wait(kA);
  const TxResult rb = api.wait(kB);
  expect_a_deadlock_victim(ra, rb);
  const int32_t qty = item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty;
  EXPECT_EQ(qty, ra.ok ? 10 : rb.ok ? 20 : 1);
  ASSERT_TRUE(api.run(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 30)).ok);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 30);
  EXPECT_EQ(cluster.ldm(0).stats().lock_records_in_use + cluster.ldm(1).stats().lock_records_in_use, 0u);
}

// MaxNoOfConcurrentOperations reached inside a transaction, in TC (each
// insert takes an operation record for the row and one for its hidden
// unique row) or in an LDM: the transaction fails with 233, everything it
// did is undone, every record is free again, and the next transactions run.
TEST(LdmWithTcTest, RunningOutOfOperationRecordsAbortsTheTransactionCleanly) {
  Cluster cluster(Layout::kSeparate, 20, /*max_operations=*/12);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  for (uint32_t attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const TxId tx = tx_id(600 + attempt);
    const uint32_t conn = 600 + attempt;
    TxResult r;
    uint64_t id = 0;
    for (; id < 40; ++id) {
      r = api.wait(api.send(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", uint32_t(id)}), false, tx, 0,
                            LockMode::kExclusive, id == 0, conn));
      if (!r.ok) break;
    }
    ASSERT_FALSE(r.ok) << "the records never ran out";
    EXPECT_EQ(r.error, ErrorCode::kTooManyOperations);
    EXPECT_EQ(r.error_op, 0u);  // every request was the batch's operation 0
    EXPECT_GT(id, 0u);
    // Nothing of it stays: no row, no hidden row, no record.
    EXPECT_EQ(api.scan(t, 0, {}, 7).size(), 0u);
    EXPECT_EQ(api.scan(hidden_of(t, by_code), 0, {}, 7).size(), 0u);
    for (uint16_t i = 0; i < 2; ++i) {
      EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
      EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
    }
  }
  // A transaction that fits runs, and its rows can be read by unique key.
  for (uint64_t id = 0; id < 3; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, "n", uint32_t(id)})).ok);
  expect_hidden_agrees(api, t, by_code);
}

// An API that stops sending in the middle of a batch (it died without the
// link going down, or gave up when its send buffer stayed full) leaves TC
// waiting for the rest with the locks of what already ran. The inactive
// timeout covers that wait too: the transaction is aborted and its locks
// released, and a writer waiting for them goes on.
TEST(LdmWithTcTest, ABatchWhoseRestNeverComesIsAbortedByTheInactiveTimeout) {
  Cluster cluster(Layout::kSeparate, 20, 32768, /*inactive_timeout_ms=*/60);
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "one", std::nullopt})).ok);
  const Values key = item_key(1);
  const Values values = Values().i32(kQty, 2);
  TcKeyReq first{.api_conn = 901,
                 .tx = tx_id(901),
                 .table_id = t.table_id,
                 .table_version = t.version,
                 .op = OpType::kUpdate,
                 .lock = LockMode::kExclusive,
                 .flags = kFlagStartTx,  // the first of a batch; the rest never comes
                 .op_index = 0,
                 .key = key.bytes(),
                 .values = values.bytes()};
  api.send_raw(first);
  // Its update runs and holds row 1; another writer waits for the lock,
  // longer than the inactive timeout and less than the deadlock timeout
  // (300 ms), unless TC gives the stalled batch up first.
  const TxResult other = api.run(t, OpType::kUpdate, item_key(1), Values().i32(kQty, 3));
  EXPECT_TRUE(other.ok) << error_text(other.error) << ": the stalled batch kept its lock";
  const TxResult stalled = api.wait(901);
  EXPECT_EQ(stalled.error, ErrorCode::kInactiveTimeout);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 3);
  EXPECT_EQ(cluster.tc().stats().inactive_aborts, 1u);
  // The transaction is gone: the rest of its batch, arriving late now, is
  // refused as a transaction TC does not know, and its id is free again.
  TcKeyReq rest = first;
  rest.flags = kFlagExecute | kFlagCommit;
  rest.op_index = 1;
  rest.batch_ops = 2;
  api.send_raw(rest);
  EXPECT_EQ(api.wait(901).error, ErrorCode::kUnknownTransaction);
  first.flags = kFlagStartTx | kFlagExecute | kFlagCommit;
  first.batch_ops = 1;
  api.send_raw(first);
  const TxResult again = api.wait(901);
  EXPECT_TRUE(again.ok) << error_text(again.error);
  EXPECT_EQ(item_of(api.run(t, OpType::kRead, item_key(1)).rows.at(0)).qty, 2);
}

// A transaction wrote to a table that DICT then dropped: the LDMs forgot
// those writes with the table, yet the commit confirmed them. TC now
// aborts such a transaction when the table is dropped (283, in a
// TcAbortRep, before the commit that comes later is refused): its writes
// to a table that stays are undone and its locks released. A transaction
// that only read the dropped table, with a lock, commits as before.
TEST(LdmWithTcTest, ATransactionThatWroteToADroppedTableIsAbortedAndTheRestUndone) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  TableDef kept_def = plain_items();
  kept_def.name = "kept";
  const TableDef kept = cluster.create(kept_def);
  const uint32_t kept_by_code = index_id_of(kept, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(kept, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  // The writer: an insert (and its unique index's hidden row) in the table
  // to be dropped, an update and an insert in the one that stays.
  const TxId writer = tx_id(701), reader = tx_id(702);
  constexpr uint32_t kWriter = 701, kReader = 702;
  ASSERT_TRUE(api.wait(api.send(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20}), false, writer, 0,
                                LockMode::kExclusive, true, kWriter))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(kept, OpType::kUpdate, item_key(1), Values().u32(kCode, 11), false, writer, 0,
                                LockMode::kExclusive, false, kWriter))
                  .ok);
  ASSERT_TRUE(api.wait(api.send(kept, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20}), false, writer, 0,
                                LockMode::kExclusive, false, kWriter))
                  .ok);
  const TxResult read =
      api.wait(api.send(t, OpType::kRead, item_key(1), {}, false, reader, 0, LockMode::kShared, true, kReader));
  ASSERT_TRUE(read.ok) << error_text(read.error);
  EXPECT_EQ(item_of(read.rows.at(0)).code, 10u);

  cluster.drop("items");
  // The writer's commit: the first answer for it says it was aborted.
  cluster.send(block_numbers::kTc, encode(TcTxMessage{gsn::kTcCommitReq, kWriter, writer}));
  const Captured first = cluster.inbox().take([&](const Captured& x) {
    if (x.number() == gsn::kTcAbortRep) return decode_tc_abort_rep(x.signal())->api_conn == kWriter;
    if (x.number() == gsn::kTcKeyConf) return decode_tc_key_conf(x.signal())->api_conn == kWriter;
    if (x.number() == gsn::kTcKeyRef) return decode_tc_key_ref(x.signal())->api_conn == kWriter;
    return false;
  });
  ASSERT_EQ(first.number(), gsn::kTcAbortRep) << "the commit was answered as if the writes had gone somewhere";
  EXPECT_EQ(decode_tc_abort_rep(first.signal())->error, ErrorCode::kTableDropped);
  EXPECT_EQ(cluster.tc().stats().drop_aborts, 1u);
  api.commit(reader, kReader);
  // The drop is confirmed while the abort is still under way, so the commit
  // finds the transaction either gone (answered: unknown transaction) or
  // still aborting (no answer of its own: the abort report is the answer).
  // The reader's commit went through TC after it, so any answer is here now.
  const std::vector<Captured> late = cluster.inbox().drain([&](const Captured& x) {
    return (x.number() == gsn::kTcKeyRef && decode_tc_key_ref(x.signal())->api_conn == kWriter) ||
           (x.number() == gsn::kTcKeyConf && decode_tc_key_conf(x.signal())->api_conn == kWriter);
  });
  ASSERT_LE(late.size(), 1u);
  for (const Captured& x : late) {
    ASSERT_EQ(x.number(), gsn::kTcKeyRef) << "the commit succeeded after its transaction was aborted";
    EXPECT_EQ(decode_tc_key_ref(x.signal())->error, ErrorCode::kUnknownTransaction);
  }

  // Nothing of the writer stays in the table that stays, and nothing is locked.
  const TxResult row1 = api.run(kept, OpType::kRead, item_key(1));
  ASSERT_TRUE(row1.ok) << error_text(row1.error);
  EXPECT_EQ(item_of(row1.rows.at(0)).code, 10u);
  EXPECT_EQ(api.run(kept, OpType::kRead, item_key(2)).error, ErrorCode::kNoSuchRow);
  expect_hidden_agrees(api, kept, kept_by_code);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
  ASSERT_TRUE(api.run(kept, OpType::kUpdate, item_key(1), Values().u32(kCode, 12)).ok);
  expect_hidden_agrees(api, kept, kept_by_code);
}

// TC took a missing hidden row, when it deleted one to keep a unique index
// in step with its table, for a NULL that has none (it never deletes one
// for a NULL), so an index that disagreed with its table went unnoticed and
// the write went on. It is now an internal error (4349), logged, that
// aborts the write's transaction. The disagreement is made by deleting a
// hidden row through TC directly (the API is never given a hidden table).
// Only TC writes a unique index's hidden table, in step with its base
// table. A request that names one by hand (the API never does) may read it
// but not write it: each write is refused with 4000 and changes nothing.
TEST(LdmWithTcTest, WritesToAHiddenUniqueIndexTableFromAnApiAreRefused) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  const TableDef hidden = hidden_of(t, by_code);
  const Values row = Values().u32(0, 20).u64(1, 1);
  for (const auto& [op, key, values] : {std::tuple{OpType::kDelete, Values().u32(0, 10), Values()},
                                        std::tuple{OpType::kUpdate, Values().u32(0, 10), Values().u64(1, 2)},
                                        std::tuple{OpType::kWrite, Values().u32(0, 10), Values().u32(0, 10).u64(1, 2)},
                                        std::tuple{OpType::kInsert, Values().u32(0, 20), row}}) {
    const TxResult r = api.run(hidden, op, key, values);
    EXPECT_FALSE(r.ok) << op_type_name(op);
    EXPECT_EQ(r.error, ErrorCode::kBadRequest) << op_type_name(op) << ": " << error_text(r.error);
  }
  EXPECT_TRUE(api.run(hidden, OpType::kRead, Values().u32(0, 10)).ok) << "reading it stays allowed";
  expect_hidden_agrees(api, t, by_code);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
}

TEST(LdmWithTcTest, AHiddenRowMissingForItsTablesRowAbortsTheWriteThatFindsItAndIsLogged) {
  Cluster cluster;
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  const uint32_t by_code = index_id_of(t, "by_code");
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(1), item_values(1, Item{1, "a", 10})).ok);
  ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(2), item_values(2, Item{2, "b", 20})).ok);
  const auto code_index =
      std::find_if(t.indexes.begin(), t.indexes.end(), [&](const IndexDef& i) { return i.index_id == by_code; });
  TableDef hidden = hidden_unique_table(t, *code_index);
  hidden.table_id = by_code;
  hidden.version = t.version;
  ldm_write(cluster, hidden, OpType::kDelete, Values().u32(0, 10));

  const std::string log_path = ::testing::TempDir() + "ldm_tc_test_index_" + std::to_string(::getpid()) + ".log";
  std::remove(log_path.c_str());
  ASSERT_TRUE(log_set_file(log_path));
  const TxResult removed = api.run(t, OpType::kDelete, item_key(1));
  const TxResult updated = api.run(t, OpType::kUpdate, item_key(1), Values().u32(kCode, 30));
  log_set_file("");
  EXPECT_EQ(removed.error, ErrorCode::kIndexInconsistent);
  EXPECT_EQ(removed.error_op, 0u);
  EXPECT_EQ(updated.error, ErrorCode::kIndexInconsistent);
  std::ifstream log_file(log_path);
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  std::remove(log_path.c_str());
  EXPECT_NE(log.find("ERROR"), std::string::npos) << log;
  EXPECT_NE(log.find("'items$by_code'"), std::string::npos) << log;
  EXPECT_NE(log.find("disagrees with its table"), std::string::npos) << log;

  // Neither write happened: row 1 keeps its code, and no hidden row for 30 was left.
  const TxResult row1 = api.run(t, OpType::kRead, item_key(1));
  ASSERT_TRUE(row1.ok) << error_text(row1.error);
  EXPECT_EQ(item_of(row1.rows.at(0)).code, 10u);
  EXPECT_EQ(api.run(t, OpType::kRead, Values().u32(kCode, 30), {}, true, std::nullopt, by_code).error,
            ErrorCode::kNoSuchRow);
  for (uint16_t i = 0; i < 2; ++i) {
    EXPECT_EQ(cluster.ldm(i).stats().operation_records_in_use, 0u) << "LDM " << i;
    EXPECT_EQ(cluster.ldm(i).stats().lock_records_in_use, 0u) << "LDM " << i;
  }
  // With the hidden row put back, the index agrees again and the same delete runs.
  ldm_write(cluster, hidden, OpType::kInsert, Values().u32(0, 10), Values().u32(0, 10).u64(1, 1));
  expect_hidden_agrees(api, t, by_code);
  ASSERT_TRUE(api.run(t, OpType::kDelete, item_key(1)).ok);
  expect_hidden_agrees(api, t, by_code);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
