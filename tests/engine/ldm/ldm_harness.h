// A harness for LDM tests: LDM blocks on ldm threads of a real Runtime, and
// on a tc thread two test doubles that play TC and the API node. The test
// thread hands requests to the TC double (it relays them to an LDM
// instance, so replies come back to it, as they do to TC) and takes the
// replies from queues. Read results and scan rows come to the API double.
//
// Order: an LDM's signals to both doubles travel one job buffer (ldm thread
// to tc thread) and are captured in the order sent. sync() proves a point
// in that order: everything an LDM sent before it has been captured, so a
// test can assert that a waiting request has *not* been answered without
// any timing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../cluster/signal_capture.h"
#include "../runtime/test_blocks.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/runtime.h"
#include "fjord/engine/storage/page_pool.h"

namespace fjord::engine::ldm_test {

using namespace protocol;

inline constexpr uint16_t kRelay = runtime_signals::kFirstUser + 50;  // test -> TC double: forward
inline constexpr NodeId kSelf = 1;

using test::capture;
using test::Captured;
using test::Inbox;

struct HarnessOptions {
  uint16_t ldm_threads = 1;
  uint64_t data_memory_bytes = 64 << 20;
  uint32_t spintime_us = 0;  // > 0: busy threads (tests run with more of them than cores)
  LdmOptions ldm;            // instance and ldm_instances are set per block
};

class Harness {
 public:
  explicit Harness(const HarnessOptions& options = {}) : options_(options) {
    auto pool = storage::PagePool::create({options.data_memory_bytes});
    EXPECT_TRUE(pool) << pool.status().to_string();
    pool_ = std::move(pool).value();
    std::vector<ThreadSpec> threads;
    for (uint32_t i = 0; i < options.ldm_threads; ++i)
      threads.push_back(test::plan(ThreadType::kLdm, i, options.spintime_us));
    threads.push_back(test::plan(ThreadType::kTc, 0, options.spintime_us));
    auto rt = Runtime::create(test::options_with(threads, kSelf));
    EXPECT_TRUE(rt) << rt.status().to_string();
    runtime_ = std::move(rt).value();
    for (uint16_t i = 0; i < options.ldm_threads; ++i) {
      LdmOptions o = options.ldm;
      o.instance = i;
      o.ldm_instances = options.ldm_threads;
      auto block = std::make_unique<LdmBlock>(*pool_, o);
      ldms_.push_back(block.get());
      EXPECT_TRUE(runtime_->add_block(std::move(block), ThreadType::kLdm, i));
    }
    EXPECT_TRUE(runtime_->add_block(
        std::make_unique<test::LambdaBlock>(block_numbers::kTc, 0, "TC-DOUBLE",
                                            [this](const Signal& s, BlockContext& c) { tc_double(s, c); }),
        ThreadType::kTc, 0));
    EXPECT_TRUE(runtime_->add_block(
        std::make_unique<test::LambdaBlock>(block_numbers::kApi, 0, "API-DOUBLE",
                                            [this](const Signal& s, BlockContext&) { api_.push(capture(s)); }),
        ThreadType::kTc, 0));
    EXPECT_TRUE(runtime_->start());
  }
  ~Harness() { runtime_->stop(); }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Sends `out` to LDM instance `ldm` from the TC double.
  void send(uint16_t ldm, const SignalOut& out) {
    std::vector<uint32_t> words = {ldm, out.number};
    words.insert(words.end(), out.words, out.words + out.word_count);
    const Status s = runtime_->inject({kSelf, {block_numbers::kTc, 0}}, kRelay, words, out.section_list());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  // Sends raw words and sections (malformed signals).
  void send_raw(uint16_t ldm, uint16_t number, std::vector<uint32_t> data,
                std::vector<std::span<const std::byte>> sections = {}) {
    std::vector<uint32_t> words = {ldm, number};
    words.insert(words.end(), data.begin(), data.end());
    ASSERT_TRUE(runtime_->inject({kSelf, {block_numbers::kTc, 0}}, kRelay, words, sections).is_ok());
  }

  Inbox& tc() { return tc_; }
  Inbox& api() { return api_; }

  // Returns once everything LDM instance `ldm` sent before now was captured.
  void sync(uint16_t ldm) {
    // Node 255's id space, high counters: no test's transaction.
    const TxId probe = TxId::from(uint32_t{kMaxNodeId} << 16 | 0xFFFFu, next_probe_++);
    send(ldm, encode(gsn::kLqhAbortReq, LqhTxReq{probe, 0}));
    tc_.take([&](const Captured& c) {
      if (c.number() != gsn::kLqhAbortConf) return false;
      auto m = decode_lqh_tx_conf(c.signal());
      return m && m->tx == probe;
    });
  }
  void sync_all() {
    for (uint16_t i = 0; i < ldm_count(); ++i) sync(i);
  }

  storage::PagePool& pool() { return *pool_; }
  LdmBlock& ldm(uint16_t i) { return *ldms_[i]; }
  uint16_t ldm_count() const { return static_cast<uint16_t>(ldms_.size()); }

 private:
  void tc_double(const Signal& s, BlockContext& c) {
    if (s.number() != kRelay) return tc_.push(capture(s));
    std::vector<uint32_t> words;
    for (std::size_t i = 2; i < s.word_count(); ++i) words.push_back(s.word(i));
    std::span<const std::byte> sections[frame::kMaxSections];
    for (std::size_t i = 0; i < s.section_count(); ++i) sections[i] = s.section(i);
    c.send({kSelf, {block_numbers::kLdm, static_cast<uint16_t>(s.word(0))}}, static_cast<uint16_t>(s.word(1)), words,
           {sections, s.section_count()});
  }

  HarnessOptions options_;
  std::unique_ptr<storage::PagePool> pool_;
  std::unique_ptr<Runtime> runtime_;
  std::vector<LdmBlock*> ldms_;
  Inbox tc_, api_;
  uint32_t next_probe_ = 1;
};

// ---- values ----------------------------------------------------------------------------------

// Value entries (protocol.h), built up column by column.
class Values {
 public:
  Values& u32(uint16_t column, uint32_t v) { return put(column, &v, 4); }
  Values& i32(uint16_t column, int32_t v) { return put(column, &v, 4); }
  Values& u64(uint16_t column, uint64_t v) { return put(column, &v, 8); }
  Values& i64(uint16_t column, int64_t v) { return put(column, &v, 8); }
  Values& str(uint16_t column, std::string_view s) { return put(column, s.data(), s.size()); }
  Values& null(uint16_t column) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + value_entry_bytes(0));
    put_value(std::span(bytes_).subspan(at), column, true, {});
    return *this;
  }
  Values& raw(std::span<const std::byte> entries) {
    bytes_.insert(bytes_.end(), entries.begin(), entries.end());
    return *this;
  }
  std::span<const std::byte> bytes() const { return bytes_; }
  bool empty() const { return bytes_.empty(); }

 private:
  Values& put(uint16_t column, const void* data, std::size_t n) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + value_entry_bytes(n));
    put_value(std::span(bytes_).subspan(at), column, false, {static_cast<const std::byte*>(data), n});
    return *this;
  }
  std::vector<std::byte> bytes_;
};

// A values section read back: column -> bytes (nullopt for NULL).
using RowValues = std::map<uint16_t, std::optional<std::vector<std::byte>>>;
inline RowValues decode_values(std::span<const std::byte> section) {
  RowValues out;
  ValueCursor cursor(section);
  ValueEntry e;
  while (cursor.next(e)) {
    EXPECT_EQ(out.count(e.column), 0u) << "column " << e.column << " twice";
    if (e.is_null)
      out[e.column] = std::nullopt;
    else
      out[e.column] = std::vector<std::byte>(e.bytes.begin(), e.bytes.end());
  }
  EXPECT_TRUE(cursor.error().is_ok()) << cursor.error().message();
  return out;
}

// A ScanRows signal's rows (each a u32 length and its values), appended.
inline void append_scan_rows(const ScanRows& rows, std::vector<RowValues>& out) {
  std::span<const std::byte> rest = rows.data;
  for (uint32_t i = 0; i < rows.rows; ++i) {
    uint32_t len;
    std::memcpy(&len, rest.data(), 4);
    out.push_back(decode_values(rest.subspan(4, len)));
    rest = rest.subspan(4 + len);
  }
}
inline std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}
template <typename T>
std::vector<std::byte> bytes_of_int(T v) {
  std::vector<std::byte> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
template <typename T>
T int_of(const std::optional<std::vector<std::byte>>& v) {
  T out{};
  EXPECT_TRUE(v.has_value() && v->size() == sizeof out);
  if (v && v->size() == sizeof out) std::memcpy(&out, v->data(), sizeof out);
  return out;
}
inline std::string str_of(const std::optional<std::vector<std::byte>>& v) {
  EXPECT_TRUE(v.has_value());
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

inline std::vector<std::byte> column_list(std::initializer_list<uint16_t> columns) {
  std::vector<std::byte> out(columns.size() * 2);
  std::size_t at = 0;
  for (uint16_t c : columns) {
    std::memcpy(out.data() + at, &c, 2);
    at += 2;
  }
  return out;
}

// ---- schema ----------------------------------------------------------------------------------

inline ColumnDef column(std::string name, ColumnType type, uint32_t length = 0, bool nullable = false) {
  return ColumnDef{std::move(name), type, length, nullable};
}

// Installs `table` on every LDM (as DICT does) and waits for each conf.
inline void install(Harness& h, const TableDef& table) {
  static uint32_t install_id = 1000;
  const uint32_t id = ++install_id;
  const std::vector<std::byte> bytes = encode_table(table);
  for (uint16_t i = 0; i < h.ldm_count(); ++i) h.send(i, encode(SchemaInstall{id, table.table_id, false, bytes}));
  for (uint16_t i = 0; i < h.ldm_count(); ++i)
    h.tc().take([&](const Captured& c) {
      if (c.number() != gsn::kSchemaInstallConf) return false;
      auto m = decode_schema_install_conf(c.signal());
      return m && m->install_id == id;
    });
}
inline void drop(Harness& h, uint32_t table_id) {
  static uint32_t drop_id = 5000;
  const uint32_t id = ++drop_id;
  for (uint16_t i = 0; i < h.ldm_count(); ++i) h.send(i, encode(SchemaInstall{id, table_id, true, {}}));
  for (uint16_t i = 0; i < h.ldm_count(); ++i)
    h.tc().take([&](const Captured& c) {
      if (c.number() != gsn::kSchemaInstallConf) return false;
      auto m = decode_schema_install_conf(c.signal());
      return m && m->install_id == id;
    });
}

// ---- key operations ----------------------------------------------------------------------------

struct KeyOutcome {
  bool ok = false;
  ErrorCode error = ErrorCode::kNone;
  bool data_sent_to_api = false;
  RowValues values;                   // a read's values (from KeyData or the conf)
  std::vector<std::byte> raw_values;  // ... as the section carried them
  std::vector<std::byte> unique_before, unique_after;
};

inline TxId tx_id(uint32_t n) { return TxId::from(uint32_t{kSelf} << 16, n); }

// Sends key operations on one table through a Harness and collects answers.
class Client {
 public:
  Client(Harness& h, const TableDef& table) : h_(h), table_(table), pk_(KeyCodec::for_primary_key(table)) {}

  struct Request {
    OpType op = OpType::kRead;
    LockMode lock = LockMode::kCommitted;
    TxId tx;
    Values key;
    Values values;
    std::vector<std::byte> columns;
    ResultTo result_to = ResultTo::kApi;
    std::optional<uint32_t> partition;      // default: the key's partition
    std::optional<uint32_t> table_version;  // default: the table's
    std::optional<uint32_t> key_hash;       // default: the key's (as TC computes it)
  };

  // The key's partition (0 for a malformed key: the LDM must refuse it anyway).
  uint32_t partition_of_key(const Values& key) const { return partition_of(full_hash_of_key(key), table_.partitions); }
  // LqhKeyReq's key_hash for `key` (0 for a malformed key).
  uint32_t key_hash_of(const Values& key) const { return static_cast<uint32_t>(full_hash_of_key(key)); }
  uint64_t full_hash_of_key(const Values& key) const {
    std::vector<std::byte> encoded(kMaxKeyBytes);
    auto n = encode_key_section(pk_, key.bytes(), encoded);
    return n ? hash_key(encoded.data(), n.value()) : 0;
  }
  uint16_t ldm_of(uint32_t partition) const { return static_cast<uint16_t>(partition % h_.ldm_count()); }

  // Sends a request; returns its tc_op (also used as op_index and api_conn).
  uint32_t send(const Request& r) {
    LqhKeyReq m;
    m.tc_op = ++next_op_;
    m.tx = r.tx;
    m.table_id = table_.table_id;
    m.table_version = r.table_version.value_or(table_.version);
    m.op = r.op;
    m.lock = r.lock;
    m.result_to = r.result_to;
    m.partition = r.partition.value_or(partition_of_key(r.key));
    m.key_hash = r.key_hash.value_or(key_hash_of(r.key));
    m.api_node = kSelf;
    m.api_conn = m.tc_op;
    m.op_index = m.tc_op;
    m.key = r.key.bytes();
    m.values = r.values.bytes();
    m.columns = r.columns;
    h_.send(ldm_of(m.partition), encode(m));
    return m.tc_op;
  }

  // Waits for the answer to operation `op`.
  KeyOutcome wait(uint32_t op) {
    const Captured c = h_.tc().take([&](const Captured& x) { return answers(x, op); });
    return c.frame.empty() ? KeyOutcome{} : outcome_of(c, op);
  }
  // The answer to `op` if it has arrived (call after a sync()).
  std::optional<KeyOutcome> poll(uint32_t op) {
    std::vector<Captured> got = h_.tc().drain([&](const Captured& x) { return answers(x, op); });
    if (got.empty()) return std::nullopt;
    return outcome_of(got.front(), op);
  }
  KeyOutcome run(const Request& r) { return wait(send(r)); }
  // True if operation `op` has been answered (call after a sync()).
  bool answered(uint32_t op) {
    return !h_.tc().drain([&](const Captured& x) { return answers(x, op); }).empty();
  }

  // Commit or abort at every LDM; returns the operations they reported.
  uint32_t commit(TxId tx) { return end(gsn::kLqhCommitReq, gsn::kLqhCommitConf, tx); }
  uint32_t abort(TxId tx) { return end(gsn::kLqhAbortReq, gsn::kLqhAbortConf, tx); }
  uint32_t end(uint16_t req, uint16_t conf, TxId tx) {
    for (uint16_t i = 0; i < h_.ldm_count(); ++i) h_.send(i, encode(req, LqhTxReq{tx, 0}));
    uint32_t ops = 0;
    for (uint16_t i = 0; i < h_.ldm_count(); ++i) {
      const Captured c = h_.tc().take([&](const Captured& x) {
        if (x.number() != conf) return false;
        auto m = decode_lqh_tx_conf(x.signal());
        return m && m->tx == tx;
      });
      if (!c.frame.empty()) ops += decode_lqh_tx_conf(c.signal())->ops;
    }
    return ops;
  }

  const TableDef& table() const { return table_; }
  Harness& harness() { return h_; }

 private:
  // The conf or ref `c` for operation `op`, with its KeyData if it sent one.
  KeyOutcome outcome_of(const Captured& c, uint32_t op) {
    KeyOutcome out;
    const Signal s = c.signal();
    if (s.number() == gsn::kLqhKeyRef) {
      out.error = decode_lqh_key_ref(s)->error;
      return out;
    }
    auto conf = decode_lqh_key_conf(s);
    EXPECT_TRUE(conf);
    out.ok = true;
    out.data_sent_to_api = conf->data_sent_to_api;
    out.unique_before.assign(conf->unique_before.begin(), conf->unique_before.end());
    out.unique_after.assign(conf->unique_after.begin(), conf->unique_after.end());
    if (!conf->data_sent_to_api) {
      out.values = decode_values(conf->data);
      out.raw_values.assign(conf->data.begin(), conf->data.end());
      return out;
    }
    const Captured d = h_.api().take([&](const Captured& x) {
      if (x.number() != gsn::kKeyData) return false;
      auto k = decode_key_data(x.signal());
      return k && k->op_index == op;
    });
    if (!d.frame.empty()) {
      const auto values = decode_key_data(d.signal())->values;
      out.values = decode_values(values);
      out.raw_values.assign(values.begin(), values.end());
    }
    return out;
  }

  static bool answers(const Captured& x, uint32_t op) {
    if (x.number() == gsn::kLqhKeyConf) {
      auto m = decode_lqh_key_conf(x.signal());
      return m && m->tc_op == op;
    }
    if (x.number() == gsn::kLqhKeyRef) {
      auto m = decode_lqh_key_ref(x.signal());
      return m && m->tc_op == op;
    }
    return false;
  }

  Harness& h_;
  TableDef table_;
  KeyCodec pk_;
  uint32_t next_op_ = 0;
};

// ---- scans -------------------------------------------------------------------------------------

struct ScanSpec {
  uint32_t index_id = 0;  // with ordered
  bool ordered = false;
  std::vector<std::byte> bounds, filter, columns;
  uint32_t batch_rows = 64;
};

struct ScanResult {
  std::vector<RowValues> rows;  // in the order received
  ErrorCode error = ErrorCode::kNone;
  uint32_t rounds = 0;
  uint32_t messages = 0;
  std::size_t largest_message = 0;  // bytes of the largest ScanRows frame
};

// Scans one partition in rounds: `between(round)` runs after each round that
// did not finish (to change rows between rounds); it may return false to
// close the scan there.
inline ScanResult scan_partition(Harness& h, const TableDef& t, uint32_t partition, const ScanSpec& spec,
                                 const std::function<bool(uint32_t)>& between = {}) {
  static uint32_t next_scan = 1;
  const uint32_t id = next_scan++;
  const uint16_t ldm = static_cast<uint16_t>(partition % h.ldm_count());
  ScanFragReq r;
  r.tc_scan = id;
  r.table_id = t.table_id;
  r.table_version = t.version;
  r.index_id = spec.index_id;
  r.flags = spec.ordered ? kScanFlagOrderedIndex : 0;
  r.partition = partition;
  r.batch_rows = spec.batch_rows;
  r.api_node = kSelf;
  r.api_conn = id;
  r.scan_id = id;
  r.bounds = spec.bounds;
  r.filter = spec.filter;
  r.columns = spec.columns;
  h.send(ldm, encode(r));
  ScanResult result;
  for (;;) {
    const Captured c = h.tc().take([&](const Captured& x) {
      if (x.number() == gsn::kScanFragConf) return decode_scan_frag_conf(x.signal())->tc_scan == id;
      if (x.number() == gsn::kScanFragRef) return decode_scan_frag_ref(x.signal())->tc_scan == id;
      return false;
    });
    if (c.frame.empty()) return result;
    if (c.number() == gsn::kScanFragRef) {
      result.error = decode_scan_frag_ref(c.signal())->error;
      return result;
    }
    const ScanFragConf conf = decode_scan_frag_conf(c.signal()).value();
    EXPECT_EQ(conf.partition, partition);
    EXPECT_LE(conf.rows, spec.batch_rows);
    ++result.rounds;
    const auto messages = h.api().drain(
        [&](const Captured& x) { return x.number() == gsn::kScanRows && decode_scan_rows(x.signal())->scan_id == id; });
    EXPECT_EQ(messages.size(), conf.messages);
    uint32_t rows = 0;
    for (const Captured& m : messages) {
      result.largest_message = std::max(result.largest_message, m.frame.size());
      const ScanRows sr = decode_scan_rows(m.signal()).value();
      EXPECT_GT(sr.rows, 0u);
      append_scan_rows(sr, result.rows);
      rows += sr.rows;
    }
    result.messages += conf.messages;
    EXPECT_EQ(rows, conf.rows);
    if (conf.finished) return result;
    const bool go_on = !between || between(result.rounds);
    const uint16_t next = go_on ? gsn::kScanFragNextReq : gsn::kScanFragCloseReq;
    h.send(ldm, encode(next, ScanFragNext{id, partition}));
    if (!go_on) {
      const Captured closed = h.tc().take([&](const Captured& x) {
        return x.number() == gsn::kScanFragConf && decode_scan_frag_conf(x.signal())->tc_scan == id;
      });
      const ScanFragConf cc = decode_scan_frag_conf(closed.signal()).value();
      EXPECT_TRUE(cc.finished);
      EXPECT_EQ(cc.rows, 0u);
      return result;
    }
  }
}

inline ScanResult scan_table(Harness& h, const TableDef& t, const ScanSpec& spec) {
  ScanResult all;
  for (uint32_t p = 0; p < t.partitions; ++p) {
    ScanResult r = scan_partition(h, t, p, spec);
    if (r.error != ErrorCode::kNone) all.error = r.error;
    all.rounds += r.rounds;
    all.messages += r.messages;
    all.largest_message = std::max(all.largest_message, r.largest_message);
    all.rows.insert(all.rows.end(), r.rows.begin(), r.rows.end());
  }
  return all;
}

inline std::vector<std::byte> bounds_section(const Bounds& b, const Values& lower, const Values& upper) {
  std::vector<std::byte> out(4);
  put_bounds_header(out, b);
  out.insert(out.end(), lower.bytes().begin(), lower.bytes().end());
  out.insert(out.end(), upper.bytes().begin(), upper.bytes().end());
  return out;
}

class Filter {
 public:
  Filter& add(uint16_t column, FilterOp op, const std::vector<std::byte>& value = {}, bool is_null = false) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + 4 + value_entry_bytes(value.size()));
    const std::size_t n = put_predicate(std::span(bytes_).subspan(at), column, op, is_null, value);
    bytes_.resize(at + n);
    return *this;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// The seed for randomized tests: FJORD_SEED if set, else random. Printed on failure.
inline uint64_t test_seed() {
  if (const char* s = std::getenv("FJORD_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

}  // namespace fjord::engine::ldm_test
