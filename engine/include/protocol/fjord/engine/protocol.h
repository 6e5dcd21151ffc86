// The engine's signal protocol: API <-> TC/DICT, TC <-> LDM, LDM -> API.
//
// Every signal that crosses a node boundary is decoded by a function here
// that checks word counts, section shapes, enum ranges and lengths, and
// returns a Status naming what was wrong: a peer's bytes are never trusted
// (tests/fuzz/fuzz_protocol.cpp feeds them random frames). Encoders fill a
// SignalOut, which the caller sends with BlockContext::send or a transporter.
//
// The flow of a key operation (NDB's TCKEYREQ / LQHKEYREQ / TRANSID_AI):
//   API --TcKeyReq--> TC --LqhKeyReq--> LDM
//   LDM --KeyData--> API (read results, straight to the API node)
//   LDM --LqhKeyConf/Ref--> TC
//   TC  --TcKeyConf (ops done, data messages to expect) / TcKeyRef--> API
// When the batch's last read runs in the LDM directly (TC and LDM on one
// thread, docs/ldm.md) and it ends a committed batch, its KeyData carries
// the TcKeyConf too (kKeyDataConf): one signal to the API instead of two.
// A batch of several operations comes as trains (kTcKeyTrain: up to
// kMaxTrainOps TcKeyReq in one signal), and the direct reads of a train
// answer in one kKeyDataTrain (see "trains" below).
// Commit and abort go TC -> each LDM that holds the transaction's operations
// (LqhCommitReq / LqhAbortReq, one per transaction and LDM instance).
//
// Scans: API --ScanReq--> TC --ScanFragReq--> every LDM owning a partition;
// LDM --ScanRows--> API and --ScanFragConf--> TC; TC --ScanConf--> API when
// every partition answered a batch; API --ScanNextReq--> TC for more.
//
// Each signal's words and sections are named once, in protocol/layout.h.
// The sections' own formats have their codecs beside it: value entries
// (protocol/value_entries.h), key sections (protocol/key_section_codec.h),
// scan bounds and filters (protocol/scan_codec.h). This header includes
// them all.
//
// Pure functions; any thread. Hot path: encoders and decoders (no heap).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/engine/key_codec.h"
#include "fjord/engine/protocol/key_section_codec.h"
#include "fjord/engine/protocol/layout.h"
#include "fjord/engine/protocol/scan_codec.h"
#include "fjord/engine/protocol/value_entries.h"
#include "fjord/engine/schema.h"
#include "fjord/engine/signal.h"
#include "fjord/transport/frame.h"

namespace fjord::engine::protocol {

// ---- signal numbers ------------------------------------------------------
namespace gsn {
// schema (API <-> DICT, DICT -> TC/LDM)
inline constexpr uint16_t kCreateTableReq = 100;   // sections: [0] encoded TableDef
inline constexpr uint16_t kCreateTableConf = 101;  // sections: [0] TableDef with ids assigned
inline constexpr uint16_t kDropTableReq = 102;     // sections: [0] table name
inline constexpr uint16_t kDropTableConf = 103;
inline constexpr uint16_t kGetTableReq = 104;    // sections: [0] table name
inline constexpr uint16_t kGetTableConf = 105;   // sections: [0] TableDef
inline constexpr uint16_t kSchemaRef = 106;      // any schema request refused: {request id, error}
inline constexpr uint16_t kSchemaInstall = 110;  // DICT -> TC/LDM: sections [0] TableDef (or empty = drop)
inline constexpr uint16_t kSchemaInstallConf = 111;
inline constexpr uint16_t kApiRegReq = 120;   // API -> DICT: {request id}
inline constexpr uint16_t kApiRegConf = 121;  // DICT -> API: {request id, TC instances, LDM instances, partitions}
// key operations
inline constexpr uint16_t kTcKeyReq = 200;
inline constexpr uint16_t kTcKeyConf = 201;
inline constexpr uint16_t kTcKeyRef = 202;
inline constexpr uint16_t kTcRollbackReq = 203;
inline constexpr uint16_t kTcRollbackConf = 204;
inline constexpr uint16_t kTcAbortRep = 205;    // TC aborted on its own (timeout, deadlock, node)
inline constexpr uint16_t kTcCommitReq = 206;   // commit with no new operations
inline constexpr uint16_t kKeyData = 210;       // LDM -> API: a read's values
inline constexpr uint16_t kKeyDataConf = 211;   // ... that also ends its batch, committed (KeyData + TcKeyConf)
inline constexpr uint16_t kTcKeyTrain = 207;    // API -> TC: several TcKeyReq of one transaction
inline constexpr uint16_t kKeyDataTrain = 212;  // TC -> API: several reads' values (and maybe the TcKeyConf)
inline constexpr uint16_t kLqhKeyReq = 300;
inline constexpr uint16_t kLqhKeyConf = 301;
inline constexpr uint16_t kLqhKeyRef = 302;
inline constexpr uint16_t kLqhCommitReq = 303;
inline constexpr uint16_t kLqhCommitConf = 304;
inline constexpr uint16_t kLqhAbortReq = 305;
inline constexpr uint16_t kLqhAbortConf = 306;
// scans
inline constexpr uint16_t kScanReq = 230;
inline constexpr uint16_t kScanConf = 231;
inline constexpr uint16_t kScanRef = 232;
inline constexpr uint16_t kScanNextReq = 233;
inline constexpr uint16_t kScanCloseReq = 234;
inline constexpr uint16_t kScanRows = 235;  // LDM -> API
inline constexpr uint16_t kScanFragReq = 330;
inline constexpr uint16_t kScanFragConf = 331;
inline constexpr uint16_t kScanFragRef = 332;
inline constexpr uint16_t kScanFragNextReq = 333;
inline constexpr uint16_t kScanFragCloseReq = 334;
}  // namespace gsn

// ---- errors ---------------------------------------------------------------
// Numbers follow NDB's where the meaning is the same.
enum class ErrorCode : uint32_t {
  kNone = 0,
  kNoSuchRow = 626,             // "Tuple did not exist"
  kDuplicateKey = 630,          // "Tuple already existed when attempting to insert"
  kDuplicateUniqueKey = 893,    // "Constraint violation e.g. duplicate value in unique index"
  kDeadlockTimeout = 266,       // "Time-out in NDB, probably caused by deadlock"
  kInactiveTimeout = 237,       // "Transaction had timed out when trying to commit it"
  kOverload = 1218,             // "Send Buffers overloaded in NDB kernel"
  kOutOfDataMemory = 827,       // "Out of memory in Ndb Kernel, table data (increase DataMemory)"
  kTooManyOperations = 233,     // "Out of operation records in transaction coordinator"
  kTooManyTransactions = 4006,  // NDB: "out of connection objects (increase MaxNoOfConcurrentTransactions)"
  kNoSuchTable = 723,           // "No such table existed"
  kSchemaVersion = 241,         // "Invalid schema object version"
  kTableExists = 721,           // "Schema object with given name already exists"
  kTableDropped = 283,          // "Table is being dropped": a running transaction wrote to it
  kNoSuchIndex = 4243,          // "Index not found"
  kBadRequest = 4000,           // malformed or inconsistent request
  kNodeFailure = 4025,          // "Node failure caused abort of transaction"
  kUnknownTransaction = 4028,   // TC has no such transaction (it was aborted)
  kScanError = 4110,
  kTooManyScans = 488,        // "Too many active scans" (TC: MaxNoOfConcurrentScans; LDM: MaxNoOfLocalScans)
  kIndexInconsistent = 4349,  // "Inconsistency detected at index usage" (a unique index and its table disagree)
  kTooManyTables = 707,       // "No more table metadata records" (table ids up to kMaxTableId)
};
std::string_view error_message(ErrorCode code) noexcept;
std::string error_text(ErrorCode code);  // "626: Tuple did not exist"

// ---- operations -----------------------------------------------------------
enum class OpType : uint8_t { kRead = 1, kInsert, kUpdate, kWrite, kDelete };
enum class LockMode : uint8_t { kCommitted = 0, kShared = 1, kExclusive = 2 };
const char* op_type_name(OpType type) noexcept;
// An operation's type and lock mode as one word (layout::TcKeyReq::kOpBits).
inline constexpr uint32_t op_bits(OpType op, LockMode lock) {
  return static_cast<uint32_t>(op) | static_cast<uint32_t>(lock) << 8;
}

// A transaction id: the API node in the top 16 bits, a counter below.
struct TxId {
  uint64_t value = 0;
  uint32_t hi() const { return static_cast<uint32_t>(value >> 32); }
  uint32_t lo() const { return static_cast<uint32_t>(value); }
  static TxId from(uint32_t hi, uint32_t lo) { return {uint64_t{hi} << 32 | lo}; }
  NodeId api_node() const { return static_cast<NodeId>(value >> 48); }
  friend bool operator==(TxId a, TxId b) = default;
};

// Flags of TcKeyReq::flags.
inline constexpr uint32_t kFlagStartTx = 1u << 0;    // first operation of the transaction
inline constexpr uint32_t kFlagExecute = 1u << 1;    // last operation of this execute() batch
inline constexpr uint32_t kFlagCommit = 1u << 2;     // ... and commit after it
inline constexpr uint32_t kFlagViaUnique = 1u << 3;  // key is a unique index key (index_id)
inline constexpr uint32_t kKnownTcKeyFlags = 0xF;

struct TcKeyReq {         // API -> TC
  uint32_t api_conn = 0;  // the API's handle, echoed back
  TxId tx;
  uint32_t table_id = 0;
  uint32_t table_version = 0;
  OpType op = OpType::kRead;
  LockMode lock = LockMode::kCommitted;
  uint32_t flags = 0;
  uint32_t op_index = 0;               // the API's operation number, echoed back
  uint32_t index_id = 0;               // with kFlagViaUnique
  uint32_t batch_ops = 0;              // with kFlagExecute: operations in this batch
  std::span<const std::byte> key;      // section 0: key values (ValueCursor)
  std::span<const std::byte> values;   // section 1: values to write
  std::span<const std::byte> columns;  // section 2: u16 column ids to read (empty: all)
};

struct TcKeyConf {  // TC -> API: the batch finished
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t ops = 0;            // operations completed in the batch
  uint32_t data_messages = 0;  // KeyData signals the API must also receive
  bool committed = false;
};

struct TcKeyRef {  // TC -> API: the transaction failed and is aborted
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t op_index = 0;  // the operation that failed (UINT32_MAX: none in particular)
  ErrorCode error = ErrorCode::kNone;
};

// kTcCommitReq, kTcRollbackReq (API -> TC) and kTcRollbackConf (TC -> API).
struct TcTxMessage {
  uint16_t number = 0;
  uint32_t api_conn = 0;
  TxId tx;
};

struct TcAbortRep {  // TC -> API: TC aborted the transaction on its own
  uint32_t api_conn = 0;
  TxId tx;
  ErrorCode error = ErrorCode::kNone;
};

struct KeyData {  // LDM -> API (kKeyData, or kKeyDataConf when `ends_batch`)
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t op_index = 0;
  std::span<const std::byte> values;
  // kKeyDataConf: this is also the batch's TcKeyConf, committed: the batch
  // had batch_ops operations and data_messages KeyData, this one included.
  bool ends_batch = false;
  uint32_t batch_ops = 0;
  uint32_t data_messages = 0;
};

// ---- trains: several key operations of one transaction in one signal -----------
//
// Per signal, the runtime and the transporter spend more than a key read's
// own work (docs/api.md, "Trains"), so a batch goes to TC as trains of up to
// kMaxTrainOps requests, and TC answers the reads its own thread runs
// (direct reads, docs/ldm.md) in one KeyDataTrain per train.
//
// kTcKeyTrain (API -> TC): words layout::TcKeyTrain; its section holds
// `count` records, each the words of layout::TcKeyTrainRecord and then the
// key, the values and the column list, each padded to 4 bytes. Every record
// is checked as a TcKeyReq is; only the first may start the transaction and
// only the last may end the batch (kFlagExecute). TC runs each as if it had
// come alone, in order.
//
// kKeyDataTrain (TC -> API): words layout::KeyDataTrain; its section holds
// `count` records, each the words of layout::KeyDataTrainRecord and then
// the values (value entries). Each record counts as one data message
// (TcKeyConf::data_messages). With ends_batch it is also the batch's
// committed TcKeyConf, as kKeyDataConf is.
inline constexpr uint32_t kMaxTrainOps = 32;
// The most bytes a read of `table` returns as value entries (every column, each at its longest).
std::size_t max_read_bytes(const TableDef& table);
inline constexpr std::size_t kTrainRecordHeaderBytes = 4 * layout::TcKeyTrainRecord::kWordCount;
// The most bytes of records a train of either kind carries: what one frame
// holds beside its header, words and checksum, with room to spare.
inline constexpr std::size_t kMaxTrainBytes = frame::kMaxFrameBytes - 256;
inline constexpr std::size_t kKeyDataRecordHeaderBytes = 4 * layout::KeyDataTrainRecord::kWordCount;

struct TcKeyTrain {
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t count = 0;
  std::span<const std::byte> records;  // section 0
};
// Bytes m takes as a train record.
inline std::size_t tc_key_train_record_bytes(const TcKeyReq& m) {
  return kTrainRecordHeaderBytes + padded_to_4(m.key.size()) + padded_to_4(m.values.size()) +
         padded_to_4(m.columns.size());
}
// Copies `part` to `at`, zero-padded to a multiple of 4 bytes; returns
// where the next part goes. A part of up to 16 bytes (a key of one or two
// integer columns, the usual case) is copied by a few loads and stores that
// may overlap, not a call to memcpy.
inline std::byte* put_padded(std::byte* at, std::span<const std::byte> part) {
  const std::size_t n = part.size();
  if (n == 0) return at;
  const std::size_t padded = padded_to_4(n);
  std::memset(at + padded - 4, 0, 4);  // the padding, under the last bytes
  const std::byte* from = part.data();
  if (n >= 8 && n <= 16) {
    std::memcpy(at, from, 8);
    std::memcpy(at + n - 8, from + n - 8, 8);
  } else if (n >= 4 && n < 8) {
    std::memcpy(at, from, 4);
    std::memcpy(at + n - 4, from + n - 4, 4);
  } else if (n < 4) {
    at[0] = from[0];
    at[n / 2] = from[n / 2];
    at[n - 1] = from[n - 1];
  } else {
    std::memcpy(at, from, n);
  }
  return at + padded;
}

// Writes m as a train record (its api_conn and tx are the train's); returns
// the bytes written, or 0 if `out` is too small. Inline: the API writes one
// per operation it defines.
inline std::size_t put_tc_key_train_record(std::span<std::byte> out, const TcKeyReq& m) {
  const std::size_t n = tc_key_train_record_bytes(m);
  if (out.size() < n) return 0;
  using R = layout::TcKeyTrainRecord;
  uint32_t head[R::kWordCount];
  head[R::kTableId] = m.table_id;
  head[R::kTableVersion] = m.table_version;
  head[R::kOpBits] = op_bits(m.op, m.lock);
  head[R::kFlags] = m.flags;
  head[R::kOpIndex] = m.op_index;
  head[R::kIndexId] = m.index_id;
  head[R::kBatchOps] = m.batch_ops;
  head[R::kKeyBytes] = static_cast<uint32_t>(m.key.size());
  head[R::kValueBytes] = static_cast<uint32_t>(m.values.size());
  head[R::kColumnBytes] = static_cast<uint32_t>(m.columns.size());
  static_assert(sizeof head == kTrainRecordHeaderBytes);
  std::byte* at = out.data();
  std::memcpy(at, head, sizeof head);
  at = put_padded(at + sizeof head, m.key);
  at = put_padded(at, m.values);
  (void)put_padded(at, m.columns);
  return n;
}

// Reads a kTcKeyTrain: the constructor checks the words and the section,
// next() yields each record as a TcKeyReq, checked, and false at the end
// or on the first fault (error() says which record and why; ok at a clean
// end, where the records filled the section exactly).
class TcKeyTrainCursor {
 public:
  explicit TcKeyTrainCursor(const Signal& s);
  const TcKeyTrain& train() const { return train_; }
  bool next(TcKeyReq& out);
  const Status& error() const { return error_; }

 private:
  // Both keep the first fault and end the walk; off the hot path.
  [[gnu::cold]] bool fail(std::string_view what);
  [[gnu::cold]] bool fail_record(std::string_view what);  // names the record being read
  TcKeyTrain train_;
  std::span<const std::byte> rest_;
  uint32_t read_ = 0;
  Status error_;
};

struct KeyDataTrain {
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t count = 0;
  bool ends_batch = false;
  uint32_t batch_ops = 0;
  uint32_t data_messages = 0;          // with ends_batch: of the whole batch, these included
  std::span<const std::byte> records;  // section 0
};
// Writes a record's header at `out`, in front of `value_bytes` bytes of
// values the caller wrote (or writes) at out + kKeyDataRecordHeaderBytes.
inline void put_key_data_record_header(std::byte* out, uint32_t op_index, uint32_t value_bytes) {
  using R = layout::KeyDataTrainRecord;
  std::memcpy(out + 4 * R::kOpIndex, &op_index, 4);
  std::memcpy(out + 4 * R::kValueBytes, &value_bytes, 4);
}
// Checks the words and every record's framing (not the values: RowView
// checks those as they are read), so that KeyDataTrainCursor cannot fail.
Result<KeyDataTrain> decode_key_data_train(const Signal& s);
class KeyDataTrainCursor {
 public:
  explicit KeyDataTrainCursor(std::span<const std::byte> records) : rest_(records) {}
  // Records of a decoded KeyDataTrain; false at the end.
  bool next(uint32_t& op_index, std::span<const std::byte>& values) {
    if (rest_.size() < kKeyDataRecordHeaderBytes) return false;
    using R = layout::KeyDataTrainRecord;
    uint32_t n;
    std::memcpy(&op_index, rest_.data() + 4 * R::kOpIndex, 4);
    std::memcpy(&n, rest_.data() + 4 * R::kValueBytes, 4);
    values = rest_.subspan(kKeyDataRecordHeaderBytes, n);
    rest_ = rest_.subspan(kKeyDataRecordHeaderBytes + n);
    return true;
  }

 private:
  std::span<const std::byte> rest_;
};

// ---- TC <-> LDM -------------------------------------------------------------

// Where LDM sends a read's values.
enum class ResultTo : uint8_t { kApi = 0, kTc = 1 };

struct LqhKeyReq {     // TC -> LDM
  uint32_t tc_op = 0;  // TC's operation record, echoed back
  TxId tx;
  uint32_t table_id = 0;
  uint32_t table_version = 0;
  OpType op = OpType::kRead;
  LockMode lock = LockMode::kCommitted;
  ResultTo result_to = ResultTo::kApi;
  uint32_t partition = 0;
  NodeId api_node = kNoNode;  // where KeyData goes (result_to kApi)
  uint32_t api_conn = 0;
  uint32_t op_index = 0;
  // Low 32 bits of hash_key() of the encoded key, as TC routed it (NDB's
  // LQHKEYREQ carries the hash too): the LDM can prefetch the key's bucket
  // before it runs the request, and refuses a request whose hash is wrong.
  uint32_t key_hash = 0;
  std::span<const std::byte> key;      // section 0
  std::span<const std::byte> values;   // section 1
  std::span<const std::byte> columns;  // section 2
};

struct LqhKeyConf {  // LDM -> TC: the operation is prepared (locks held, change pending)
  uint32_t tc_op = 0;
  TxId tx;
  bool data_sent_to_api = false;  // one KeyData went to the API
  // Section 0: the read's values (result_to kTc); section 1: the row's
  // unique-index columns before the change; section 2: after it (for TC to
  // keep hidden unique-index tables in step). Empty when not applicable.
  std::span<const std::byte> data;
  std::span<const std::byte> unique_before;
  std::span<const std::byte> unique_after;
};

struct LqhKeyRef {  // LDM -> TC: the operation failed (nothing held for it)
  uint32_t tc_op = 0;
  TxId tx;
  ErrorCode error = ErrorCode::kNone;
};

// Commit or abort every operation of `tx` held by one LDM instance.
struct LqhTxReq {  // TC -> LDM (kLqhCommitReq / kLqhAbortReq)
  TxId tx;
  uint16_t tc_instance = 0;  // where the conf goes
};
struct LqhTxConf {  // LDM -> TC (kLqhCommitConf / kLqhAbortConf)
  TxId tx;
  uint16_t ldm_instance = 0;
  uint32_t ops = 0;
};

// ---- scans ---------------------------------------------------------------------

inline constexpr uint32_t kScanFlagOrderedIndex = 1u << 0;  // index_id names an ordered index
inline constexpr uint32_t kKnownScanFlags = 0x1;

struct ScanReq {  // API -> TC
  uint32_t api_conn = 0;
  TxId tx;
  uint32_t scan_id = 0;  // the API's scan number, echoed back
  uint32_t table_id = 0;
  uint32_t table_version = 0;
  uint32_t index_id = 0;  // with kScanFlagOrderedIndex
  uint32_t flags = 0;
  LockMode lock = LockMode::kCommitted;
  uint32_t batch_rows = 0;             // rows per partition per round (1..kMaxScanBatchRows)
  std::span<const std::byte> bounds;   // section 0
  std::span<const std::byte> filter;   // section 1
  std::span<const std::byte> columns;  // section 2
};
inline constexpr uint32_t kMaxScanBatchRows = 4096;

struct ScanFragReq {     // TC -> LDM
  uint32_t tc_scan = 0;  // TC's scan record
  TxId tx;
  uint32_t table_id = 0;
  uint32_t table_version = 0;
  uint32_t index_id = 0;
  uint32_t flags = 0;
  LockMode lock = LockMode::kCommitted;
  uint32_t partition = 0;
  uint32_t batch_rows = 0;
  NodeId api_node = kNoNode;
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  std::span<const std::byte> bounds;
  std::span<const std::byte> filter;
  std::span<const std::byte> columns;
};

struct ScanFragNext {  // TC -> LDM (kScanFragNextReq / kScanFragCloseReq)
  uint32_t tc_scan = 0;
  uint32_t partition = 0;
};

struct ScanFragConf {  // LDM -> TC: one round of one partition done
  uint32_t tc_scan = 0;
  uint32_t partition = 0;
  uint32_t rows = 0;      // rows sent to the API in this round
  uint32_t messages = 0;  // ScanRows signals sent in this round
  bool finished = false;  // the partition has no more rows
};

struct ScanFragRef {  // LDM -> TC
  uint32_t tc_scan = 0;
  uint32_t partition = 0;
  ErrorCode error = ErrorCode::kNone;
};

// LDM -> API. Section 0: rows, each a u32 byte length then value entries.
struct ScanRows {
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  uint32_t rows = 0;
  std::span<const std::byte> data;
};

struct ScanConf {  // TC -> API: a round is complete
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  uint32_t rows = 0;      // rows sent in this round (over all partitions)
  uint32_t messages = 0;  // ScanRows signals to expect for this round
  bool finished = false;  // no more rounds
};

struct ScanRef {  // TC -> API
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  ErrorCode error = ErrorCode::kNone;
};

struct ScanNext {  // API -> TC (kScanNextReq / kScanCloseReq)
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
};

// ---- schema ---------------------------------------------------------------------

struct SchemaRef {  // DICT -> API
  uint32_t request_id = 0;
  ErrorCode error = ErrorCode::kNone;
};

// API -> DICT (kCreateTableReq: encoded TableDef; kDropTableReq and
// kGetTableReq: the table name) and DICT -> API (kCreateTableConf and
// kGetTableConf: the encoded TableDef; kDropTableConf: nothing).
struct SchemaMessage {
  uint16_t number = 0;
  uint32_t request_id = 0;
  std::span<const std::byte> payload;
};

// DICT -> TC and LDM instances: install a table (payload: encoded TableDef)
// or drop one (drop = true, no payload).
struct SchemaInstall {
  uint32_t install_id = 0;
  uint32_t table_id = 0;
  bool drop = false;
  std::span<const std::byte> table;
};
struct SchemaInstallConf {  // TC/LDM -> DICT
  uint32_t install_id = 0;
};

// An API node introduces itself and learns how the data node is laid out
// (NDB's API_REGREQ/API_REGCONF).
struct ApiRegReq {
  uint32_t request_id = 0;
};
struct ApiRegConf {
  uint32_t request_id = 0;
  uint16_t tc_instances = 0;
  uint16_t ldm_instances = 0;
  uint32_t default_partitions = 0;
};

// One encoded signal ready to send (words + up to 3 sections).
struct SignalOut {
  uint16_t number = 0;
  uint32_t words[frame::kMaxDataWords] = {};
  uint8_t word_count = 0;
  std::span<const std::byte> sections[frame::kMaxSections];
  uint8_t section_count = 0;
  std::span<const uint32_t> data() const { return {words, word_count}; }
  std::span<const std::span<const std::byte>> section_list() const { return {sections, section_count}; }
};

SignalOut encode(const TcKeyReq& m);
SignalOut encode(const TcKeyConf& m);
SignalOut encode(const TcKeyRef& m);
SignalOut encode(const KeyData& m);
SignalOut encode(const TcKeyTrain& m);
SignalOut encode(const KeyDataTrain& m);
Result<TcKeyReq> decode_tc_key_req(const Signal& s);
// The same into `out` (TC's hot path: no Result to build and copy).
Status decode_tc_key_req(const Signal& s, TcKeyReq& out);
// What TC's prefetch needs of a TcKeyReq that reads by primary or unique
// key without locks, read without decoding or checking the rest: false for
// any other signal or request.
struct TcKeyReadRoute {
  uint32_t table_id = 0;
  uint32_t index_id = 0;           // a read by unique key: its index (0: by primary key)
  std::span<const std::byte> key;  // section 0, unchecked
};
bool peek_tc_key_read(const Signal& s, TcKeyReadRoute& out);
Result<TcKeyConf> decode_tc_key_conf(const Signal& s);
Result<TcKeyRef> decode_tc_key_ref(const Signal& s);
Result<KeyData> decode_key_data(const Signal& s);
SignalOut encode(const TcTxMessage& m);
SignalOut encode(const TcAbortRep& m);
Result<TcTxMessage> decode_tc_tx_message(const Signal& s);
Result<TcAbortRep> decode_tc_abort_rep(const Signal& s);

SignalOut encode(const LqhKeyReq& m);
SignalOut encode(const LqhKeyConf& m);
SignalOut encode(const LqhKeyRef& m);
SignalOut encode(uint16_t number, const LqhTxReq& m);   // kLqhCommitReq or kLqhAbortReq
SignalOut encode(uint16_t number, const LqhTxConf& m);  // kLqhCommitConf or kLqhAbortConf
Result<LqhKeyReq> decode_lqh_key_req(const Signal& s);
// The routing words of an LqhKeyReq, read without decoding or checking the
// rest (the LDM's prefetch hint): false if `s` is not an LqhKeyReq.
struct LqhKeyRoute {
  uint32_t table_id = 0;
  uint32_t partition = 0;
  uint32_t key_hash = 0;
};
bool peek_lqh_key_route(const Signal& s, LqhKeyRoute& out);
Result<LqhKeyConf> decode_lqh_key_conf(const Signal& s);
Result<LqhKeyRef> decode_lqh_key_ref(const Signal& s);
Result<LqhTxReq> decode_lqh_tx_req(const Signal& s);
Result<LqhTxConf> decode_lqh_tx_conf(const Signal& s);

SignalOut encode(const ScanReq& m);
SignalOut encode(const ScanFragReq& m);
SignalOut encode(uint16_t number, const ScanFragNext& m);  // kScanFragNextReq or kScanFragCloseReq
SignalOut encode(const ScanFragConf& m);
SignalOut encode(const ScanFragRef& m);
SignalOut encode(const ScanRows& m);
SignalOut encode(const ScanConf& m);
SignalOut encode(const ScanRef& m);
SignalOut encode(uint16_t number, const ScanNext& m);  // kScanNextReq or kScanCloseReq
SignalOut encode(const SchemaRef& m);
SignalOut encode(const SchemaMessage& m);
SignalOut encode(const SchemaInstall& m);
SignalOut encode(const SchemaInstallConf& m);
Result<SchemaMessage> decode_schema_message(const Signal& s);
// Checks the words and that an install carries a table and a drop none,
// and the table id (1..kMaxTableId).
Result<SchemaInstall> decode_schema_install(const Signal& s);
// The table of a decoded install (not a drop), checked as TC and LDM need
// it: decode_table()'s checks, the id the install names, and a partition
// count of 1..kMaxPartitions.
Result<TableDef> decode_installed_table(const SchemaInstall& m);
Result<SchemaInstallConf> decode_schema_install_conf(const Signal& s);
SignalOut encode(const ApiRegReq& m);
Result<ApiRegReq> decode_api_reg_req(const Signal& s);
SignalOut encode(const ApiRegConf& m);
Result<ApiRegConf> decode_api_reg_conf(const Signal& s);
Result<ScanReq> decode_scan_req(const Signal& s);
Result<ScanFragReq> decode_scan_frag_req(const Signal& s);
Result<ScanFragNext> decode_scan_frag_next(const Signal& s);
Result<ScanFragConf> decode_scan_frag_conf(const Signal& s);
Result<ScanFragRef> decode_scan_frag_ref(const Signal& s);
Result<ScanRows> decode_scan_rows(const Signal& s);
Result<ScanConf> decode_scan_conf(const Signal& s);
Result<ScanRef> decode_scan_ref(const Signal& s);
Result<ScanNext> decode_scan_next(const Signal& s);
Result<SchemaRef> decode_schema_ref(const Signal& s);

// Schema (TableDef) as bytes, for kCreateTableReq/Conf, kGetTableConf and kSchemaInstall.
// decode_table() runs validate_table() and check_table_fits_signals().
std::vector<std::byte> encode_table(const TableDef& table);
Result<TableDef> decode_table(std::span<const std::byte> bytes);

// The value entries of a row's columns in any unique index and its primary
// key, each at its longest: what a write's LqhKeyConf carries twice (before
// and after) so that TC can keep the hidden tables in step.
std::size_t unique_report_bytes(const TableDef& table);
inline constexpr std::size_t kMaxUniqueReportBytes = (frame::kMaxFrameBytes - 256) / 2;
// What validate_table() cannot know: that the signals about the table's
// rows fit a frame (unique_report_bytes() within kMaxUniqueReportBytes).
Status check_table_fits_signals(const TableDef& table);

}  // namespace fjord::engine::protocol
