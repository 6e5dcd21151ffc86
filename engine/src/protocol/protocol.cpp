// Encoders and validating decoders for the engine's signals.
#include "fjord/engine/protocol.h"

#include <cstring>
#include <type_traits>

namespace fjord::engine::protocol {
namespace {

Status bad(uint16_t number, const std::string& what) {
  return Status(StatusCode::kProtocolError, "signal " + std::to_string(number) + ": " + what);
}

// What is wrong with a signal's shape, once shape() found it wrong.
[[gnu::cold]] Status shape_error(const Signal& s, uint16_t number, std::size_t words, std::size_t max_sections) {
  if (s.number() != number) return bad(s.number(), "expected signal " + std::to_string(number));
  if (s.word_count() != words)
    return bad(number, "has " + std::to_string(s.word_count()) + " data words, expected " + std::to_string(words));
  return bad(number, "has " + std::to_string(s.section_count()) + " sections, at most " + std::to_string(max_sections) +
                         " allowed");
}

// Checks a signal's shape: its number, exactly `words` data words, and at
// most `max_sections` sections. Inline, its Status built only on failure:
// in a decoder of every key operation the check is three compares.
inline Status shape(const Signal& s, uint16_t number, std::size_t words, std::size_t max_sections) {
  if (s.number() == number && s.word_count() == words && s.section_count() <= max_sections) [[likely]]
    return Status::ok();
  return shape_error(s, number, words, max_sections);
}

std::span<const std::byte> section_or_empty(const Signal& s, std::size_t i) {
  return i < s.section_count() ? s.section(i) : std::span<const std::byte>();
}

class Out {
 public:
  explicit Out(uint16_t number) { m_.number = number; }
  Out& w(uint32_t v) {
    FJORD_ASSERT(m_.word_count < frame::kMaxDataWords);
    m_.words[m_.word_count++] = v;
    return *this;
  }
  Out& tx(TxId t) { return w(t.hi()).w(t.lo()); }
  // Sections keep their position: an empty one in the middle is still sent.
  Out& sections(std::initializer_list<std::span<const std::byte>> list) {
    uint8_t last = 0;
    uint8_t i = 0;
    for (auto sec : list) {
      m_.sections[i++] = sec;
      if (!sec.empty()) last = i;
    }
    m_.section_count = last;
    return *this;
  }
  SignalOut done() const { return m_; }

 private:
  SignalOut m_;
};

template <typename E>
bool in_range(uint32_t v, E lo, E hi) {
  return v >= static_cast<uint32_t>(lo) && v <= static_cast<uint32_t>(hi);
}

uint32_t op_bits(OpType op, LockMode lock) { return static_cast<uint32_t>(op) | static_cast<uint32_t>(lock) << 8; }

[[gnu::cold]] std::string op_bits_fault(uint32_t word) {
  const uint32_t o = word & 0xFF;
  const uint32_t l = (word >> 8) & 0xFF;
  if (!in_range(o, OpType::kRead, OpType::kDelete)) return "operation type " + std::to_string(o);
  if (!in_range(l, LockMode::kCommitted, LockMode::kExclusive)) return "lock mode " + std::to_string(l);
  return "reserved operation bits set";
}
[[gnu::cold]] Status op_bits_error(uint16_t number, uint32_t word) { return bad(number, op_bits_fault(word)); }

// Inline, its Status built only on failure (as shape()).
inline Status read_op_bits(uint16_t number, uint32_t word, OpType& op, LockMode& lock) {
  const uint32_t o = word & 0xFF;
  const uint32_t l = (word >> 8) & 0xFF;
  if (!in_range(o, OpType::kRead, OpType::kDelete) || !in_range(l, LockMode::kCommitted, LockMode::kExclusive) ||
      (word >> 16) != 0) [[unlikely]]
    return op_bits_error(number, word);
  op = static_cast<OpType>(o);
  lock = static_cast<LockMode>(l);
  return Status::ok();
}

Status check_error_code(uint16_t number, uint32_t code) {
  if (code == 0) return bad(number, "error code 0 in a refusal");
  if (error_message(static_cast<ErrorCode>(code)).empty())
    return bad(number, "unknown error code " + std::to_string(code));
  return Status::ok();
}

Status check_node(uint16_t number, uint32_t node) {
  if (node == kNoNode || node > kMaxNodeId) return bad(number, "node id " + std::to_string(node) + " outside 1..255");
  return Status::ok();
}

}  // namespace

std::string_view error_message(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kNone: return "no error";
    case ErrorCode::kNoSuchRow: return "Tuple did not exist";
    case ErrorCode::kDuplicateKey: return "Tuple already existed when attempting to insert";
    case ErrorCode::kDuplicateUniqueKey: return "Duplicate value in unique index";
    case ErrorCode::kDeadlockTimeout: return "Time-out in NDB, probably caused by deadlock";
    case ErrorCode::kInactiveTimeout: return "Transaction had timed out (TransactionInactiveTimeout)";
    case ErrorCode::kOverload: return "Send buffers overloaded in the data node";
    case ErrorCode::kOutOfDataMemory: return "Out of memory in data node, table data (increase DataMemory)";
    case ErrorCode::kTooManyOperations: return "Out of operation records in transaction coordinator";
    case ErrorCode::kTooManyTransactions: return "Out of transaction records in transaction coordinator";
    case ErrorCode::kNoSuchTable: return "No such table existed";
    case ErrorCode::kSchemaVersion: return "Invalid schema object version";
    case ErrorCode::kTableExists: return "Schema object with given name already exists";
    case ErrorCode::kTableDropped: return "Table was dropped while the transaction was writing to it";
    case ErrorCode::kNoSuchIndex: return "Index not found";
    case ErrorCode::kBadRequest: return "Malformed or inconsistent request";
    case ErrorCode::kNodeFailure: return "Node failure caused abort of transaction";
    case ErrorCode::kUnknownTransaction: return "Unknown transaction (it was aborted)";
    case ErrorCode::kScanError: return "Scan failed";
    case ErrorCode::kTooManyScans:
      return "Too many active scans (MaxNoOfConcurrentScans per TC, MaxNoOfLocalScans per data node)";
    case ErrorCode::kIndexInconsistent:
      return "Inconsistency detected at index usage (a unique index disagrees with its table)";
  }
  return {};
}

std::string error_text(ErrorCode code) {
  return std::to_string(static_cast<uint32_t>(code)) + ": " + std::string(error_message(code));
}

const char* op_type_name(OpType type) noexcept {
  switch (type) {
    case OpType::kRead: return "read";
    case OpType::kInsert: return "insert";
    case OpType::kUpdate: return "update";
    case OpType::kWrite: return "write";
    case OpType::kDelete: return "delete";
  }
  return "?";
}

// ---- values -------------------------------------------------------------------

Status ValueCursor::error() const {
  const std::string column = std::to_string(column_);
  switch (problem_) {
    case Problem::kNone: return Status::ok();
    case Problem::kShortHeader: return Status(StatusCode::kProtocolError, "value entry shorter than its 8-byte header");
    case Problem::kBadFlags:
      return Status(StatusCode::kProtocolError,
                    "value entry for column " + column + " has flags " + std::to_string(flags_));
    case Problem::kNullWithLength:
      return Status(StatusCode::kProtocolError, "NULL value with length for column " + column);
    case Problem::kPastTheEnd:
      return Status(StatusCode::kProtocolError, "value for column " + column + " claims " + std::to_string(length_) +
                                                    " bytes, past the end of its section");
  }
  return Status(StatusCode::kInternal, "unknown value cursor problem");
}

// ---- key operations -------------------------------------------------------------

namespace {
// What a TcKeyReq must be, whether it came alone or in a train: checked
// inline, worded (tc_key_req_fault) only when it is not.
bool writes_values(OpType op) { return op == OpType::kInsert || op == OpType::kUpdate || op == OpType::kWrite; }
inline bool tc_key_req_ok(const TcKeyReq& m) {
  return (m.flags & ~kKnownTcKeyFlags) == 0 && (!(m.flags & kFlagCommit) || (m.flags & kFlagExecute)) &&
         (!(m.flags & kFlagViaUnique) || m.op == OpType::kRead) && !m.key.empty() && m.columns.size() % 2 == 0 &&
         (writes_values(m.op) || m.values.empty());
}
[[gnu::cold]] std::string tc_key_req_fault(const TcKeyReq& m) {
  if ((m.flags & ~kKnownTcKeyFlags) != 0) return "unknown flags " + std::to_string(m.flags);
  if ((m.flags & kFlagCommit) && !(m.flags & kFlagExecute)) return "commit flag without execute";
  if ((m.flags & kFlagViaUnique) && m.op != OpType::kRead) return "unique-key access is read-only";
  if (m.key.empty()) return "no key values";
  if (m.columns.size() % 2 != 0) return "column list of odd length";
  return std::string(op_type_name(m.op)) + " carries values";
}

}  // namespace

SignalOut encode(const TcKeyReq& m) {
  return Out(gsn::kTcKeyReq)
      .w(m.api_conn)
      .tx(m.tx)
      .w(m.table_id)
      .w(m.table_version)
      .w(op_bits(m.op, m.lock))
      .w(m.flags)
      .w(m.op_index)
      .w(m.index_id)
      .w(m.batch_ops)
      .sections({m.key, m.values, m.columns})
      .done();
}

// TC's hot path decodes into its own TcKeyReq: no Result to build and copy.
Status decode_tc_key_req(const Signal& s, TcKeyReq& m) {
  if (Status st = shape(s, gsn::kTcKeyReq, 10, 3); !st) return st;
  m.api_conn = s.word(0);
  m.tx = TxId::from(s.word(1), s.word(2));
  m.table_id = s.word(3);
  m.table_version = s.word(4);
  if (Status st = read_op_bits(gsn::kTcKeyReq, s.word(5), m.op, m.lock); !st) return st;
  m.flags = s.word(6);
  m.op_index = s.word(7);
  m.index_id = s.word(8);
  m.batch_ops = s.word(9);
  m.key = section_or_empty(s, 0);
  m.values = section_or_empty(s, 1);
  m.columns = section_or_empty(s, 2);
  if (!tc_key_req_ok(m)) [[unlikely]]
    return bad(gsn::kTcKeyReq, tc_key_req_fault(m));
  return Status::ok();
}

Result<TcKeyReq> decode_tc_key_req(const Signal& s) {
  TcKeyReq m;
  if (Status st = decode_tc_key_req(s, m); !st) return st;
  return m;
}

bool peek_tc_key_read(const Signal& s, TcKeyReadRoute& out) {
  if (s.number() != gsn::kTcKeyReq || s.word_count() != 10 || s.section_count() == 0) return false;  // the shape
  if (s.word(5) != op_bits(OpType::kRead, LockMode::kCommitted)) return false;
  out = {s.word(3), (s.word(6) & kFlagViaUnique) != 0 ? s.word(8) : 0, s.section(0)};
  return true;
}

SignalOut encode(const TcKeyConf& m) {
  return Out(gsn::kTcKeyConf).w(m.api_conn).tx(m.tx).w(m.ops).w(m.data_messages).w(m.committed ? 1 : 0).done();
}

Result<TcKeyConf> decode_tc_key_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kTcKeyConf, 6, 0); !st) return st;
  if (s.word(5) > 1) return bad(gsn::kTcKeyConf, "committed flag " + std::to_string(s.word(5)));
  return TcKeyConf{s.word(0), TxId::from(s.word(1), s.word(2)), s.word(3), s.word(4), s.word(5) == 1};
}

SignalOut encode(const TcKeyRef& m) {
  return Out(gsn::kTcKeyRef).w(m.api_conn).tx(m.tx).w(m.op_index).w(static_cast<uint32_t>(m.error)).done();
}

Result<TcKeyRef> decode_tc_key_ref(const Signal& s) {
  if (Status st = shape(s, gsn::kTcKeyRef, 5, 0); !st) return st;
  if (Status st = check_error_code(gsn::kTcKeyRef, s.word(4)); !st) return st;
  return TcKeyRef{s.word(0), TxId::from(s.word(1), s.word(2)), s.word(3), static_cast<ErrorCode>(s.word(4))};
}

SignalOut encode(const KeyData& m) {
  if (!m.ends_batch) return Out(gsn::kKeyData).w(m.api_conn).tx(m.tx).w(m.op_index).sections({m.values}).done();
  FJORD_ASSERT(m.data_messages >= 1);
  return Out(gsn::kKeyDataConf)
      .w(m.api_conn)
      .tx(m.tx)
      .w(m.op_index)
      .w(m.batch_ops)
      .w(m.data_messages)
      .sections({m.values})
      .done();
}

Result<KeyData> decode_key_data(const Signal& s) {
  const bool ends_batch = s.number() == gsn::kKeyDataConf;
  if (Status st = shape(s, ends_batch ? gsn::kKeyDataConf : gsn::kKeyData, ends_batch ? 6 : 4, 1); !st) return st;
  KeyData m{s.word(0), TxId::from(s.word(1), s.word(2)), s.word(3), section_or_empty(s, 0)};
  if (ends_batch) {
    m.ends_batch = true;
    m.batch_ops = s.word(4);
    m.data_messages = s.word(5);
    if (m.data_messages == 0) return bad(gsn::kKeyDataConf, "ends a batch but counts no data message, itself included");
  }
  return m;
}

// ---- trains ----------------------------------------------------------------------

std::size_t max_read_bytes(const TableDef& table) {
  std::size_t n = 0;
  for (const ColumnDef& column : table.columns) n += value_entry_bytes(max_value_bytes(column));
  return n;
}

SignalOut encode(const TcKeyTrain& m) {
  return Out(gsn::kTcKeyTrain).w(m.api_conn).tx(m.tx).w(m.count).sections({m.records}).done();
}

TcKeyTrainCursor::TcKeyTrainCursor(const Signal& s) {
  if (Status st = shape(s, gsn::kTcKeyTrain, 4, 1); !st) {
    error_ = st;
    return;
  }
  train_ = {s.word(0), TxId::from(s.word(1), s.word(2)), s.word(3), section_or_empty(s, 0)};
  rest_ = train_.records;
  if (train_.count == 0 || train_.count > kMaxTrainOps)
    (void)fail("train of " + std::to_string(train_.count) + " operations, expected 1.." + std::to_string(kMaxTrainOps));
}

bool TcKeyTrainCursor::fail(const std::string& what) {
  error_ = bad(gsn::kTcKeyTrain, what);
  rest_ = {};
  read_ = train_.count;
  return false;
}

bool TcKeyTrainCursor::fail_record(const std::string& what) {
  return fail("record " + std::to_string(read_) + ": " + what);
}

bool TcKeyTrainCursor::next(TcKeyReq& m) {
  if (!error_.is_ok()) return false;
  if (read_ == train_.count) {
    if (!rest_.empty()) return fail(std::to_string(rest_.size()) + " bytes after the last record");
    return false;
  }
  if (rest_.size() < kTrainRecordHeaderBytes)
    return fail_record("section ends inside the header (" + std::to_string(rest_.size()) + " bytes left)");
  uint32_t head[10];
  std::memcpy(head, rest_.data(), sizeof head);
  m.api_conn = train_.api_conn;
  m.tx = train_.tx;
  m.table_id = head[0];
  m.table_version = head[1];
  if (Status st = read_op_bits(gsn::kTcKeyTrain, head[2], m.op, m.lock); !st) [[unlikely]]
    return fail_record(op_bits_fault(head[2]));
  m.flags = head[3];
  m.op_index = head[4];
  m.index_id = head[5];
  m.batch_ops = head[6];
  // The three parts' padded lengths, summed in 64 bits (no wrap), against
  // what is left; which part runs past is worked out only for the error.
  const uint64_t key_at = kTrainRecordHeaderBytes;
  const uint64_t values_at = key_at + padded_to_4(uint64_t{head[7]});
  const uint64_t columns_at = values_at + padded_to_4(uint64_t{head[8]});
  const uint64_t at = columns_at + padded_to_4(uint64_t{head[9]});
  if (at > rest_.size()) [[unlikely]] {
    if (values_at > rest_.size())
      return fail_record("key of " + std::to_string(head[7]) + " bytes runs past the section");
    if (columns_at > rest_.size())
      return fail_record("values of " + std::to_string(head[8]) + " bytes runs past the section");
    return fail_record("column list of " + std::to_string(head[9]) + " bytes runs past the section");
  }
  m.key = rest_.subspan(key_at, head[7]);
  m.values = rest_.subspan(values_at, head[8]);
  m.columns = rest_.subspan(columns_at, head[9]);
  if (!tc_key_req_ok(m)) [[unlikely]]
    return fail_record(tc_key_req_fault(m));
  if ((m.flags & kFlagStartTx) && read_ != 0) return fail_record("starts the transaction but is not the first");
  if ((m.flags & kFlagExecute) && read_ + 1 != train_.count) return fail_record("ends the batch but is not the last");
  rest_ = rest_.subspan(at);
  ++read_;
  return true;
}

SignalOut encode(const KeyDataTrain& m) {
  FJORD_ASSERT(!m.ends_batch || m.data_messages >= m.count);
  return Out(gsn::kKeyDataTrain)
      .w(m.api_conn)
      .tx(m.tx)
      .w(m.count)
      .w(m.ends_batch ? 1 : 0)
      .w(m.batch_ops)
      .w(m.data_messages)
      .sections({m.records})
      .done();
}

Result<KeyDataTrain> decode_key_data_train(const Signal& s) {
  if (Status st = shape(s, gsn::kKeyDataTrain, 7, 1); !st) return st;
  KeyDataTrain m{
      s.word(0), TxId::from(s.word(1), s.word(2)), s.word(3), false, s.word(5), s.word(6), section_or_empty(s, 0)};
  if (s.word(4) > 1) return bad(gsn::kKeyDataTrain, "ends_batch flag " + std::to_string(s.word(4)));
  m.ends_batch = s.word(4) == 1;
  if (m.count == 0 || m.count > kMaxTrainOps)
    return bad(gsn::kKeyDataTrain,
               "train of " + std::to_string(m.count) + " records, expected 1.." + std::to_string(kMaxTrainOps));
  if (m.ends_batch && m.data_messages < m.count)
    return bad(gsn::kKeyDataTrain, "ends a batch of " + std::to_string(m.data_messages) +
                                       " data messages but carries " + std::to_string(m.count));
  std::span<const std::byte> rest = m.records;
  for (uint32_t i = 0; i < m.count; ++i) {
    if (rest.size() < kKeyDataRecordHeaderBytes)
      return bad(gsn::kKeyDataTrain, "record " + std::to_string(i) + ": section ends inside its header");
    uint32_t n;
    std::memcpy(&n, rest.data() + 4, 4);
    if (n % 4 != 0 || n > rest.size() - kKeyDataRecordHeaderBytes)
      return bad(gsn::kKeyDataTrain, "record " + std::to_string(i) + ": " + std::to_string(n) +
                                         " value bytes, not a multiple of 4 or past the section");
    rest = rest.subspan(kKeyDataRecordHeaderBytes + n);
  }
  if (!rest.empty()) return bad(gsn::kKeyDataTrain, std::to_string(rest.size()) + " bytes after the last record");
  return m;
}

SignalOut encode(const TcTxMessage& m) {
  FJORD_ASSERT(m.number == gsn::kTcCommitReq || m.number == gsn::kTcRollbackReq || m.number == gsn::kTcRollbackConf);
  return Out(m.number).w(m.api_conn).tx(m.tx).done();
}

Result<TcTxMessage> decode_tc_tx_message(const Signal& s) {
  const uint16_t n = s.number();
  if (n != gsn::kTcCommitReq && n != gsn::kTcRollbackReq && n != gsn::kTcRollbackConf)
    return bad(n, "not a commit/rollback message");
  if (Status st = shape(s, n, 3, 0); !st) return st;
  return TcTxMessage{n, s.word(0), TxId::from(s.word(1), s.word(2))};
}

SignalOut encode(const TcAbortRep& m) {
  return Out(gsn::kTcAbortRep).w(m.api_conn).tx(m.tx).w(static_cast<uint32_t>(m.error)).done();
}

Result<TcAbortRep> decode_tc_abort_rep(const Signal& s) {
  if (Status st = shape(s, gsn::kTcAbortRep, 4, 0); !st) return st;
  if (Status st = check_error_code(gsn::kTcAbortRep, s.word(3)); !st) return st;
  return TcAbortRep{s.word(0), TxId::from(s.word(1), s.word(2)), static_cast<ErrorCode>(s.word(3))};
}

// ---- TC <-> LDM ---------------------------------------------------------------------

SignalOut encode(const LqhKeyReq& m) {
  return Out(gsn::kLqhKeyReq)
      .w(m.tc_op)
      .tx(m.tx)
      .w(m.table_id)
      .w(m.table_version)
      .w(op_bits(m.op, m.lock))
      .w(static_cast<uint32_t>(m.result_to))
      .w(m.partition)
      .w(m.api_node)
      .w(m.api_conn)
      .w(m.op_index)
      .w(m.key_hash)
      .sections({m.key, m.values, m.columns})
      .done();
}

Result<LqhKeyReq> decode_lqh_key_req(const Signal& s) {
  if (Status st = shape(s, gsn::kLqhKeyReq, 12, 3); !st) return st;
  LqhKeyReq m;
  m.tc_op = s.word(0);
  m.tx = TxId::from(s.word(1), s.word(2));
  m.table_id = s.word(3);
  m.table_version = s.word(4);
  if (Status st = read_op_bits(gsn::kLqhKeyReq, s.word(5), m.op, m.lock); !st) return st;
  if (s.word(6) > 1) return bad(gsn::kLqhKeyReq, "result destination " + std::to_string(s.word(6)));
  m.result_to = static_cast<ResultTo>(s.word(6));
  m.partition = s.word(7);
  if (m.result_to == ResultTo::kApi)
    if (Status st = check_node(gsn::kLqhKeyReq, s.word(8)); !st) return st;
  m.api_node = static_cast<NodeId>(s.word(8));
  m.api_conn = s.word(9);
  m.op_index = s.word(10);
  m.key_hash = s.word(11);
  m.key = section_or_empty(s, 0);
  m.values = section_or_empty(s, 1);
  m.columns = section_or_empty(s, 2);
  if (m.key.empty()) return bad(gsn::kLqhKeyReq, "no key values");
  if (m.columns.size() % 2 != 0) return bad(gsn::kLqhKeyReq, "column list of odd length");
  return m;
}

bool peek_lqh_key_route(const Signal& s, LqhKeyRoute& out) {
  if (s.number() != gsn::kLqhKeyReq || s.word_count() != 12) return false;  // decode_lqh_key_req's shape
  out = {s.word(3), s.word(7), s.word(11)};
  return true;
}

SignalOut encode(const LqhKeyConf& m) {
  return Out(gsn::kLqhKeyConf)
      .w(m.tc_op)
      .tx(m.tx)
      .w(m.data_sent_to_api ? 1 : 0)
      .sections({m.data, m.unique_before, m.unique_after})
      .done();
}

Result<LqhKeyConf> decode_lqh_key_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kLqhKeyConf, 4, 3); !st) return st;
  if (s.word(3) > 1) return bad(gsn::kLqhKeyConf, "data flag " + std::to_string(s.word(3)));
  LqhKeyConf m;
  m.tc_op = s.word(0);
  m.tx = TxId::from(s.word(1), s.word(2));
  m.data_sent_to_api = s.word(3) == 1;
  m.data = section_or_empty(s, 0);
  m.unique_before = section_or_empty(s, 1);
  m.unique_after = section_or_empty(s, 2);
  return m;
}

SignalOut encode(const LqhKeyRef& m) {
  return Out(gsn::kLqhKeyRef).w(m.tc_op).tx(m.tx).w(static_cast<uint32_t>(m.error)).done();
}

Result<LqhKeyRef> decode_lqh_key_ref(const Signal& s) {
  if (Status st = shape(s, gsn::kLqhKeyRef, 4, 0); !st) return st;
  if (Status st = check_error_code(gsn::kLqhKeyRef, s.word(3)); !st) return st;
  return LqhKeyRef{s.word(0), TxId::from(s.word(1), s.word(2)), static_cast<ErrorCode>(s.word(3))};
}

SignalOut encode(uint16_t number, const LqhTxReq& m) {
  FJORD_ASSERT(number == gsn::kLqhCommitReq || number == gsn::kLqhAbortReq);
  return Out(number).tx(m.tx).w(m.tc_instance).done();
}

Result<LqhTxReq> decode_lqh_tx_req(const Signal& s) {
  const uint16_t n = s.number();
  if (n != gsn::kLqhCommitReq && n != gsn::kLqhAbortReq) return bad(n, "not a commit or abort request");
  if (Status st = shape(s, n, 3, 0); !st) return st;
  if (s.word(2) > 0xFFFF) return bad(n, "TC instance " + std::to_string(s.word(2)));
  return LqhTxReq{TxId::from(s.word(0), s.word(1)), static_cast<uint16_t>(s.word(2))};
}

SignalOut encode(uint16_t number, const LqhTxConf& m) {
  FJORD_ASSERT(number == gsn::kLqhCommitConf || number == gsn::kLqhAbortConf);
  return Out(number).tx(m.tx).w(m.ldm_instance).w(m.ops).done();
}

Result<LqhTxConf> decode_lqh_tx_conf(const Signal& s) {
  const uint16_t n = s.number();
  if (n != gsn::kLqhCommitConf && n != gsn::kLqhAbortConf) return bad(n, "not a commit or abort confirmation");
  if (Status st = shape(s, n, 4, 0); !st) return st;
  if (s.word(2) > 0xFFFF) return bad(n, "LDM instance " + std::to_string(s.word(2)));
  return LqhTxConf{TxId::from(s.word(0), s.word(1)), static_cast<uint16_t>(s.word(2)), s.word(3)};
}

// ---- scans --------------------------------------------------------------------------

SignalOut encode(const ScanReq& m) {
  return Out(gsn::kScanReq)
      .w(m.api_conn)
      .tx(m.tx)
      .w(m.scan_id)
      .w(m.table_id)
      .w(m.table_version)
      .w(m.index_id)
      .w(m.flags)
      .w(static_cast<uint32_t>(m.lock))
      .w(m.batch_rows)
      .sections({m.bounds, m.filter, m.columns})
      .done();
}

namespace {
Status check_scan_common(uint16_t number, uint32_t flags, uint32_t lock, uint32_t batch_rows,
                         std::span<const std::byte> columns) {
  if ((flags & ~kKnownScanFlags) != 0) return bad(number, "unknown scan flags " + std::to_string(flags));
  if (!in_range(lock, LockMode::kCommitted, LockMode::kExclusive))
    return bad(number, "lock mode " + std::to_string(lock));
  if (batch_rows == 0 || batch_rows > kMaxScanBatchRows)
    return bad(number,
               "batch of " + std::to_string(batch_rows) + " rows; accepted 1.." + std::to_string(kMaxScanBatchRows));
  if (columns.size() % 2 != 0) return bad(number, "column list of odd length");
  return Status::ok();
}
}  // namespace

Result<ScanReq> decode_scan_req(const Signal& s) {
  if (Status st = shape(s, gsn::kScanReq, 10, 3); !st) return st;
  ScanReq m;
  m.api_conn = s.word(0);
  m.tx = TxId::from(s.word(1), s.word(2));
  m.scan_id = s.word(3);
  m.table_id = s.word(4);
  m.table_version = s.word(5);
  m.index_id = s.word(6);
  m.flags = s.word(7);
  m.batch_rows = s.word(9);
  m.bounds = section_or_empty(s, 0);
  m.filter = section_or_empty(s, 1);
  m.columns = section_or_empty(s, 2);
  if (Status st = check_scan_common(gsn::kScanReq, m.flags, s.word(8), m.batch_rows, m.columns); !st) return st;
  m.lock = static_cast<LockMode>(s.word(8));
  if (!(m.flags & kScanFlagOrderedIndex) && !m.bounds.empty()) return bad(gsn::kScanReq, "bounds on a table scan");
  return m;
}

SignalOut encode(const ScanFragReq& m) {
  return Out(gsn::kScanFragReq)
      .w(m.tc_scan)
      .tx(m.tx)
      .w(m.table_id)
      .w(m.table_version)
      .w(m.index_id)
      .w(m.flags)
      .w(static_cast<uint32_t>(m.lock))
      .w(m.partition)
      .w(m.batch_rows)
      .w(m.api_node)
      .w(m.api_conn)
      .w(m.scan_id)
      .sections({m.bounds, m.filter, m.columns})
      .done();
}

Result<ScanFragReq> decode_scan_frag_req(const Signal& s) {
  if (Status st = shape(s, gsn::kScanFragReq, 13, 3); !st) return st;
  ScanFragReq m;
  m.tc_scan = s.word(0);
  m.tx = TxId::from(s.word(1), s.word(2));
  m.table_id = s.word(3);
  m.table_version = s.word(4);
  m.index_id = s.word(5);
  m.flags = s.word(6);
  m.partition = s.word(8);
  m.batch_rows = s.word(9);
  if (Status st = check_node(gsn::kScanFragReq, s.word(10)); !st) return st;
  m.api_node = static_cast<NodeId>(s.word(10));
  m.api_conn = s.word(11);
  m.scan_id = s.word(12);
  m.bounds = section_or_empty(s, 0);
  m.filter = section_or_empty(s, 1);
  m.columns = section_or_empty(s, 2);
  if (Status st = check_scan_common(gsn::kScanFragReq, m.flags, s.word(7), m.batch_rows, m.columns); !st) return st;
  m.lock = static_cast<LockMode>(s.word(7));
  return m;
}

SignalOut encode(uint16_t number, const ScanFragNext& m) {
  FJORD_ASSERT(number == gsn::kScanFragNextReq || number == gsn::kScanFragCloseReq);
  return Out(number).w(m.tc_scan).w(m.partition).done();
}

Result<ScanFragNext> decode_scan_frag_next(const Signal& s) {
  const uint16_t n = s.number();
  if (n != gsn::kScanFragNextReq && n != gsn::kScanFragCloseReq) return bad(n, "not a scan continue/close");
  if (Status st = shape(s, n, 2, 0); !st) return st;
  return ScanFragNext{s.word(0), s.word(1)};
}

SignalOut encode(const ScanFragConf& m) {
  return Out(gsn::kScanFragConf).w(m.tc_scan).w(m.partition).w(m.rows).w(m.messages).w(m.finished ? 1 : 0).done();
}

Result<ScanFragConf> decode_scan_frag_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kScanFragConf, 5, 0); !st) return st;
  if (s.word(4) > 1) return bad(gsn::kScanFragConf, "finished flag " + std::to_string(s.word(4)));
  return ScanFragConf{s.word(0), s.word(1), s.word(2), s.word(3), s.word(4) == 1};
}

SignalOut encode(const ScanFragRef& m) {
  return Out(gsn::kScanFragRef).w(m.tc_scan).w(m.partition).w(static_cast<uint32_t>(m.error)).done();
}

Result<ScanFragRef> decode_scan_frag_ref(const Signal& s) {
  if (Status st = shape(s, gsn::kScanFragRef, 3, 0); !st) return st;
  if (Status st = check_error_code(gsn::kScanFragRef, s.word(2)); !st) return st;
  return ScanFragRef{s.word(0), s.word(1), static_cast<ErrorCode>(s.word(2))};
}

SignalOut encode(const ScanRows& m) {
  return Out(gsn::kScanRows).w(m.api_conn).w(m.scan_id).w(m.rows).sections({m.data}).done();
}

Result<ScanRows> decode_scan_rows(const Signal& s) {
  if (Status st = shape(s, gsn::kScanRows, 3, 1); !st) return st;
  ScanRows m{s.word(0), s.word(1), s.word(2), section_or_empty(s, 0)};
  // Each row: u32 length then that many bytes of value entries.
  std::span<const std::byte> rest = m.data;
  for (uint32_t i = 0; i < m.rows; ++i) {
    uint32_t len;
    if (rest.size() < 4) return bad(gsn::kScanRows, "row " + std::to_string(i) + " missing");
    std::memcpy(&len, rest.data(), 4);
    if (len > rest.size() - 4) return bad(gsn::kScanRows, "row " + std::to_string(i) + " longer than its section");
    rest = rest.subspan(4 + len);
  }
  if (!rest.empty()) return bad(gsn::kScanRows, "bytes after the last row");
  return m;
}

SignalOut encode(const ScanConf& m) {
  return Out(gsn::kScanConf).w(m.api_conn).w(m.scan_id).w(m.rows).w(m.messages).w(m.finished ? 1 : 0).done();
}

Result<ScanConf> decode_scan_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kScanConf, 5, 0); !st) return st;
  if (s.word(4) > 1) return bad(gsn::kScanConf, "finished flag " + std::to_string(s.word(4)));
  return ScanConf{s.word(0), s.word(1), s.word(2), s.word(3), s.word(4) == 1};
}

SignalOut encode(const ScanRef& m) {
  return Out(gsn::kScanRef).w(m.api_conn).w(m.scan_id).w(static_cast<uint32_t>(m.error)).done();
}

Result<ScanRef> decode_scan_ref(const Signal& s) {
  if (Status st = shape(s, gsn::kScanRef, 3, 0); !st) return st;
  if (Status st = check_error_code(gsn::kScanRef, s.word(2)); !st) return st;
  return ScanRef{s.word(0), s.word(1), static_cast<ErrorCode>(s.word(2))};
}

SignalOut encode(uint16_t number, const ScanNext& m) {
  FJORD_ASSERT(number == gsn::kScanNextReq || number == gsn::kScanCloseReq);
  return Out(number).w(m.api_conn).w(m.scan_id).done();
}

Result<ScanNext> decode_scan_next(const Signal& s) {
  const uint16_t n = s.number();
  if (n != gsn::kScanNextReq && n != gsn::kScanCloseReq) return bad(n, "not a scan next/close request");
  if (Status st = shape(s, n, 2, 0); !st) return st;
  return ScanNext{s.word(0), s.word(1)};
}

SignalOut encode(const SchemaRef& m) {
  return Out(gsn::kSchemaRef).w(m.request_id).w(static_cast<uint32_t>(m.error)).done();
}

Result<SchemaRef> decode_schema_ref(const Signal& s) {
  if (Status st = shape(s, gsn::kSchemaRef, 2, 0); !st) return st;
  if (Status st = check_error_code(gsn::kSchemaRef, s.word(1)); !st) return st;
  return SchemaRef{s.word(0), static_cast<ErrorCode>(s.word(1))};
}

SignalOut encode(const SchemaMessage& m) {
  FJORD_ASSERT(m.number >= gsn::kCreateTableReq && m.number <= gsn::kGetTableConf);
  return Out(m.number).w(m.request_id).sections({m.payload}).done();
}

Result<SchemaMessage> decode_schema_message(const Signal& s) {
  const uint16_t n = s.number();
  if (n < gsn::kCreateTableReq || n > gsn::kGetTableConf) return bad(n, "not a schema request or confirmation");
  if (Status st = shape(s, n, 1, 1); !st) return st;
  SchemaMessage m{n, s.word(0), section_or_empty(s, 0)};
  const bool needs_payload = n != gsn::kDropTableConf;
  if (needs_payload && m.payload.empty()) return bad(n, "schema message without its payload");
  if ((n == gsn::kDropTableReq || n == gsn::kGetTableReq) && m.payload.size() > 128)
    return bad(n, "table name too long");
  return m;
}

SignalOut encode(const SchemaInstall& m) {
  return Out(gsn::kSchemaInstall).w(m.install_id).w(m.table_id).w(m.drop ? 1 : 0).sections({m.table}).done();
}

Result<SchemaInstall> decode_schema_install(const Signal& s) {
  if (Status st = shape(s, gsn::kSchemaInstall, 3, 1); !st) return st;
  if (s.word(2) > 1) return bad(gsn::kSchemaInstall, "drop flag " + std::to_string(s.word(2)));
  SchemaInstall m{s.word(0), s.word(1), s.word(2) == 1, section_or_empty(s, 0)};
  if (m.drop != m.table.empty()) return bad(gsn::kSchemaInstall, "install needs a table, drop takes none");
  return m;
}

SignalOut encode(const SchemaInstallConf& m) { return Out(gsn::kSchemaInstallConf).w(m.install_id).done(); }

Result<SchemaInstallConf> decode_schema_install_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kSchemaInstallConf, 1, 0); !st) return st;
  return SchemaInstallConf{s.word(0)};
}

SignalOut encode(const ApiRegConf& m) {
  return Out(gsn::kApiRegConf).w(m.request_id).w(m.tc_instances).w(m.ldm_instances).w(m.default_partitions).done();
}

Result<ApiRegConf> decode_api_reg_conf(const Signal& s) {
  if (Status st = shape(s, gsn::kApiRegConf, 4, 0); !st) return st;
  if (s.word(1) == 0 || s.word(1) > 64 || s.word(2) == 0 || s.word(2) > 64)
    return bad(gsn::kApiRegConf, "instance counts out of range");
  if (s.word(3) == 0 || s.word(3) > kMaxPartitions) return bad(gsn::kApiRegConf, "partition count out of range");
  return ApiRegConf{s.word(0), static_cast<uint16_t>(s.word(1)), static_cast<uint16_t>(s.word(2)), s.word(3)};
}

// ---- keys ---------------------------------------------------------------------------

namespace {
// Room for a key's values, left uninitialised: ValueRef's member initialisers
// would make a plain array zero 384 bytes (a `rep stos`, 45 % of this
// function on every pk read, which TC and LDM each encode). Each slot is
// assigned before it is read (`seen`).
union KeyValues {
  KeyValues() {}  // leaves the slots uninitialised
  ValueRef slot[kMaxKeyColumns];
};
static_assert(std::is_trivially_copy_assignable_v<ValueRef> && std::is_trivially_destructible_v<ValueRef>);
}  // namespace

// encode_key_section() for a key of non-nullable integer columns (most
// keys): each entry goes straight to its column's place in `out`. False on
// anything unusual (a malformed or NULL entry, a column that is not a key
// column or comes twice or not at all, a wrong width), which the general
// path then names.
bool encode_integer_key_section(const KeyCodec& codec, std::span<const std::byte> section, std::span<std::byte> out) {
  const std::span<const KeyCodec::IntegerColumn> columns = codec.integer_columns();
  // An entry's header: u16 column, u16 flags, u32 length.
  uint16_t column;
  uint16_t flags;
  uint32_t length;
  const auto read_header = [&](const std::byte* at) {
    std::memcpy(&column, at, 2);
    std::memcpy(&flags, at + 2, 2);
    std::memcpy(&length, at + 4, 4);
  };
  if (columns.size() == 1) {  // the commonest key: its one entry's header and value checked at once
    const KeyCodec::IntegerColumn& c = columns[0];
    if (section.size() != std::size_t{8} + c.width) return false;
    read_header(section.data());
    if (column != c.position || flags != 0 || length != c.width) return false;
    KeyCodec::put_integer(c, section.data() + 8, out.data());
    return true;
  }
  static_assert(kMaxKeyColumns <= 32, "one bit per key column");
  uint32_t seen = 0;
  const std::byte* p = section.data();
  std::size_t rest = section.size();
  while (rest != 0) {
    if (rest < 8) return false;
    read_header(p);
    uint32_t slot = 0;
    while (slot < columns.size() && columns[slot].position != column) ++slot;
    if (slot == columns.size() || flags != 0 || (seen >> slot & 1) != 0) return false;
    if (length != columns[slot].width || rest < 8 + length) return false;
    KeyCodec::put_integer(columns[slot], p + 8, out.data());
    seen |= 1u << slot;
    p += 8 + length;  // 4 or 8 value bytes: no padding
    rest -= 8 + length;
  }
  return seen == (columns.size() == 32 ? UINT32_MAX : (1u << columns.size()) - 1);
}

Result<uint32_t> encode_key_section(const KeyCodec& codec, std::span<const std::byte> section,
                                    std::span<std::byte> out) {
  if (encode_integer_key_fast(codec, section, out)) return codec.max_encoded_bytes();
  return encode_key_section_general(codec, section, out);
}

Result<uint32_t> encode_key_section_general(const KeyCodec& codec, std::span<const std::byte> section,
                                            std::span<std::byte> out) {
  KeyValues values;
  bool seen[kMaxKeyColumns] = {};
  const uint32_t n = codec.column_count();
  ValueCursor cursor(section);
  ValueEntry e;
  uint32_t given = 0;
  while (cursor.next(e)) {
    uint32_t slot = n;
    for (uint32_t i = 0; i < n; ++i)
      if (codec.column(i).position == e.column) slot = i;
    if (slot == n)
      return Status(StatusCode::kInvalidArgument,
                    codec.owner() + ": column " + std::to_string(e.column) + " is not a key column");
    if (seen[slot])
      return Status(StatusCode::kInvalidArgument,
                    codec.owner() + ": column '" + codec.column(slot).def.name + "' given twice");
    seen[slot] = true;
    values.slot[slot] = e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes);
    ++given;
  }
  if (!cursor.error().is_ok()) return cursor.error();
  if (given != n) {
    for (uint32_t i = 0; i < n; ++i)
      if (!seen[i])
        return Status(StatusCode::kInvalidArgument,
                      codec.owner() + ": no value for key column '" + codec.column(i).def.name + "'");
  }
  return codec.encode({values.slot, n}, out);
}

// ---- bounds and filters ---------------------------------------------------------------

std::size_t put_bounds_header(std::span<std::byte> out, const Bounds& b) {
  if (out.size() < 4) return 0;
  const uint8_t flags = (b.has_lower ? kBoundHasLower : 0) | (b.lower_inclusive ? kBoundLowerInclusive : 0) |
                        (b.has_upper ? kBoundHasUpper : 0) | (b.upper_inclusive ? kBoundUpperInclusive : 0);
  out[0] = std::byte{flags};
  out[1] = std::byte{b.lower_count};
  out[2] = std::byte{b.upper_count};
  out[3] = std::byte{0};
  return 4;
}

Result<Bounds> decode_bounds(std::span<const std::byte> section) {
  Bounds b;
  if (section.empty()) return b;  // no bounds: the whole index
  const auto fail = [](const std::string& what) { return Status(StatusCode::kProtocolError, "scan bounds: " + what); };
  if (section.size() < 4) return fail("shorter than the 4-byte header");
  const auto flags = static_cast<uint8_t>(section[0]);
  if (flags & ~0x0F) return fail("unknown flags");
  if (static_cast<uint8_t>(section[3]) != 0) return fail("reserved byte set");
  b.has_lower = flags & kBoundHasLower;
  b.lower_inclusive = flags & kBoundLowerInclusive;
  b.has_upper = flags & kBoundHasUpper;
  b.upper_inclusive = flags & kBoundUpperInclusive;
  b.lower_count = static_cast<uint8_t>(section[1]);
  b.upper_count = static_cast<uint8_t>(section[2]);
  if (!b.has_lower && (b.lower_count || b.lower_inclusive)) return fail("lower values without a lower bound");
  if (!b.has_upper && (b.upper_count || b.upper_inclusive)) return fail("upper values without an upper bound");
  if (b.lower_count > kMaxKeyColumns || b.upper_count > kMaxKeyColumns) return fail("more values than key columns");
  std::span<const std::byte> rest = section.subspan(4);
  ValueCursor cursor(rest);
  ValueEntry e;
  for (uint8_t i = 0; i < b.lower_count; ++i)
    if (!cursor.next(e)) return fail(cursor.error().is_ok() ? "missing lower values" : cursor.error().message());
  const std::size_t lower_bytes = rest.size() - cursor.remaining_bytes();
  b.lower = rest.first(lower_bytes);
  b.upper = rest.subspan(lower_bytes);
  ValueCursor up(b.upper);
  uint8_t n = 0;
  while (up.next(e)) ++n;
  if (!up.error().is_ok()) return fail(up.error().message());
  if (n != b.upper_count)
    return fail("upper value count " + std::to_string(n) + " != " + std::to_string(b.upper_count));
  return b;
}

std::size_t put_predicate(std::span<std::byte> out, uint16_t column, FilterOp op, bool is_null,
                          std::span<const std::byte> value) {
  if (out.size() < 4) return 0;
  std::memcpy(out.data(), &column, 2);
  out[2] = std::byte{static_cast<uint8_t>(op)};
  out[3] = std::byte{0};
  if (op == FilterOp::kIsNull || op == FilterOp::kIsNotNull) return 4;
  const std::size_t n = put_value(out.subspan(4), column, is_null, value);
  return n == 0 ? 0 : 4 + n;
}

bool FilterCursor::next(Predicate& out) {
  if (rest_.empty() || !error_.is_ok()) return false;
  if (rest_.size() < 4) {
    error_ = Status(StatusCode::kProtocolError, "filter predicate shorter than its header");
    return false;
  }
  std::memcpy(&out.column, rest_.data(), 2);
  const auto op = static_cast<uint8_t>(rest_[2]);
  if (!in_range(op, FilterOp::kEq, FilterOp::kIsNotNull) || static_cast<uint8_t>(rest_[3]) != 0) {
    error_ = Status(StatusCode::kProtocolError, "filter operator " + std::to_string(op) + " unknown");
    return false;
  }
  out.op = static_cast<FilterOp>(op);
  rest_ = rest_.subspan(4);
  if (out.op == FilterOp::kIsNull || out.op == FilterOp::kIsNotNull) return true;
  ValueCursor c(rest_);
  if (!c.next(out.value)) {
    error_ = c.error().is_ok() ? Status(StatusCode::kProtocolError, "filter predicate without its value") : c.error();
    return false;
  }
  if (out.value.column != out.column) {
    error_ = Status(StatusCode::kProtocolError, "filter value names another column");
    return false;
  }
  rest_ = rest_.subspan(value_entry_bytes(out.value.is_null ? 0 : out.value.bytes.size()));
  return true;
}

}  // namespace fjord::engine::protocol
