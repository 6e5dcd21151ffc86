// The LDM+TC tests' side of a BlockCluster: an Api that speaks for the API
// double (TcKeyReq, TcKeyTrain, commit, rollback, scans) and collects TC's
// answers from the cluster's inbox, and the tables those tests use. Called
// from the test thread only.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "block_cluster.h"
#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {

using test::BlockCluster;
using test::Layout;

struct TxResult {
  bool ok = false;
  ErrorCode error = ErrorCode::kNone;
  uint32_t error_op = UINT32_MAX;   // the TcKeyRef's operation
  std::vector<RowValues> rows;      // KeyData received for the batch
  bool ended_with_data = false;     // the batch's end came as a KeyDataConf or a KeyDataTrain
  uint32_t data_trains = 0;         // KeyDataTrain signals received
  std::vector<uint32_t> train_ops;  // op_index of each KeyDataTrain record, in order
};

// Speaks for the API double: each call sends TC a request and waits in the
// cluster's inbox for TC's answers to it.
class Api {
 public:
  explicit Api(BlockCluster& cluster) : c_(cluster) {}

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
  BlockCluster& c_;
  uint32_t next_conn_ = 0;
};

inline TableDef plain_items() {
  TableDef t = items_table(8);
  t.table_id = 0;  // DICT assigns ids
  for (IndexDef& index : t.indexes) index.index_id = 0;
  return t;
}

// Whether `key`'s row is in LDM 0's partitions (the even ones, with two
// LDMs): where the tests expect direct reads and look-ahead hits.
inline bool in_ldm0(const TableDef& table, const Values& key) {
  std::array<std::byte, kMaxKeyBytes> encoded{};
  const uint32_t n = encode_key_section(KeyCodec::for_primary_key(table), key.bytes(), encoded).value();
  return partition_of(hash_key(encoded.data(), n), table.partitions) % 2 == 0;
}

// A table of an id and a nullable VARCHAR tag of `tag_bytes` with a unique
// index on the tag ("by_tag").
inline TableDef tagged_table(uint32_t tag_bytes) {
  TableDef wide;
  wide.name = "wide";
  wide.partitions = 8;
  wide.columns = {column("id", ColumnType::kUint64), column("tag", ColumnType::kVarChar, tag_bytes, true)};
  wide.primary_key = {0};
  wide.indexes = {IndexDef{"by_tag", IndexKind::kUnique, {1}, 0}};
  return wide;
}

inline uint32_t index_id_of(const TableDef& t, const std::string& name) {
  for (const IndexDef& index : t.indexes)
    if (index.name == name) return index.index_id;
  ADD_FAILURE() << "no index " << name;
  return 0;
}

// Two transactions deadlocked: TC's timeout aborted at least one of them,
// each with 266 (both when they timed out in the same check).
inline void expect_a_deadlock_victim(const TxResult& a, const TxResult& b) {
  EXPECT_TRUE(!a.ok || !b.ok) << "neither was aborted";
  for (const TxResult* r : {&a, &b})
    if (!r->ok) {
      EXPECT_EQ(r->error, ErrorCode::kDeadlockTimeout);
    }
}

// The hidden table of a unique index as a scan names it: by the index's id
// and the table's version (a scan sends no more of the definition; its rows
// are the unique columns and then the primary key).
inline TableDef hidden_of(const TableDef& t, uint32_t index_id) {
  TableDef hidden = t;
  hidden.table_id = index_id;
  return hidden;
}

// The hidden table of by_code agrees with the base table: one row per
// non-NULL code, naming the row that has it, and nothing else.
inline void expect_hidden_agrees(Api& api, const TableDef& t, uint32_t by_code) {
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

}  // namespace fjord::engine::ldm_test
