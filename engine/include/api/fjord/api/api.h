// The fjord API: how programs talk to data nodes (the NDB API in spirit).
//
//   auto conn = api::Connection::connect({.config_path = "cluster.ini", .node_id = 50,
//                                         .registry = &registry});
//   auto table = conn->get_table("accounts");
//   api::Transaction& tx = conn->start_transaction();
//   api::Row key;  key.set(0, uint64_t{42});
//   api::Operation& read = tx.read(*table, key);            // define many ...
//   if (auto s = tx.execute(api::ExecType::kCommit); !s) ...  // ... one round trip
//   uint64_t balance = read.value(2).as_uint64();
//   tx.close();
//
// Batched vs serial: every operation defined before execute() travels in one
// round trip ("batched"); executing after each operation is "serial".
// Asynchronous: execute_async() sends and returns; poll() receives and calls
// each transaction's callback when it completes, so one thread keeps many
// transactions in flight (NDB's executeAsynchPrepare + sendPollNdb).
//
// Errors: an operation that fails aborts its transaction (NDB's
// AbortOnError); execute() returns a Status whose message reads like
// "626: Tuple did not exist (operation 3)" and error() gives the code.
//
// Threads: one API node id serves any number of threads. Connect once per
// process with ClusterConnection::connect (NDB's Ndb_cluster_connection)
// and give each thread a Session of its own (NDB's Ndb) from new_session();
// a Session and everything it hands out belong to one thread at a time.
// Connection is a ClusterConnection and its one Session in one object, for
// a program that uses the API node from one thread: it locks nothing.
//
//   auto cluster = api::ClusterConnection::connect(options);   // once
//   auto session = (*cluster)->new_session();                  // per thread
//   api::Transaction& tx = (*session)->start_transaction();
//
// Hot path: defining key operations, execute/execute_async and poll (which
// dispatches the node's answers) run per operation; once their buffers have
// grown to the largest batch they allocate nothing (a session of a shared
// cluster connection: beyond its mailbox, which grows to the most answers
// handed to it at once). Connecting, schema
// calls and starting a scan are not on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"
#include "fjord/engine/key_codec.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/schema.h"
#include "fjord/transport/registry.h"

namespace fjord::api {

using engine::ColumnDef;
using engine::ColumnType;
using engine::IndexDef;
using engine::IndexKind;
using engine::TableDef;
using engine::ValueRef;
using engine::protocol::ErrorCode;
using engine::protocol::FilterOp;
using engine::protocol::LockMode;

enum class ExecType : uint8_t { kNoCommit, kCommit, kRollback };

enum class PollMode : uint8_t {
  kBusy,   // spin on the link: lowest latency, burns a core
  kSleep,  // spin for spin_us, then sleep until data arrives
};

struct ConnectOptions {
  std::string config_path;                             // the cluster's config file, or
  std::string config_text;                             // its text (config_path wins when both are set)
  NodeId node_id = kNoNode;                            // this API node; 0 = the first [api] section
  transport::TransporterRegistry* registry = nullptr;  // required: the transporters built in
  uint32_t connect_timeout_ms = 10000;
  uint32_t request_timeout_ms = 30000;  // a blocking call gives up (kTimeout) after this
  PollMode poll_mode = PollMode::kBusy;
  // kSleep: spin this long first. A Session of a ClusterConnection that
  // waits while another session receives spins this long, then sleeps on
  // its own futex until its answer is handed to it (any poll mode).
  uint32_t spin_us = 50;
  // Transactions open at once on this connection, or on each session (1..65536). One started
  // beyond it is refused: it has finished, its status() says why, and
  // execute() returns that (see Connection::start_transaction).
  uint32_t max_transactions = 1024;
};

// Column values by table position, owning their bytes. Used for keys, rows
// to write and scan bounds. Setting a column again replaces its value.
class Row {
 public:
  Row& set(uint16_t column, int32_t v) { return put(column, &v, 4); }
  Row& set(uint16_t column, uint32_t v) { return put(column, &v, 4); }
  Row& set(uint16_t column, int64_t v) { return put(column, &v, 8); }
  Row& set(uint16_t column, uint64_t v) { return put(column, &v, 8); }
  Row& set(uint16_t column, std::string_view bytes) { return put(column, bytes.data(), bytes.size()); }
  Row& set(uint16_t column, std::span<const std::byte> bytes) { return put(column, bytes.data(), bytes.size()); }
  Row& set_null(uint16_t column);
  void clear() { entries_.clear(); }
  bool empty() const { return entries_.empty(); }
  // The value entries (protocol.h format), in the order set.
  std::span<const std::byte> entries() const { return entries_; }
  std::size_t count() const;

 private:
  Row& put(uint16_t column, const void* data, std::size_t bytes);
  // Where column's new entry goes: the old entry (if any) is removed and the
  // space is at the end. header_kept: it already holds this column's header
  // for a non-NULL value of value_bytes, so only the value needs writing.
  struct Place {
    std::span<std::byte> entry;
    bool header_kept;
  };
  Place place(uint16_t column, bool is_null, std::size_t value_bytes);
  std::vector<std::byte> entries_;
};

// Values of a row read back (a read operation, or one row of a scan).
class RowView {
 public:
  RowView() = default;
  explicit RowView(std::span<const std::byte> entries) : entries_(entries) {}
  bool has(uint16_t column) const;
  // The value of a column; NULL (is_null) if the column was not returned or
  // is NULL. Valid until the transaction/scan buffer is reused.
  ValueRef value(uint16_t column) const;
  std::span<const std::byte> entries() const { return entries_; }

 private:
  std::span<const std::byte> entries_;
};

class ClusterConnection;
class Session;
class Connection;
class Transaction;
namespace detail {
struct Mailbox;
struct SharedLink;
}  // namespace detail

class Operation {
 public:
  // After a successful execute: the values a read returned.
  const RowView& row() const { return row_; }
  ValueRef value(uint16_t column) const { return row_.value(column); }
  bool has_row() const { return has_row_; }
  engine::protocol::OpType type() const { return type_; }

 private:
  friend class Transaction;
  friend class Session;
  engine::protocol::OpType type_ = engine::protocol::OpType::kRead;
  bool has_row_ = false;
  uint32_t index_ = 0;
  std::size_t result_offset_ = 0;  // where its values start in the transaction's result buffer
  std::size_t result_bytes_ = 0;
  RowView row_;
  // Its request until execute(): the table, how to reach the row, and where
  // its train record (header, key, values, columns) lies in the
  // transaction's request buffer.
  uint32_t table_id_ = 0;
  uint32_t table_version_ = 0;
  uint32_t index_id_ = 0;  // with via_unique_
  LockMode lock_ = LockMode::kCommitted;
  bool via_unique_ = false;
  std::size_t request_offset_ = 0;
  uint32_t request_bytes_ = 0;
  uint32_t key_bytes_ = 0;
  uint32_t value_bytes_ = 0;
  uint32_t column_bytes_ = 0;
};

class Transaction {
 public:
  using Callback = std::function<void(Transaction&, const Status&)>;

  // Define operations (sent at the next execute). `columns` lists the
  // columns to read (empty: all). On a finished transaction they are kept
  // but never sent: the next execute returns why it finished.
  Operation& read(const TableDef& table, const Row& key, std::span<const uint16_t> columns = {},
                  LockMode lock = LockMode::kCommitted);
  Operation& read_unique(const TableDef& table, const IndexDef& index, const Row& key,
                         std::span<const uint16_t> columns = {}, LockMode lock = LockMode::kCommitted);
  Operation& insert(const TableDef& table, const Row& row);
  Operation& update(const TableDef& table, const Row& key, const Row& changes);
  Operation& write(const TableDef& table, const Row& row);  // insert or update
  Operation& remove(const TableDef& table, const Row& key);

  // Sends every defined operation in one round trip and waits. kRollback
  // discards the defined operations and rolls back. After kCommit,
  // kRollback or an error the transaction is finished.
  Status execute(ExecType type);
  // Sends and returns; `done` runs inside Connection::poll(). When it
  // returns a failure, nothing is in flight and `done` never runs.
  Status execute_async(ExecType type, Callback done);

  bool finished() const { return state_ == State::kFinished; }
  ErrorCode error() const { return error_; }
  const Status& status() const { return status_; }
  std::size_t operation_count() const { return ops_used_; }
  Operation& operation(std::size_t i) { return *ops_[i]; }
  // Releases the transaction (rolling back first if it is still open). One
  // in flight is waited for, and its callback does not run.
  void close();

 private:
  Status sent_with(const Status& sent, Callback& done);
  friend class Session;
  enum class State : uint8_t { kIdle, kOpen, kExecuting, kFinished };
  explicit Transaction(Session& session) : conn_(session) {}
  // The primary-key columns of `row`, valid until the next call (define copies them).
  std::span<const std::byte> key_of(const TableDef& table, const Row& row);
  Operation& define(engine::protocol::OpType type, const TableDef& table, std::span<const std::byte> key,
                    std::span<const std::byte> values, std::span<const uint16_t> columns, LockMode lock,
                    const IndexDef* unique);
  // The TcKeyReq of operation i of a batch of `batch` operations.
  engine::protocol::TcKeyReq request_of(std::size_t i, std::size_t batch) const;
  uint32_t flags_of(std::size_t i) const {  // its TcKeyReq flags
    using namespace engine::protocol;
    const bool last = i + 1 == ops_used_;
    return (ops_[i]->via_unique_ ? kFlagViaUnique : 0) | (!started_ && i == batch_first_ ? kFlagStartTx : 0) |
           (last ? kFlagExecute | (exec_ == ExecType::kCommit ? kFlagCommit : 0) : 0);
  }
  // Sets the flags and batch count in the batch's first and last records.
  void mark_batch(std::size_t batch);
  // A read's values arrived (KeyData or a KeyDataTrain record): keep them
  // for operation op_index (< ops_used_) and count the data message.
  void take_values(uint32_t op_index, std::span<const std::byte> values);  // in connection.cpp, beside dispatch
  // The same, the values already copied to results_ at `at`.
  void values_taken(uint32_t op_index, std::size_t at, std::size_t bytes);
  void reset(uint32_t handle, engine::protocol::TxId tx);

  Session& conn_;
  uint32_t handle_ = 0;  // api_conn: slot | generation << 16
  engine::protocol::TxId tx_;
  uint16_t tc_ = 0;  // the TC instance coordinating it
  State state_ = State::kIdle;
  bool started_ = false;  // TC knows the transaction
  // The batch being defined: each operation's request as a train record
  // (the first requests_used_ bytes; the storage is kept between batches).
  std::vector<std::byte> requests_;
  std::size_t requests_used_ = 0;
  std::vector<std::unique_ptr<Operation>> ops_;
  std::size_t ops_used_ = 0;
  std::size_t batch_first_ = 0;     // first operation of the batch in flight
  std::vector<std::byte> results_;  // values of reads in the batch (the first results_used_ bytes)
  Row key_scratch_;                 // insert and write: the key picked out of the row (capacity kept)
  std::size_t results_used_ = 0;
  // Completion of the batch in flight.
  bool conf_received_ = false;
  uint32_t data_expected_ = 0;
  uint32_t data_received_ = 0;
  ExecType exec_ = ExecType::kNoCommit;  // of the batch in flight: a commit or rollback ends the transaction
  ErrorCode error_ = ErrorCode::kNone;
  Status status_;
  Callback callback_;
};

struct ScanSpec {
  const TableDef* table = nullptr;
  const IndexDef* index = nullptr;  // an ordered index, or nullptr for a full table scan
  // Bounds on a prefix of the index columns (ordered scans only).
  bool has_lower = false, lower_inclusive = true;
  Row lower;
  bool has_upper = false, upper_inclusive = true;
  Row upper;
  struct Predicate {
    uint16_t column;
    FilterOp op;
    Row value;  // one value for `column` (unused for IS [NOT] NULL)
  };
  std::vector<Predicate> filter;  // ANDed, evaluated in the data node
  std::vector<uint16_t> columns;  // empty: all
  uint32_t batch_rows = 64;       // per partition per round: 1..protocol::kMaxScanBatchRows
};

class Scan {
 public:
  // The next row; false when the scan is done (check status()). The view is
  // valid until the next call.
  bool next(RowView& row);
  const Status& status() const { return status_; }
  uint64_t rows_returned() const { return rows_returned_; }
  // Stops early if needed and releases the scan; the Scan may then be
  // handed out again by Connection::scan(). Close every scan, also one read
  // to its end and one that failed: after a timeout its round may still run
  // at the data node, and closing it frees what it holds there (TC's scan
  // record, each partition's at its LDM). Waits up to the request timeout
  // for the node to confirm; answers for the scan that come later are
  // dropped.
  void close();

 private:
  friend class Session;
  explicit Scan(Session& s) : conn_(s) {}
  bool fetch_round();

  Session& conn_;
  uint32_t handle_ = 0;
  uint32_t scan_id_ = 0;
  uint16_t tc_instance_ = 0;
  NodeId data_node_ = kNoNode;
  uint32_t table_id_ = 0;  // of the definition it was opened with
  uint32_t table_version_ = 0;
  bool finished_ = false;
  bool closed_ = false;
  bool round_done_ = false;
  bool conf_ = false;  // this round's ScanConf arrived
  uint32_t round_rows_ = 0;
  uint32_t messages_expected_ = 0;
  uint32_t messages_received_ = 0;
  std::vector<std::byte> rows_;  // ScanRows sections of the current round
  std::size_t cursor_ = 0;
  uint64_t rows_returned_ = 0;
  Status status_;
};

// The link to the data node of one API node id, shared by the threads of a
// process (NDB's Ndb_cluster_connection). Each thread works through a
// Session of its own, made by new_session(). connect(), new_session() and
// close() may be called from any thread; the object outlives every Session
// made from it. Not on the hot path: the sessions are.
//
// Sending to the data node takes the link's send lock for the time of
// packing one frame (or flushing); receiving is done by one session at a
// time, the poll owner, which hands every answer to the session whose
// transaction or scan it names (its api_conn) and wakes that session.
// docs/api.md, "Threads", states the waking protocol.
class ClusterConnection {
 public:
  static Result<std::unique_ptr<ClusterConnection>> connect(const ConnectOptions& options);
  ~ClusterConnection();
  ClusterConnection(const ClusterConnection&) = delete;
  ClusterConnection& operator=(const ClusterConnection&) = delete;

  // A handle for one thread (NDB's Ndb). kResourceExhausted beyond
  // kMaxSessions alive at once; kLinkDown once the connection is closed.
  Result<std::unique_ptr<Session>> new_session();
  // Closes the link: every session's wait ends at once with kLinkDown and
  // `why`, and nothing more can be sent. Sessions stay to be destroyed.
  void close(const std::string& why = "the program closed the cluster connection");

  NodeId node_id() const { return self_; }
  NodeId data_node() const { return data_node_; }
  const ConnectOptions& options() const { return options_; }
  // Sessions alive at once (their index travels in bits 24..30 of every
  // api_conn and request id, so that answers find them).
  static constexpr uint32_t kMaxSessions = 127;

 private:
  friend class Session;
  friend class Connection;
  ClusterConnection(ConnectOptions options, bool shared);
  static Result<std::unique_ptr<ClusterConnection>> open(const ConnectOptions& options, bool shared);
  Status establish();
  Status register_node();
  // Sends ApiRegReq: false if the link would not take it.
  bool send_registration();
  // One receive during registration: false if the link is down.
  bool receive_registration();
  Status not_connected() const;

  ConnectOptions options_;
  bool shared_ = false;  // made by connect(): sessions lock and route
  NodeId self_ = kNoNode;
  NodeId data_node_ = kNoNode;
  uint16_t tc_instances_ = 1;
  uint16_t ldm_instances_ = 1;
  bool registered_ = false;
  std::unique_ptr<transport::Transporter> link_;
  std::unique_ptr<detail::SharedLink> shared_link_;  // the locks, the poll right and the session table
};

// A handle for one thread at a time on a ClusterConnection (NDB's Ndb): its
// own transactions, scans, buffers, table cache and completion state. A
// Session and everything it hands out belong to the thread that uses it;
// sessions of one ClusterConnection never wait on one another except for
// the link's send lock and for the poll owner's hand-off of their answers.
// Destroying a session rolls back the transactions it has open and closes
// its scans.
class Session {
 public:
  virtual ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  NodeId node_id() const { return self_; }
  NodeId data_node() const { return data_node_; }

  // Schema. get_table caches; the returned pointer stays valid until the
  // table is dropped through this session. A cached definition that an
  // operation or scan finds stale (723 or 241: the table was dropped, maybe
  // created again, by another connection) is fetched again by the next
  // get_table; the stale one stays readable.
  Result<const TableDef*> create_table(const TableDef& table);
  Status drop_table(const std::string& name);
  Result<const TableDef*> get_table(const std::string& name);

  // A transaction (closed with Transaction::close). `hint` (a primary key of
  // `hint_table`) picks the TC next to that key's partition. With
  // ConnectOptions.max_transactions open already, the transaction returned
  // is refused: finished from the start with status() kResourceExhausted,
  // so execute() and execute_async() fail with it and send nothing; close
  // it as any other.
  Transaction& start_transaction(const TableDef* hint_table = nullptr, const Row* hint = nullptr);

  Result<Scan*> scan(const ScanSpec& spec);

  // Receives and completes what has arrived; returns the number of
  // transactions completed (their callbacks ran). Waits up to timeout_ms for
  // at least min_completions (0 = do not wait).
  int poll(uint32_t timeout_ms, int min_completions = 1);
  // Transactions sent and not yet complete.
  int in_flight() const { return in_flight_; }

  const ConnectOptions& options() const { return options_; }

 protected:
  // index: the session's place in the cluster's session table (0 for a
  // Connection's own); owned: the cluster connection a Connection owns.
  Session(ClusterConnection& cluster, uint32_t index, std::unique_ptr<ClusterConnection> owned);

 private:
  friend class Transaction;
  friend class Scan;
  friend class ClusterConnection;
  Status send_frame(const engine::protocol::SignalOut& out, uint16_t block, uint16_t instance);
  // send_frame's packing, the link known to be up.
  Status pack_frame(const engine::protocol::SignalOut& out, uint16_t block, uint16_t instance);
  // Sends the requests of tx's batch: trains of several (TcKeyTrain), or a
  // TcKeyReq for an operation that goes alone.
  Status send_key_requests(const Transaction& tx, std::size_t batch);
  // Its loop, for a session of a shared cluster connection or not (the
  // choice made once per batch).
  template <bool kShared>
  Status send_key_requests_as(const Transaction& tx, std::size_t batch);
  // Whether each operation of tx's batch that goes alone fits one frame;
  // the failure names the first that does not.
  Status check_lone_requests(const Transaction& tx, std::size_t batch) const;
  // tx's batch could not be sent (the link is down, or stayed full): it
  // completes with `why` (4025 when the link is down), without its callback.
  void fail_unsent(Transaction& tx, const Status& why);
  // Why nothing can be sent: the link's down reason.
  Status not_connected() const;
  // Room for a frame of `bytes` in the send buffer (at least that much; it
  // may be more) once a reserve found none: waits, receiving, while the
  // buffer is full, up to the request timeout.
  Status wait_for_room(std::size_t bytes, std::span<std::byte>& space);
  Status flush();
  // Receives one batch of frames and dispatches them. Returns false if the
  // link is down.
  bool receive_once();
  // Hands a signal from the data node to its handler below. Bytes from the
  // node are checked there: one that does not decode, or names what the
  // transaction does not have, is a protocol_fault, never an assertion.
  void dispatch(const engine::Signal& signal);
  // One handler per signal. Answers to key operations:
  void on_tc_key_conf(const engine::Signal& s);
  void on_key_data(const engine::Signal& s);  // kKeyData and kKeyDataConf
  void on_key_data_train(const engine::Signal& s);
  void on_tc_key_ref(const engine::Signal& s);
  void on_tc_rollback_conf(const engine::Signal& s);
  void on_tc_abort_rep(const engine::Signal& s);
  // tx's batch got an answer; `conf`: it carried the batch's TcKeyConf,
  // which says the batch sends data_messages KeyData. Completes tx once the
  // conf and all of those are in.
  void batch_answered(Transaction& tx, bool conf, uint32_t data_messages);
  // Scans: on_scan_answer finds the open scan an answer is for and passes
  // it to the handler of its kind, which returns false after a protocol
  // fault.
  void on_scan_answer(const engine::Signal& s);
  bool on_scan_rows(Scan& scan, const engine::Signal& s);
  bool on_scan_conf(Scan& scan, const engine::Signal& s);
  bool on_scan_ref(Scan& scan, const engine::Signal& s);
  // Schema answers.
  void on_schema_ref(const engine::Signal& s);
  void on_schema_answer(const engine::Signal& s);
  // Receives until done() (a callable returning bool) holds: false if
  // timeout_ms passes first, or the link went down and done() still does
  // not hold. Inline, so the predicate is called directly. The deadline is
  // taken at the first poll that did not finish the wait, so a wait that the
  // first poll finishes reads no clock.
  template <typename Done>
  bool wait_until(const Done& done, uint32_t timeout_ms) {
    if (shared_) [[unlikely]]
      return wait_shared([](const void* d) { return (*static_cast<const Done*>(d))(); }, &done, timeout_ms);
    uint64_t deadline = 0;
    for (uint32_t polls = 0; !done(); ++polls) {
      if (!receive_once()) return done();
      if (done()) return true;
      if (!wait_for_more(deadline, timeout_ms, polls)) return false;
    }
    return true;
  }
  // wait_until's step after the poll numbered `polls` (from 0) that did not
  // finish: false once the deadline (set at the first step) has passed,
  // looked at every 64th poll when busy polling; with PollMode::kSleep,
  // sleeps until frames arrive.
  bool wait_for_more(uint64_t& deadline, uint32_t timeout_ms, uint32_t polls);

  // ---- a session of a shared ClusterConnection (session_shared.cpp) ----
  // wait_until's loop: answers routed here by the poll owner are dispatched
  // on this thread; the poll right, when free, is taken to receive for
  // every session; else the thread spins, then sleeps until woken.
  bool wait_shared(bool (*done)(const void*), const void* context, uint32_t timeout_ms);
  // As the poll owner: receives one batch, dispatching this session's
  // answers and handing the others to their sessions; with nothing there,
  // waits for the link up to the deadline or a short slice.
  void poll_as_owner(uint64_t deadline_ns);
  // One receive as the poll owner: false if nothing arrived.
  bool receive_routed();
  // Dispatches the frames the poll owner handed to this session.
  void drain_mailbox();
  // poll()'s receive: the mailbox, then the link if the poll right is free.
  bool receive_with_poll_right(detail::SharedLink& shared);
  void poll_shared_once();
  // Spins up to ConnectOptions.spin_us, then sleeps on this session's own
  // futex until woken or the deadline (bounded by a slice).
  void sleep_until_woken(uint64_t deadline_ns);
  // Holding the link's send lock: pack_frame and flush. With `then_flush`
  // the frame is flushed in the same hold, and the flush() that follows
  // finds nothing left to do unless that flush did not end the link's
  // pending bytes (then it flushes again, and reports a link down).
  Status pack_frame_shared(const engine::protocol::SignalOut& out, uint16_t block, uint16_t instance,
                           bool then_flush = false);
  Status flush_shared();
  // The slow path of pack_frame_shared: waits for room (the send lock
  // released between tries, receiving when the poll right is free).
  Status wait_for_room_shared(std::size_t bytes, std::span<std::byte>& space);
  // Rolls back what a thread left open when its session goes.
  void close_everything_open();
  // The high 15 bits (generation and session index) of the next handle of
  // a slot, after g.
  static uint16_t next_generation(uint16_t g) {
    return static_cast<uint16_t>((g & ~kGenerationMask) | ((g + 1) & kGenerationMask));
  }
  static constexpr uint16_t kGenerationMask = 0xFF;
  // The executing transaction an answer with this api_conn and transaction
  // id is for; nullptr for a late answer (its handle recycled, or given up).
  Transaction* executing(uint32_t handle, engine::protocol::TxId tx);
  // start_transaction() beyond ConnectOptions.max_transactions.
  Transaction& refused_transaction();
  // Gives a closed refused transaction back to its pool.
  void release_refused(Transaction& tx);
  // In a refused transaction's handle (never sent), with its slot in the
  // refused pool below it.
  static constexpr uint32_t kRefusedHandleBit = 0x8000'0000u;
  void complete(Transaction& tx);
  // Fails every transaction and scan in flight with `code` and why's reason.
  void fail_everything(const Status& why, StatusCode code = StatusCode::kLinkDown);
  void protocol_fault(const engine::Signal& s, const Status& why);
  static Status bad_op_index(uint32_t op_index, uint32_t ops);
  // After `error` from an operation or scan on that definition: a cached
  // definition the node no longer has leaves the cache (kept in
  // stale_tables_, so pointers to it stay valid).
  void forget_if_stale(uint32_t table_id, uint32_t version, ErrorCode error);
  // Moves a cached definition to stale_tables_ (get_table no longer
  // answers with it; pointers to it stay valid).
  void retire_table(const TableDef* stale);
  // Caches a definition from DICT in place of any of the same name.
  const TableDef* cache_table(TableDef def);
  Result<std::vector<std::byte>> schema_call(uint16_t number, std::span<const std::byte> payload, uint16_t expected);
  uint16_t tc_for(const TableDef* table, const Row* key);
  // The TC next to the partition of `key`, a primary key of `table`; nullopt
  // when the Row is not exactly a key of the table (the hint is ignored).
  std::optional<uint16_t> hinted_tc(const TableDef& table, const Row& key);
  // The primary-key codec of a table for hinted transactions, built once per
  // table version (building one allocates).
  const engine::KeyCodec& primary_key_codec(const TableDef& table);

  // Declared first so that it goes last: a Connection's own cluster
  // connection (nullptr for a session made by new_session()).
  std::unique_ptr<ClusterConnection> owned_cluster_;
  ClusterConnection& cluster_;
  uint32_t index_ = 0;                  // in the cluster's session table; bits 24..30 of api_conn
  bool shared_ = false;                 // of a ClusterConnection made by connect(): lock, route, sleep
  bool polling_ = false;                // shared_: this session holds the poll right
  detail::Mailbox* mailbox_ = nullptr;  // shared_ only: the SharedLink's, for this index
  ConnectOptions options_;
  NodeId self_ = kNoNode;
  NodeId data_node_ = kNoNode;
  // Committed bytes a flush has not handed all to the link yet (its last
  // flush said kPending, or nothing flushed since the last pack_frame).
  bool unflushed_ = false;
  uint16_t tc_instances_ = 1;
  uint16_t ldm_instances_ = 1;
  transport::Transporter* link_ = nullptr;  // the cluster connection's
  uint64_t next_tx_ = 1;
  // The high bits of this session's transaction ids: unique per API node,
  // the node id above the session's index, the session's own count below.
  uint64_t tx_id_base_ = 0;
  uint32_t next_request_ = 1;
  uint32_t next_scan_ = 1;
  uint16_t next_tc_ = 0;
  std::vector<std::unique_ptr<Transaction>> transactions_;
  std::vector<uint16_t> generations_;
  std::vector<uint32_t> free_transactions_;
  // Transactions refused beyond max_transactions (refused_transaction()).
  std::vector<std::unique_ptr<Transaction>> refused_;
  std::vector<uint32_t> free_refused_;
  std::vector<std::unique_ptr<Scan>> scans_;
  // Encodes spec's bounds and filter, as ScanReq carries them, into
  // scan_bounds_ and scan_filter_.
  void encode_scan_conditions(const ScanSpec& spec);
  std::vector<std::byte> scan_bounds_;  // scan(): the request's bounds and filter, reused
  std::vector<std::byte> scan_filter_;
  int in_flight_ = 0;
  int completed_ = 0;
  // Schema replies.
  uint32_t schema_waiting_ = 0;
  bool schema_done_ = false;
  uint16_t schema_number_ = 0;
  ErrorCode schema_error_ = ErrorCode::kNone;
  std::vector<std::byte> schema_payload_;
  std::vector<std::unique_ptr<TableDef>> tables_;
  std::vector<std::unique_ptr<TableDef>> stale_tables_;
  struct HintCodec {
    uint32_t table_id;
    uint32_t version;
    std::unique_ptr<engine::KeyCodec> codec;
  };
  std::vector<HintCodec> hint_codecs_;
};

// One thread's access to the cluster over a cluster connection of its own:
// a ClusterConnection and its one Session in one object, for a program (or
// a thread) that owns an API node id alone. Nothing is locked or routed on
// its paths.
class Connection final : public Session {
 public:
  static Result<std::unique_ptr<Connection>> connect(const ConnectOptions& options);

 private:
  Connection(ClusterConnection& cluster, std::unique_ptr<ClusterConnection> owned)
      : Session(cluster, 0, std::move(owned)) {}
};

// Column position by name (-1 if absent): a convenience over TableDef.
inline int column_of(const TableDef& table, std::string_view name) { return table.column_index(name); }

}  // namespace fjord::api
