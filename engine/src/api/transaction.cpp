// API: rows, transactions and scans (the parts a program calls directly).
#include <cstring>

#include "byte_buffer.h"
#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "row_entries.h"

namespace fjord::api {

using namespace engine::protocol;

// ---- Row and RowView -----------------------------------------------------------

// Setting a column again replaces its value: the old entry goes and the new
// one is appended, so entries() lists each column where it was last set.
// Row writes every entry itself (put_value), so they are read here without
// ValueCursor's checks. Replacing a value with one of the same padded length
// (a key set again for the next operation) moves the entries after it down
// and writes at the end: the same bytes, without erasing or growing. When
// the old entry was already last and the new value as long (not NULL
// either), its header stays as it is and only the value is copied.
Row::Place Row::place(uint16_t column, bool is_null, std::size_t value_bytes) {
  const std::size_t entry_bytes = value_entry_bytes(is_null ? 0 : value_bytes);
  const std::size_t size = entries_.size();
  std::size_t at = 0;
  detail::RowEntry e;
  while (detail::next_row_entry(entries_, at, e)) {
    if (e.column != column) continue;
    if (e.entry_bytes == entry_bytes) {
      const bool header_kept = at == size && !e.is_null && !is_null && e.value.size() == value_bytes;
      if (at != size) std::memmove(entries_.data() + e.offset, entries_.data() + at, size - at);
      return {std::span(entries_).subspan(size - entry_bytes), header_kept};
    }
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(e.offset),
                   entries_.begin() + static_cast<std::ptrdiff_t>(at));
    break;
  }
  const std::size_t end = entries_.size();
  entries_.resize(end + entry_bytes);
  return {std::span(entries_).subspan(end), false};
}

Row& Row::put(uint16_t column, const void* data, std::size_t bytes) {
  // A key of one column set again for the next operation (the row's only
  // entry is this column's, not NULL, as long): only the value changes,
  // without place()'s walk (a serial read sets its key this way each time).
  if (entries_.size() == value_entry_bytes(bytes)) {
    detail::RowEntry e;
    std::size_t at = 0;
    if (detail::next_row_entry(entries_, at, e) && e.column == column && !e.is_null && e.value.size() == bytes) {
      if (bytes != 0) std::memcpy(entries_.data() + detail::kEntryHeaderBytes, data, bytes);
      return *this;
    }
  }
  const Place p = place(column, false, bytes);
  if (p.header_kept) {
    if (bytes != 0) std::memcpy(p.entry.data() + detail::kEntryHeaderBytes, data, bytes);
    return *this;
  }
  const std::size_t written = put_value(p.entry, column, false, {static_cast<const std::byte*>(data), bytes});
  FJORD_ASSERT(written == p.entry.size());
  return *this;
}

Row& Row::set_null(uint16_t column) {
  const Place p = place(column, true, 0);
  const std::size_t written = put_value(p.entry, column, true, {});
  FJORD_ASSERT(written == p.entry.size());
  return *this;
}

std::size_t Row::count() const {
  std::size_t n = 0;
  std::size_t at = 0;
  detail::RowEntry e;
  while (detail::next_row_entry(entries_, at, e)) ++n;
  return n;
}

bool RowView::has(uint16_t column) const {
  ValueCursor c(entries_);
  ValueEntry e;
  while (c.next(e))
    if (e.column == column) return true;
  return false;
}

ValueRef RowView::value(uint16_t column) const {
  ValueCursor c(entries_);
  ValueEntry e;
  while (c.next(e))
    if (e.column == column) return e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes);
  return ValueRef::null();
}

// ---- Transaction -------------------------------------------------------------------

void Transaction::reset(uint32_t handle, TxId tx) {
  handle_ = handle;
  tx_ = tx;
  state_ = State::kOpen;
  started_ = false;
  requests_used_ = 0;
  ops_used_ = batch_first_ = 0;
  results_used_ = 0;
  conf_received_ = false;
  data_expected_ = data_received_ = 0;
  error_ = ErrorCode::kNone;
  // Mostly already so (a transaction that succeeded, its callback run):
  // replacing them would build and move a Status and a std::function.
  if (!status_.is_ok()) status_ = Status::ok();
  if (callback_) callback_ = nullptr;
}

// Each operation's request is kept as a train record (TcKeyTrain's format:
// its header words, then key, values and columns padded to 4), so that a
// batch's records, one after another in requests_, are its trains' sections
// as they stand: sending a train copies nothing per operation. The flags and
// batch count of a batch's first and last records are set when it is sent
// (mark_batch).
Operation& Transaction::define(OpType type, const TableDef& table, std::span<const std::byte> key,
                               std::span<const std::byte> values, std::span<const uint16_t> columns, LockMode lock,
                               const IndexDef* unique) {
  // A finished transaction still takes operations: the node may have
  // aborted it since its last execute (TcAbortRep, received in any poll),
  // which the program cannot know before it defines the next batch. They
  // are never sent; execute() returns why the transaction finished.
  FJORD_ASSERT_MSG(state_ != State::kExecuting, "operations defined on a transaction that is executing");
  FJORD_ASSERT_MSG(state_ != State::kIdle, "operations defined on a closed transaction");
  const TcKeyReq record{.table_id = table.table_id,
                        .table_version = table.version,
                        .op = type,
                        .lock = lock,
                        .flags = unique != nullptr ? kFlagViaUnique : 0,
                        .op_index = static_cast<uint32_t>(ops_used_),
                        .index_id = unique ? unique->index_id : 0,
                        .key = key,
                        .values = values,
                        .columns = std::as_bytes(columns)};
  const std::size_t record_bytes = tc_key_train_record_bytes(record);
  if (requests_.size() - requests_used_ < record_bytes) [[unlikely]]
    requests_.resize(std::max(requests_.size() * 2, requests_used_ + record_bytes));
  const std::size_t request_offset = requests_used_;
  const std::size_t written = put_tc_key_train_record(std::span(requests_).subspan(request_offset), record);
  FJORD_ASSERT(written == record_bytes);
  requests_used_ = request_offset + record_bytes;
  if (ops_used_ == ops_.size()) [[unlikely]]
    ops_.push_back(std::make_unique<Operation>());
  Operation& op = *ops_[ops_used_];
  op = Operation();
  op.type_ = type;
  op.index_ = static_cast<uint32_t>(ops_used_);
  op.table_id_ = table.table_id;
  op.table_version_ = table.version;
  op.index_id_ = record.index_id;
  op.lock_ = lock;
  op.via_unique_ = unique != nullptr;
  op.request_offset_ = request_offset;
  op.request_bytes_ = static_cast<uint32_t>(record_bytes);
  op.key_bytes_ = static_cast<uint32_t>(key.size());
  op.value_bytes_ = static_cast<uint32_t>(values.size());
  op.column_bytes_ = static_cast<uint32_t>(columns.size_bytes());
  ++ops_used_;
  return op;
}

// The words of a record's header known only once the batch's end is.
void Transaction::mark_batch(std::size_t batch) {
  using L = layout::TcKeyTrainRecord;
  const auto set_word = [&](std::size_t i, std::size_t word, uint32_t value) {
    std::memcpy(requests_.data() + ops_[i]->request_offset_ + 4 * word, &value, 4);
  };
  set_word(batch_first_, L::kFlags, flags_of(batch_first_));
  set_word(ops_used_ - 1, L::kFlags, flags_of(ops_used_ - 1));
  set_word(ops_used_ - 1, L::kBatchOps, static_cast<uint32_t>(batch));
}

TcKeyReq Transaction::request_of(std::size_t i, std::size_t batch) const {
  const Operation& op = *ops_[i];
  const bool last = i + 1 == ops_used_;
  const std::size_t key_at = op.request_offset_ + kTrainRecordHeaderBytes;
  const std::size_t values_at = key_at + padded_to_4(op.key_bytes_);
  const std::size_t columns_at = values_at + padded_to_4(op.value_bytes_);
  return TcKeyReq{.api_conn = handle_,
                  .tx = tx_,
                  .table_id = op.table_id_,
                  .table_version = op.table_version_,
                  .op = op.type_,
                  .lock = op.lock_,
                  .flags = flags_of(i),
                  .op_index = static_cast<uint32_t>(i),
                  .index_id = op.index_id_,
                  .batch_ops = last ? static_cast<uint32_t>(batch) : 0,
                  .key = std::span(requests_).subspan(key_at, op.key_bytes_),
                  .values = std::span(requests_).subspan(values_at, op.value_bytes_),
                  .columns = std::span(requests_).subspan(columns_at, op.column_bytes_)};
}

Operation& Transaction::read(const TableDef& table, const Row& key, std::span<const uint16_t> columns, LockMode lock) {
  return define(OpType::kRead, table, key.entries(), {}, columns, lock, nullptr);
}

Operation& Transaction::read_unique(const TableDef& table, const IndexDef& index, const Row& key,
                                    std::span<const uint16_t> columns, LockMode lock) {
  FJORD_ASSERT_MSG(index.kind == IndexKind::kUnique, "read_unique needs a unique index");
  return define(OpType::kRead, table, key.entries(), {}, columns, lock, &index);
}

Operation& Transaction::insert(const TableDef& table, const Row& row) {
  return define(OpType::kInsert, table, key_of(table, row), row.entries(), {}, LockMode::kExclusive, nullptr);
}

std::span<const std::byte> Transaction::key_of(const TableDef& table, const Row& row) {
  // The key travels apart from the values: pick the key columns out of the
  // row, into storage kept between operations.
  key_scratch_.clear();
  for (uint16_t p : table.primary_key) {
    ValueRef v = RowView(row.entries()).value(p);
    v.is_null ? key_scratch_.set_null(p) : key_scratch_.set(p, v.bytes);
  }
  return key_scratch_.entries();
}

Operation& Transaction::update(const TableDef& table, const Row& key, const Row& changes) {
  return define(OpType::kUpdate, table, key.entries(), changes.entries(), {}, LockMode::kExclusive, nullptr);
}

Operation& Transaction::write(const TableDef& table, const Row& row) {
  return define(OpType::kWrite, table, key_of(table, row), row.entries(), {}, LockMode::kExclusive, nullptr);
}

Operation& Transaction::remove(const TableDef& table, const Row& key) {
  return define(OpType::kDelete, table, key.entries(), {}, {}, LockMode::kExclusive, nullptr);
}

Status Transaction::execute(ExecType type) {
  Status sent = execute_async(type, nullptr);
  if (!sent) return sent;
  if (state_ == State::kExecuting &&
      !conn_.wait_until([&] { return state_ != State::kExecuting; }, conn_.options().request_timeout_ms))
    return status_.is_ok() ? Status(StatusCode::kTimeout, "no answer from the data node within the request timeout")
                           : status_;
  return status_;
}

// The callback is the answer's, so it is set only once the batch is out:
// a link found down while sending completes the transaction without it
// (fail_unsent), and execute_async returns the failure instead. (callback_
// is empty here: a completion took it, or it was never set.)
[[gnu::always_inline]] inline Status Transaction::sent_with(const Status& sent, Callback& done) {
  if (sent && state_ == State::kExecuting) [[likely]] {
    if (done) callback_ = std::move(done);
    return Status::ok();
  }
  if (state_ == State::kExecuting) conn_.fail_unsent(*this, sent);
  return status_;
}

Status Transaction::execute_async(ExecType type, Callback done) {
  if (state_ == State::kFinished)
    return status_.is_ok() ? Status(StatusCode::kInvalidArgument, "the transaction has finished") : status_;
  if (state_ != State::kOpen) return Status(StatusCode::kInvalidArgument, "the transaction is already executing");
  const std::size_t batch = ops_used_ - batch_first_;
  const uint16_t tc = tc_;
  exec_ = type;
  conf_received_ = false;
  data_expected_ = data_received_ = 0;
  results_used_ = 0;
  if (type == ExecType::kRollback || batch == 0) {
    requests_used_ = 0;
    ops_used_ = batch_first_;
    if (!started_ || (type == ExecType::kNoCommit)) {
      // Nothing at the data node to commit or roll back.
      state_ = type == ExecType::kNoCommit ? State::kOpen : State::kFinished;
      if (done) {
        callback_ = std::move(done);
        conn_.complete(*this);
      }
      return Status::ok();
    }
    const uint16_t number = type == ExecType::kRollback ? gsn::kTcRollbackReq : gsn::kTcCommitReq;
    state_ = State::kExecuting;
    ++conn_.in_flight_;
    const Status sent = conn_.send_frame(encode(TcTxMessage{number, handle_, tx_}), engine::block_numbers::kTc, tc);
    return sent_with(sent ? conn_.flush() : sent, done);
  }
  // An operation too large for any frame is refused before anything of the
  // batch is sent: the transaction stays as it was (closing it rolls back).
  // Only a batch of more bytes than a train holds can have one.
  if (requests_used_ > kMaxTrainBytes) [[unlikely]]
    if (Status s = conn_.check_lone_requests(*this, batch); !s) return s;
  state_ = State::kExecuting;
  ++conn_.in_flight_;
  if (batch > 1) mark_batch(batch);  // a batch of one goes as a TcKeyReq (request_of)
  const Status sent = conn_.send_key_requests(*this, batch);
  if (!sent) [[unlikely]]
    return sent_with(sent, done);
  started_ = true;
  requests_used_ = 0;
  return sent_with(conn_.flush(), done);
}

void Transaction::close() {
  FJORD_ASSERT_MSG(state_ != State::kIdle, "close() of a transaction already closed");
  if (state_ == State::kOpen && started_) (void)execute(ExecType::kRollback);
  if (state_ == State::kExecuting) {
    // Wait for the answer so that nothing arrives for a recycled handle,
    // without the callback: the program has let the transaction go (and a
    // callback that closed it too would free its slot twice).
    callback_ = nullptr;
    const auto answered = [&] { return state_ != State::kExecuting; };
    const uint32_t timeout = conn_.options().request_timeout_ms;
    if (!conn_.wait_until(answered, timeout) && started_) {
      // No answer within the request timeout: the node may still be running
      // it (waiting for a lock). Roll it back there, so that it neither
      // commits after the program gave it up nor keeps its locks. Its own
      // answer or the rollback's ends the wait.
      const SignalOut rollback = encode(TcTxMessage{gsn::kTcRollbackReq, handle_, tx_});
      if (conn_.send_frame(rollback, engine::block_numbers::kTc, tc_) && conn_.flush())
        (void)conn_.wait_until(answered, timeout);
    }
    if (state_ == State::kExecuting) --conn_.in_flight_;  // given up: a late answer finds the handle recycled
    FJORD_ASSERT(conn_.in_flight_ >= 0);
  }
  state_ = State::kIdle;
  if (handle_ & Session::kRefusedHandleBit) [[unlikely]]
    return conn_.release_refused(*this);
  conn_.free_transactions_.push_back(handle_ & 0xFFFF);
  uint16_t& generation = conn_.generations_[handle_ & 0xFFFF];
  generation = Session::next_generation(generation);
}

// ---- Scan ----------------------------------------------------------------------------

bool Scan::fetch_round() {
  round_done_ = false;
  const bool ok = conn_.wait_until([&] { return round_done_ || !status_.is_ok(); }, conn_.options().request_timeout_ms);
  if (!ok && status_.is_ok())
    status_ = Status(StatusCode::kTimeout, "scan round not answered within the request timeout");
  return status_.is_ok();
}

bool Scan::next(RowView& row) {
  for (;;) {
    if (!status_.is_ok() || closed_) return false;
    if (cursor_ < rows_.size()) {
      // rows_ holds whole rows only: decode_scan_rows checked each length.
      FJORD_ASSERT(rows_.size() - cursor_ >= 4);
      uint32_t len;
      std::memcpy(&len, rows_.data() + cursor_, 4);
      FJORD_ASSERT(rows_.size() - cursor_ - 4 >= len);
      row = RowView(std::span(rows_).subspan(cursor_ + 4, len));
      cursor_ += 4 + len;
      ++rows_returned_;
      return true;
    }
    if (finished_) return false;
    rows_.clear();
    cursor_ = 0;
    messages_received_ = 0;
    const SignalOut out = encode(gsn::kScanNextReq, ScanNext{handle_, scan_id_});
    if (Status s = conn_.send_frame(out, engine::block_numbers::kTc, tc_instance_); !s) status_ = s;
    if (status_.is_ok()) status_ = conn_.flush();
    if (!status_.is_ok() || !fetch_round()) return false;
  }
}

// Closed also after a failure: a round given up at the request timeout may
// still run at the node, and until the scan is closed it holds its records
// there (TC's, and each partition's at its LDM). TC closes it as soon as
// that round's answers are in. Only the answer that ends the scan is waited
// for (finished_, from ScanConf or ScanRef): then no record is left. Rows
// still on their way find the scan closed, or its slot under another
// scan_id, and are dropped (dispatch).
void Scan::close() {
  if (!finished_ && !closed_) {
    const SignalOut out = encode(gsn::kScanCloseReq, ScanNext{handle_, scan_id_});
    if (conn_.send_frame(out, engine::block_numbers::kTc, tc_instance_).is_ok() && conn_.flush().is_ok())
      (void)conn_.wait_until([&] { return finished_; }, conn_.options().request_timeout_ms);
  }
  rows_.clear();
  cursor_ = 0;
  closed_ = true;
}

}  // namespace fjord::api
