// Encoders, validating decoders and route peeks of the key operation
// signals (API <-> TC <-> LDM: single requests, trains, commit and abort),
// and the protocol's error and operation names. The scan signals are in
// scan_signals.cpp, the schema signals in schema_signals.cpp. Every word and
// section is read or written by its name in fjord/engine/protocol/layout.h.
#include "fjord/engine/protocol.h"

#include <cstring>
#include <string>

#include "signal_codec.h"

namespace fjord::engine::protocol {
using namespace detail;  // this library's own helpers (signal_codec.h)

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
    case ErrorCode::kTooManyTransactions:
      return "Out of transaction records in transaction coordinator (increase MaxNoOfConcurrentTransactions)";
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
    case ErrorCode::kTooManyTables: return "No more table metadata records (table ids run out at kMaxTableId)";
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
  using L = layout::TcKeyReq;
  return Out<L>(gsn::kTcKeyReq)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kTableId, m.table_id)
      .w(L::kTableVersion, m.table_version)
      .w(L::kOpBits, op_bits(m.op, m.lock))
      .w(L::kFlags, m.flags)
      .w(L::kOpIndex, m.op_index)
      .w(L::kIndexId, m.index_id)
      .w(L::kBatchOps, m.batch_ops)
      .section(L::kKey, m.key)
      .section(L::kValues, m.values)
      .section(L::kColumns, m.columns)
      .done();
}

// TC's hot path decodes into its own TcKeyReq: no Result to build and copy.
Status decode_tc_key_req(const Signal& s, TcKeyReq& m) {
  using L = layout::TcKeyReq;
  if (Status st = shape<L>(s, gsn::kTcKeyReq); !st) return st;
  m.api_conn = s.word(L::kApiConn);
  m.tx = tx_of<L>(s);
  m.table_id = s.word(L::kTableId);
  m.table_version = s.word(L::kTableVersion);
  if (Status st = read_op_bits(gsn::kTcKeyReq, s.word(L::kOpBits), m.op, m.lock); !st) return st;
  m.flags = s.word(L::kFlags);
  m.op_index = s.word(L::kOpIndex);
  m.index_id = s.word(L::kIndexId);
  m.batch_ops = s.word(L::kBatchOps);
  m.key = section_of<L>(s, L::kKey);
  m.values = section_of<L>(s, L::kValues);
  m.columns = section_of<L>(s, L::kColumns);
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
  using L = layout::TcKeyReq;
  // decode_tc_key_req's shape, with its key section present.
  if (s.number() != gsn::kTcKeyReq || s.word_count() != L::kWordCount || s.section_count() <= L::kKey) return false;
  if (s.word(L::kOpBits) != op_bits(OpType::kRead, LockMode::kCommitted)) return false;
  const bool via_unique = (s.word(L::kFlags) & kFlagViaUnique) != 0;
  out = {s.word(L::kTableId), via_unique ? s.word(L::kIndexId) : 0, s.section(L::kKey)};
  return true;
}

SignalOut encode(const TcKeyConf& m) {
  using L = layout::TcKeyConf;
  return Out<L>(gsn::kTcKeyConf)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kOps, m.ops)
      .w(L::kDataMessages, m.data_messages)
      .w(L::kCommitted, m.committed ? 1 : 0)
      .done();
}

Result<TcKeyConf> decode_tc_key_conf(const Signal& s) {
  using L = layout::TcKeyConf;
  if (Status st = shape<L>(s, gsn::kTcKeyConf); !st) return st;
  const uint32_t committed = s.word(L::kCommitted);
  if (committed > 1) return bad(gsn::kTcKeyConf, "committed flag " + std::to_string(committed));
  return TcKeyConf{s.word(L::kApiConn), tx_of<L>(s), s.word(L::kOps), s.word(L::kDataMessages), committed == 1};
}

SignalOut encode(const TcKeyRef& m) {
  using L = layout::TcKeyRef;
  return Out<L>(gsn::kTcKeyRef)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kOpIndex, m.op_index)
      .w(L::kError, static_cast<uint32_t>(m.error))
      .done();
}

Result<TcKeyRef> decode_tc_key_ref(const Signal& s) {
  using L = layout::TcKeyRef;
  if (Status st = shape<L>(s, gsn::kTcKeyRef); !st) return st;
  if (Status st = check_error_code(gsn::kTcKeyRef, s.word(L::kError)); !st) return st;
  return TcKeyRef{s.word(L::kApiConn), tx_of<L>(s), s.word(L::kOpIndex), static_cast<ErrorCode>(s.word(L::kError))};
}

SignalOut encode(const KeyData& m) {
  if (!m.ends_batch) {
    using L = layout::KeyData;
    return Out<L>(gsn::kKeyData)
        .w(L::kApiConn, m.api_conn)
        .tx(m.tx)
        .w(L::kOpIndex, m.op_index)
        .section(L::kValues, m.values)
        .done();
  }
  FJORD_ASSERT(m.data_messages >= 1);
  using C = layout::KeyDataConf;
  return Out<C>(gsn::kKeyDataConf)
      .w(C::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(C::kOpIndex, m.op_index)
      .w(C::kBatchOps, m.batch_ops)
      .w(C::kDataMessages, m.data_messages)
      .section(C::kValues, m.values)
      .done();
}

// kKeyData and kKeyDataConf: the second begins with the first's words
// (layout.h checks that), so one read of them serves both.
Result<KeyData> decode_key_data(const Signal& s) {
  using L = layout::KeyData;
  using C = layout::KeyDataConf;
  const bool ends_batch = s.number() == gsn::kKeyDataConf;
  const uint16_t number = ends_batch ? gsn::kKeyDataConf : gsn::kKeyData;
  const std::size_t words = ends_batch ? std::size_t{C::kWordCount} : std::size_t{L::kWordCount};
  if (Status st = shape(s, number, words, L::kSectionCount); !st) return st;
  KeyData m{s.word(L::kApiConn), tx_of<L>(s), s.word(L::kOpIndex), section_of<L>(s, L::kValues)};
  if (ends_batch) {
    m.ends_batch = true;
    m.batch_ops = s.word(C::kBatchOps);
    m.data_messages = s.word(C::kDataMessages);
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
  using L = layout::TcKeyTrain;
  return Out<L>(gsn::kTcKeyTrain)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kCount, m.count)
      .section(L::kRecords, m.records)
      .done();
}

TcKeyTrainCursor::TcKeyTrainCursor(const Signal& s) {
  using L = layout::TcKeyTrain;
  if (Status st = shape<L>(s, gsn::kTcKeyTrain); !st) {
    error_ = st;
    return;
  }
  train_ = {s.word(L::kApiConn), tx_of<L>(s), s.word(L::kCount), section_of<L>(s, L::kRecords)};
  rest_ = train_.records;
  if (train_.count == 0 || train_.count > kMaxTrainOps)
    (void)fail("train of " + std::to_string(train_.count) + " operations, expected 1.." + std::to_string(kMaxTrainOps));
}

bool TcKeyTrainCursor::fail(std::string_view what) {
  error_ = bad(gsn::kTcKeyTrain, std::string(what));
  rest_ = {};
  read_ = train_.count;
  return false;
}

bool TcKeyTrainCursor::fail_record(std::string_view what) {
  return fail("record " + std::to_string(read_) + ": " + std::string(what));
}

namespace {
// A train record's faults, worded off the hot path.
[[gnu::cold, gnu::noinline]] std::string bytes_left_fault(std::size_t left, const char* what) {
  return std::to_string(left) + what;
}
// Which of a record's parts runs past the `left` bytes of the section.
[[gnu::cold, gnu::noinline]] std::string record_parts_fault(const uint32_t* head, std::size_t left) {
  using R = layout::TcKeyTrainRecord;
  const uint64_t values_at = kTrainRecordHeaderBytes + padded_to_4(uint64_t{head[R::kKeyBytes]});
  if (values_at > left) return "key of " + std::to_string(head[R::kKeyBytes]) + " bytes runs past the section";
  if (values_at + padded_to_4(uint64_t{head[R::kValueBytes]}) > left)
    return "values of " + std::to_string(head[R::kValueBytes]) + " bytes runs past the section";
  return "column list of " + std::to_string(head[R::kColumnBytes]) + " bytes runs past the section";
}
}  // namespace

bool TcKeyTrainCursor::next(TcKeyReq& m) {
  using R = layout::TcKeyTrainRecord;
  if (!error_.is_ok()) return false;
  if (read_ == train_.count) {
    if (!rest_.empty()) return fail(bytes_left_fault(rest_.size(), " bytes after the last record"));
    return false;
  }
  if (rest_.size() < kTrainRecordHeaderBytes)
    return fail_record("section ends inside the header (" + bytes_left_fault(rest_.size(), " bytes left)"));
  uint32_t head[R::kWordCount];
  std::memcpy(head, rest_.data(), sizeof head);
  m.api_conn = train_.api_conn;
  m.tx = train_.tx;
  m.table_id = head[R::kTableId];
  m.table_version = head[R::kTableVersion];
  if (Status st = read_op_bits(gsn::kTcKeyTrain, head[R::kOpBits], m.op, m.lock); !st) [[unlikely]]
    return fail_record(op_bits_fault(head[R::kOpBits]));
  m.flags = head[R::kFlags];
  m.op_index = head[R::kOpIndex];
  m.index_id = head[R::kIndexId];
  m.batch_ops = head[R::kBatchOps];
  // The three parts' padded lengths, summed in 64 bits (no wrap), against
  // what is left; which part runs past is worked out only for the error.
  const uint64_t key_at = kTrainRecordHeaderBytes;
  const uint64_t values_at = key_at + padded_to_4(uint64_t{head[R::kKeyBytes]});
  const uint64_t columns_at = values_at + padded_to_4(uint64_t{head[R::kValueBytes]});
  const uint64_t at = columns_at + padded_to_4(uint64_t{head[R::kColumnBytes]});
  if (at > rest_.size()) [[unlikely]]
    return fail_record(record_parts_fault(head, rest_.size()));
  m.key = rest_.subspan(key_at, head[R::kKeyBytes]);
  m.values = rest_.subspan(values_at, head[R::kValueBytes]);
  m.columns = rest_.subspan(columns_at, head[R::kColumnBytes]);
  if (!tc_key_req_ok(m)) [[unlikely]]
    return fail_record(tc_key_req_fault(m));
  if ((m.flags & kFlagStartTx) && read_ != 0) return fail_record("starts the transaction but is not the first");
  if ((m.flags & kFlagExecute) && read_ + 1 != train_.count) return fail_record("ends the batch but is not the last");
  rest_ = rest_.subspan(at);
  ++read_;
  return true;
}

SignalOut encode(const KeyDataTrain& m) {
  using L = layout::KeyDataTrain;
  FJORD_ASSERT(!m.ends_batch || m.data_messages >= m.count);
  return Out<L>(gsn::kKeyDataTrain)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kCount, m.count)
      .w(L::kEndsBatch, m.ends_batch ? 1 : 0)
      .w(L::kBatchOps, m.batch_ops)
      .w(L::kDataMessages, m.data_messages)
      .section(L::kRecords, m.records)
      .done();
}

Result<KeyDataTrain> decode_key_data_train(const Signal& s) {
  using L = layout::KeyDataTrain;
  if (Status st = shape<L>(s, gsn::kKeyDataTrain); !st) return st;
  KeyDataTrain m{s.word(L::kApiConn),
                 tx_of<L>(s),
                 s.word(L::kCount),
                 false,
                 s.word(L::kBatchOps),
                 s.word(L::kDataMessages),
                 section_of<L>(s, L::kRecords)};
  const uint32_t ends_batch = s.word(L::kEndsBatch);
  if (ends_batch > 1) return bad(gsn::kKeyDataTrain, "ends_batch flag " + std::to_string(ends_batch));
  m.ends_batch = ends_batch == 1;
  if (m.count == 0 || m.count > kMaxTrainOps)
    return bad(gsn::kKeyDataTrain,
               "train of " + std::to_string(m.count) + " records, expected 1.." + std::to_string(kMaxTrainOps));
  if (m.ends_batch && m.data_messages < m.count)
    return bad(gsn::kKeyDataTrain, "ends a batch of " + std::to_string(m.data_messages) +
                                       " data messages but carries " + std::to_string(m.count));
  // Every record's framing (not its values: RowView checks those as they
  // are read), so that KeyDataTrainCursor cannot run past the section.
  using R = layout::KeyDataTrainRecord;
  std::span<const std::byte> rest = m.records;
  for (uint32_t i = 0; i < m.count; ++i) {
    if (rest.size() < kKeyDataRecordHeaderBytes)
      return bad(gsn::kKeyDataTrain, "record " + std::to_string(i) + ": section ends inside its header");
    uint32_t n;
    std::memcpy(&n, rest.data() + 4 * R::kValueBytes, 4);
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
  using L = layout::TcTxMessage;
  return Out<L>(m.number).w(L::kApiConn, m.api_conn).tx(m.tx).done();
}

Result<TcTxMessage> decode_tc_tx_message(const Signal& s) {
  using L = layout::TcTxMessage;
  const uint16_t n = s.number();
  if (n != gsn::kTcCommitReq && n != gsn::kTcRollbackReq && n != gsn::kTcRollbackConf)
    return bad(n, "not a commit/rollback message");
  if (Status st = shape<L>(s, n); !st) return st;
  return TcTxMessage{n, s.word(L::kApiConn), tx_of<L>(s)};
}

SignalOut encode(const TcAbortRep& m) {
  using L = layout::TcAbortRep;
  return Out<L>(gsn::kTcAbortRep)
      .w(L::kApiConn, m.api_conn)
      .tx(m.tx)
      .w(L::kError, static_cast<uint32_t>(m.error))
      .done();
}

Result<TcAbortRep> decode_tc_abort_rep(const Signal& s) {
  using L = layout::TcAbortRep;
  if (Status st = shape<L>(s, gsn::kTcAbortRep); !st) return st;
  if (Status st = check_error_code(gsn::kTcAbortRep, s.word(L::kError)); !st) return st;
  return TcAbortRep{s.word(L::kApiConn), tx_of<L>(s), static_cast<ErrorCode>(s.word(L::kError))};
}

// ---- TC <-> LDM ---------------------------------------------------------------------

SignalOut encode(const LqhKeyReq& m) {
  using L = layout::LqhKeyReq;
  return Out<L>(gsn::kLqhKeyReq)
      .w(L::kTcOp, m.tc_op)
      .tx(m.tx)
      .w(L::kTableId, m.table_id)
      .w(L::kTableVersion, m.table_version)
      .w(L::kOpBits, op_bits(m.op, m.lock))
      .w(L::kResultTo, static_cast<uint32_t>(m.result_to))
      .w(L::kPartition, m.partition)
      .w(L::kApiNode, m.api_node)
      .w(L::kApiConn, m.api_conn)
      .w(L::kOpIndex, m.op_index)
      .w(L::kKeyHash, m.key_hash)
      .section(L::kKey, m.key)
      .section(L::kValues, m.values)
      .section(L::kColumns, m.columns)
      .done();
}

Result<LqhKeyReq> decode_lqh_key_req(const Signal& s) {
  using L = layout::LqhKeyReq;
  if (Status st = shape<L>(s, gsn::kLqhKeyReq); !st) return st;
  LqhKeyReq m;
  m.tc_op = s.word(L::kTcOp);
  m.tx = tx_of<L>(s);
  // A transaction id names its API node in its top 16 bits (LDM keys its
  // transactions by id, and the all-ones id is no key).
  if (m.tx.api_node() > kMaxNodeId) [[unlikely]]
    return bad(gsn::kLqhKeyReq, "transaction id " + std::to_string(m.tx.value) + " names no node");
  m.table_id = s.word(L::kTableId);
  m.table_version = s.word(L::kTableVersion);
  if (Status st = read_op_bits(gsn::kLqhKeyReq, s.word(L::kOpBits), m.op, m.lock); !st) return st;
  const uint32_t result_to = s.word(L::kResultTo);
  if (result_to > 1) return bad(gsn::kLqhKeyReq, "result destination " + std::to_string(result_to));
  m.result_to = static_cast<ResultTo>(result_to);
  m.partition = s.word(L::kPartition);
  const uint32_t api_node = s.word(L::kApiNode);
  if (m.result_to == ResultTo::kApi)
    if (Status st = check_node(gsn::kLqhKeyReq, api_node); !st) return st;
  m.api_node = static_cast<NodeId>(api_node);
  m.api_conn = s.word(L::kApiConn);
  m.op_index = s.word(L::kOpIndex);
  m.key_hash = s.word(L::kKeyHash);
  m.key = section_of<L>(s, L::kKey);
  m.values = section_of<L>(s, L::kValues);
  m.columns = section_of<L>(s, L::kColumns);
  if (m.key.empty()) return bad(gsn::kLqhKeyReq, "no key values");
  if (m.columns.size() % 2 != 0) return bad(gsn::kLqhKeyReq, "column list of odd length");
  return m;
}

bool peek_lqh_key_route(const Signal& s, LqhKeyRoute& out) {
  using L = layout::LqhKeyReq;
  if (s.number() != gsn::kLqhKeyReq || s.word_count() != L::kWordCount) return false;  // decode_lqh_key_req's shape
  out = {s.word(L::kTableId), s.word(L::kPartition), s.word(L::kKeyHash)};
  return true;
}

SignalOut encode(const LqhKeyConf& m) {
  using L = layout::LqhKeyConf;
  return Out<L>(gsn::kLqhKeyConf)
      .w(L::kTcOp, m.tc_op)
      .tx(m.tx)
      .w(L::kDataSentToApi, m.data_sent_to_api ? 1 : 0)
      .section(L::kData, m.data)
      .section(L::kUniqueBefore, m.unique_before)
      .section(L::kUniqueAfter, m.unique_after)
      .done();
}

Result<LqhKeyConf> decode_lqh_key_conf(const Signal& s) {
  using L = layout::LqhKeyConf;
  if (Status st = shape<L>(s, gsn::kLqhKeyConf); !st) return st;
  const uint32_t data_sent = s.word(L::kDataSentToApi);
  if (data_sent > 1) return bad(gsn::kLqhKeyConf, "data flag " + std::to_string(data_sent));
  LqhKeyConf m;
  m.tc_op = s.word(L::kTcOp);
  m.tx = tx_of<L>(s);
  m.data_sent_to_api = data_sent == 1;
  m.data = section_of<L>(s, L::kData);
  m.unique_before = section_of<L>(s, L::kUniqueBefore);
  m.unique_after = section_of<L>(s, L::kUniqueAfter);
  return m;
}

SignalOut encode(const LqhKeyRef& m) {
  using L = layout::LqhKeyRef;
  return Out<L>(gsn::kLqhKeyRef).w(L::kTcOp, m.tc_op).tx(m.tx).w(L::kError, static_cast<uint32_t>(m.error)).done();
}

Result<LqhKeyRef> decode_lqh_key_ref(const Signal& s) {
  using L = layout::LqhKeyRef;
  if (Status st = shape<L>(s, gsn::kLqhKeyRef); !st) return st;
  if (Status st = check_error_code(gsn::kLqhKeyRef, s.word(L::kError)); !st) return st;
  return LqhKeyRef{s.word(L::kTcOp), tx_of<L>(s), static_cast<ErrorCode>(s.word(L::kError))};
}

SignalOut encode(uint16_t number, const LqhTxReq& m) {
  FJORD_ASSERT(number == gsn::kLqhCommitReq || number == gsn::kLqhAbortReq);
  using L = layout::LqhTxReq;
  return Out<L>(number).tx(m.tx).w(L::kTcInstance, m.tc_instance).done();
}

Result<LqhTxReq> decode_lqh_tx_req(const Signal& s) {
  using L = layout::LqhTxReq;
  const uint16_t n = s.number();
  if (n != gsn::kLqhCommitReq && n != gsn::kLqhAbortReq) return bad(n, "not a commit or abort request");
  if (Status st = shape<L>(s, n); !st) return st;
  const uint32_t tc_instance = s.word(L::kTcInstance);
  if (tc_instance > 0xFFFF) return bad(n, "TC instance " + std::to_string(tc_instance));
  const TxId tx = tx_of<L>(s);
  // As in an LqhKeyReq: LDM looks transactions up by id, and the all-ones id is no key.
  if (tx.api_node() > kMaxNodeId) return bad(n, "transaction id " + std::to_string(tx.value) + " names no node");
  return LqhTxReq{tx, static_cast<uint16_t>(tc_instance)};
}

SignalOut encode(uint16_t number, const LqhTxConf& m) {
  FJORD_ASSERT(number == gsn::kLqhCommitConf || number == gsn::kLqhAbortConf);
  using L = layout::LqhTxConf;
  return Out<L>(number).tx(m.tx).w(L::kLdmInstance, m.ldm_instance).w(L::kOps, m.ops).done();
}

Result<LqhTxConf> decode_lqh_tx_conf(const Signal& s) {
  using L = layout::LqhTxConf;
  const uint16_t n = s.number();
  if (n != gsn::kLqhCommitConf && n != gsn::kLqhAbortConf) return bad(n, "not a commit or abort confirmation");
  if (Status st = shape<L>(s, n); !st) return st;
  const uint32_t ldm_instance = s.word(L::kLdmInstance);
  if (ldm_instance > 0xFFFF) return bad(n, "LDM instance " + std::to_string(ldm_instance));
  return LqhTxConf{tx_of<L>(s), static_cast<uint16_t>(ldm_instance), s.word(L::kOps)};
}

}  // namespace fjord::engine::protocol
