// API: the connection to the data node, the receive loop and schema calls.
#include <algorithm>
#include <cstring>
#include <thread>

#include "byte_buffer.h"
#include "fjord/api/api.h"
#include "fjord/base/clock.h"
#include "fjord/base/log.h"
#include "fjord/engine/cluster_config.h"
#include "shared_link.h"

namespace fjord::api {

using namespace engine::protocol;
using engine::block_numbers::kApi;
using engine::block_numbers::kDict;
using engine::block_numbers::kTc;

namespace {
constexpr uint32_t kScanHandleBit = 0x8000'0000u;
uint64_t ms(uint32_t v) { return uint64_t{v} * 1'000'000; }

// What the data node would refuse in a scan's columns, filter and bounds
// (LDM checks them again: they are a peer's bytes there), worded for the
// program; the node's answer would be a bare kBadRequest.
Status bad_spec(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

Status check_column(const TableDef& t, const char* field, uint32_t column) {
  if (column < t.columns.size()) return Status::ok();
  return bad_spec(std::string("ScanSpec.") + field + ": table '" + t.name + "' has no column " +
                  std::to_string(column) + " (it has " + std::to_string(t.columns.size()) + ")");
}

// A value no column value can equal would make its predicate or bound
// meaningless: refused, naming the column's limit.
Status check_width(const TableDef& t, const char* field, uint16_t column, const ValueRef& v) {
  const uint32_t width = engine::integer_width(t.columns[column].type);
  if (v.is_null) return Status::ok();
  if (width == 0) {
    const uint32_t most = engine::max_value_bytes(t.columns[column]);
    if (v.bytes.size() <= most) return Status::ok();
    return bad_spec(std::string("ScanSpec.") + field + ": column '" + t.columns[column].name + "' (" +
                    engine::column_type_name(t.columns[column].type) + ") takes at most " + std::to_string(most) +
                    " bytes, not " + std::to_string(v.bytes.size()));
  }
  if (v.bytes.size() == width) return Status::ok();
  return bad_spec(std::string("ScanSpec.") + field + ": column '" + t.columns[column].name + "' (" +
                  engine::column_type_name(t.columns[column].type) + ") takes " + std::to_string(width) +
                  "-byte values, not " + std::to_string(v.bytes.size()));
}

// A bound's values name the first n columns of the index, n = how many.
Status check_bound(const TableDef& t, const IndexDef& index, const char* field, const Row& bound) {
  const std::size_t n = bound.count();
  ValueCursor values(bound.entries());
  ValueEntry e;
  while (values.next(e)) {
    if (Status s = check_column(t, field, e.column); !s) return s;
    const auto first = index.columns.begin();
    if (n > index.columns.size() || std::find(first, first + static_cast<std::ptrdiff_t>(n), e.column) == first + n)
      return bad_spec(std::string("ScanSpec.") + field + ": column '" + t.columns[e.column].name +
                      "' is not among the first " + std::to_string(n) + " columns of index '" + index.name + "'");
    if (Status s = check_width(t, field, e.column, e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes)); !s)
      return s;
  }
  return Status::ok();
}

Status check_scan_spec(const api::ScanSpec& spec) {
  const TableDef& t = *spec.table;
  if (spec.batch_rows == 0 || spec.batch_rows > kMaxScanBatchRows)
    return bad_spec("ScanSpec.batch_rows is " + std::to_string(spec.batch_rows) + "; accepted 1.." +
                    std::to_string(kMaxScanBatchRows));
  for (uint16_t column : spec.columns)
    if (Status s = check_column(t, "columns", column); !s) return s;
  for (const api::ScanSpec::Predicate& p : spec.filter) {
    if (Status s = check_column(t, "filter", p.column); !s) return s;
    if (p.op == FilterOp::kIsNull || p.op == FilterOp::kIsNotNull) continue;
    if (Status s = check_width(t, "filter", p.column, api::RowView(p.value.entries()).value(p.column)); !s) return s;
  }
  if (!spec.has_lower && !spec.has_upper) return Status::ok();
  // Without an index the bounds would be left out and every row returned.
  if (!spec.index) return bad_spec("ScanSpec has bounds but no ordered index");
  if (spec.has_lower)
    if (Status s = check_bound(t, *spec.index, "lower", spec.lower); !s) return s;
  if (spec.has_upper)
    if (Status s = check_bound(t, *spec.index, "upper", spec.upper); !s) return s;
  return Status::ok();
}
}  // namespace

// ---- sending and receiving -----------------------------------------------------------

// The slow path of a reservation (the first attempt, inline at each caller,
// almost always succeeds).
Status Session::wait_for_room(std::size_t bytes, std::span<std::byte>& space) {
  const uint64_t deadline = monotonic_ns() + ms(options_.request_timeout_ms);
  for (;;) {
    if (!link_->is_up()) return link_->down_reason();
    // The data node is not reading: keep receiving so it can make progress.
    unflushed_ = link_->flush() == transport::FlushStatus::kPending;
    receive_once();
    if (monotonic_ns() > deadline) return Status(StatusCode::kTimeout, "send buffer to the data node stayed full");
    space = link_->reserve(bytes);
    if (space.empty()) continue;
    FJORD_ASSERT(space.size() >= bytes);  // all or nothing
    return Status::ok();
  }
}

// send_frame once the link is known to be up; inline in the key path.
[[gnu::always_inline]] inline Status Session::pack_frame(const SignalOut& out, uint16_t block, uint16_t instance) {
  // A session of a shared cluster connection packs with pack_frame_shared.
  const bool checksum = link_->config().checksum;
  const std::size_t bytes = frame::frame_bytes_for(out.word_count, out.section_list(), checksum);
  if (bytes == 0) return Status(StatusCode::kInvalidArgument, "request too large for one 32 KB frame");
  // A reservation is all or nothing (Transporter::reserve): one that is not
  // empty has room for the frame. wait_for_room asserts it; on this path,
  // once per request, the transporter is trusted.
  std::span<std::byte> space = link_->reserve(bytes);
  if (space.empty())
    if (Status s = wait_for_room(bytes, space); !s) return s;
  frame::pack_frame_sized(space.data(), bytes, {out.number, {block, instance}, {kApi, 0}, 0}, out.data(),
                          out.section_list(), checksum);
  link_->commit(bytes, 1);
  unflushed_ = true;
  return Status::ok();
}

Status Session::not_connected() const {
  return Status(StatusCode::kLinkDown, "not connected to data node " + std::to_string(data_node_) +
                                           (link_ ? ": " + link_->down_reason().message() : std::string()));
}

Status Session::send_frame(const SignalOut& out, uint16_t block, uint16_t instance) {
  if (!link_ || !link_->is_up()) return not_connected();
  if (shared_) [[unlikely]]
    return pack_frame_shared(out, block, instance);
  return pack_frame(out, block, instance);
}

// A batch of several operations goes out as trains (TcKeyTrain) of up to
// kMaxTrainOps requests, as few as hold it and of even length: the data
// node answers each train's reads in one KeyDataTrain (docs/api.md,
// "Trains"). A train holds what fits kMaxTrainBytes; an operation that goes
// alone (a batch of one, or one that only fits a train by itself) is a
// plain TcKeyReq. Each train but the last is flushed as soon as it is
// packed, so that the node starts on it while the next is packed. Few long
// trains rather than many short ones that would overlap more: the node
// saves more per signal it does not receive than the overlap gains.

template <bool kShared>
[[gnu::always_inline]] inline Status Session::send_key_requests_as(const Transaction& tx, std::size_t batch) {
  if (!link_ || !link_->is_up()) return not_connected();
  std::size_t i = tx.batch_first_;
  while (i < tx.ops_used_) {
    const std::size_t remaining = tx.ops_used_ - i;
    // The batch's records lie one after another: a train is a run of them.
    uint32_t count = 0;
    std::size_t bytes = 0;
    if (remaining > 1) {
      const std::size_t trains = (remaining + kMaxTrainOps - 1) / kMaxTrainOps;
      const std::size_t length = (remaining + trains - 1) / trains;
      for (; count < length && bytes + tx.ops_[i + count]->request_bytes_ <= kMaxTrainBytes; ++count)
        bytes += tx.ops_[i + count]->request_bytes_;
    }
    if (count <= 1) count = 1;
    const auto records = std::span(tx.requests_).subspan(tx.ops_[i]->request_offset_, bytes);
    const SignalOut out =
        count == 1 ? encode(tx.request_of(i, batch)) : encode(TcKeyTrain{tx.handle_, tx.tx_, count, records});
    // Shared: every frame here is flushed at once, so in the same hold of the send lock.
    if (Status s = kShared ? pack_frame_shared(out, kTc, tx.tc_, true) : pack_frame(out, kTc, tx.tc_); !s) return s;
    i += count;
    if (i < tx.ops_used_)
      if (Status s = flush(); !s) return s;
  }
  return Status::ok();
}

Status Session::send_key_requests(const Transaction& tx, std::size_t batch) {
  if (shared_) [[unlikely]]
    return send_key_requests_as<true>(tx, batch);
  return send_key_requests_as<false>(tx, batch);
}

// A record of at most kMaxTrainBytes fits a frame as a train or alone; a
// longer one goes alone, as a TcKeyReq, which may not fit.
Status Session::check_lone_requests(const Transaction& tx, std::size_t batch) const {
  const bool checksum = link_ && link_->config().checksum;
  for (std::size_t i = tx.batch_first_; i < tx.ops_used_; ++i) {
    if (tx.ops_[i]->request_bytes_ <= kMaxTrainBytes) continue;
    const SignalOut out = encode(tx.request_of(i, batch));
    if (frame::frame_bytes_for(out.word_count, out.section_list(), checksum) == 0)
      return Status(StatusCode::kInvalidArgument, "operation " + std::to_string(i) + ": its request (" +
                                                      std::to_string(tx.ops_[i]->request_bytes_) +
                                                      " bytes) does not fit one 32 KB frame");
  }
  return Status::ok();
}

void Session::fail_unsent(Transaction& tx, const Status& why) {
  FJORD_ASSERT(tx.state_ == Transaction::State::kExecuting);
  FJORD_ASSERT(!why.is_ok());
  if (!link_ || !link_->is_up()) {
    tx.error_ = ErrorCode::kNodeFailure;
    tx.status_ = Status(StatusCode::kLinkDown, error_text(ErrorCode::kNodeFailure) + ": " + why.message());
  } else {
    tx.status_ = why;
  }
  complete(tx);
}

Status Session::flush() {
  if (shared_) [[unlikely]]
    return flush_shared();
  const transport::FlushStatus flushed = link_->flush();
  unflushed_ = flushed == transport::FlushStatus::kPending;
  if (flushed == transport::FlushStatus::kDown) {
    fail_everything(link_->down_reason());
    return link_->down_reason();
  }
  return Status::ok();
}

bool Session::receive_once() {
  if (!link_) return false;
  const transport::ReceiveBatch batch = link_->receive();
  if (batch.bytes.empty()) {
    if (!link_->is_up()) {
      fail_everything(link_->down_reason());
      return false;
    }
    // A partial flush waits for room: flushed again on every empty poll
    // until it is all out (only then: a flush costs as much as the poll).
    if (unflushed_) unflushed_ = link_->flush() == transport::FlushStatus::kPending;
    return true;
  }
  frame::FrameCursor cursor(batch.bytes);
  engine::Signal signal;
  signal.sender_node = data_node_;
  while (cursor.next(signal.view)) dispatch(signal);
  link_->release(batch.bytes.size());
  return true;
}

bool Session::wait_for_more(uint64_t& deadline, uint32_t timeout_ms, uint32_t polls) {
  // Busy polling reads the clock on every 64th empty poll only: a clock
  // read costs more than the poll, and the time it adds to each turn of the
  // loop delays noticing the answer.
  if (options_.poll_mode != PollMode::kSleep && deadline != 0 && (polls & 63) != 0) return true;
  const uint64_t now = monotonic_ns();
  if (deadline == 0) deadline = now + ms(timeout_ms);
  if (now > deadline) return false;
  if (options_.poll_mode == PollMode::kSleep)
    (void)link_->wait_for_receive(std::min<uint64_t>(deadline - now, 100'000'000), uint64_t{options_.spin_us} * 1000);
  return true;
}

int Session::poll(uint32_t timeout_ms, int min_completions) {
  completed_ = 0;
  if (shared_) [[unlikely]]
    poll_shared_once();
  else
    (void)receive_once();
  if (min_completions > 0 && completed_ < min_completions && in_flight_ > 0)
    (void)wait_until([&] { return completed_ >= min_completions || in_flight_ == 0; }, timeout_ms);
  return completed_;
}

// ---- dispatch --------------------------------------------------------------------------------

// Inline: the first step of every answer to a key operation.
[[gnu::always_inline]] inline Transaction* Session::executing(uint32_t handle, TxId tx) {
  const uint32_t slot = handle & 0xFFFF;
  if (handle & kScanHandleBit) return nullptr;
  if (slot >= transactions_.size()) return nullptr;
  if (generations_[slot] != (handle >> 16)) return nullptr;
  Transaction* found = transactions_[slot].get();
  if (found->state_ != Transaction::State::kExecuting) return nullptr;
  return found->tx_ == tx ? found : nullptr;
}

void Session::complete(Transaction& tx) {
  const bool failed = tx.error_ != ErrorCode::kNone || !tx.status_.is_ok();
  if (tx.state_ == Transaction::State::kExecuting) --in_flight_;
  // The node forgets a transaction it committed or rolled back (or that
  // failed): it is finished, as the one rollback of an unstarted one is.
  tx.state_ = (failed || tx.exec_ != ExecType::kNoCommit) ? Transaction::State::kFinished : Transaction::State::kOpen;
  tx.batch_first_ = tx.ops_used_;
  for (std::size_t i = 0; i < tx.ops_used_; ++i) {
    Operation& op = *tx.ops_[i];
    if (op.has_row_) op.row_ = RowView(std::span(tx.results_).subspan(op.result_offset_, op.result_bytes_));
  }
  ++completed_;
  if (tx.callback_) {
    Transaction::Callback cb = std::move(tx.callback_);
    tx.callback_ = nullptr;
    cb(tx, tx.status_);
  }
}

// Inline here: every read's values come through it.
inline void Transaction::take_values(uint32_t op_index, std::span<const std::byte> values) {
  const std::size_t at = results_used_;
  detail::append_bytes(results_, results_used_, values);
  values_taken(op_index, at, values.size());
}

inline void Transaction::values_taken(uint32_t op_index, std::size_t at, std::size_t bytes) {
  FJORD_ASSERT(op_index < ops_used_);  // the caller refused any other as a protocol fault
  Operation& op = *ops_[op_index];
  op.has_row_ = true;
  op.result_offset_ = at;
  op.result_bytes_ = bytes;
  ++data_received_;
}

// One switch over the signal number, one handler per signal. The key-read
// answers (TcKeyConf, KeyData, KeyDataTrain) are every read's path, so their
// handlers are forced inline into dispatch: out of line each would cost a
// call and the spill of the signal's registers on every read. The others are
// rare (rollbacks, aborts, scans, schema) and stay ordinary calls.
void Session::dispatch(const engine::Signal& s) {
  switch (s.number()) {
    case gsn::kTcKeyConf: return on_tc_key_conf(s);
    case gsn::kKeyData:
    case gsn::kKeyDataConf: return on_key_data(s);  // the second: the batch's TcKeyConf too
    case gsn::kKeyDataTrain: return on_key_data_train(s);
    case gsn::kTcKeyRef: return on_tc_key_ref(s);
    case gsn::kTcRollbackConf: return on_tc_rollback_conf(s);
    case gsn::kTcAbortRep: return on_tc_abort_rep(s);
    case gsn::kScanConf:
    case gsn::kScanRef:
    case gsn::kScanRows: return on_scan_answer(s);
    case gsn::kSchemaRef: return on_schema_ref(s);
    case gsn::kCreateTableConf:
    case gsn::kDropTableConf:
    case gsn::kGetTableConf: return on_schema_answer(s);
    default: FJORD_LOG_WARN("API node %u: ignored signal %u from node %u", self_, s.number(), s.sender_node);
  }
}

// Each decoded message is taken out of its Result once (a reference), not
// through m-> at every use: each m-> checks the Result again, and GCC does
// not always inline those checks.

[[gnu::always_inline]] inline void Session::batch_answered(Transaction& tx, bool conf, uint32_t data_messages) {
  if (conf) {
    tx.conf_received_ = true;
    tx.data_expected_ = data_messages;
  }
  if (tx.conf_received_ && tx.data_received_ >= tx.data_expected_) complete(tx);
}

[[gnu::always_inline]] inline void Session::on_tc_key_conf(const engine::Signal& s) {
  auto m = decode_tc_key_conf(s);
  if (!m) [[unlikely]]
    return protocol_fault(s, m.status());
  const TcKeyConf& conf = *m;
  if (Transaction* tx = executing(conf.api_conn, conf.tx)) batch_answered(*tx, true, conf.data_messages);
}

[[gnu::always_inline]] inline void Session::on_key_data(const engine::Signal& s) {
  auto m = decode_key_data(s);
  if (!m) [[unlikely]]
    return protocol_fault(s, m.status());
  const KeyData& data = *m;
  Transaction* tx = executing(data.api_conn, data.tx);
  if (!tx) return;
  if (data.op_index >= tx->ops_used_) [[unlikely]]
    return protocol_fault(s, bad_op_index(data.op_index, tx->ops_used_));
  tx->take_values(data.op_index, data.values);
  batch_answered(*tx, data.ends_batch, data.data_messages);
}

// Several reads' values, maybe the batch's TcKeyConf too. The records are
// kept as they came, in one copy (record headers too), and each read's
// values are found in place: not a copy per read.
[[gnu::always_inline]] inline void Session::on_key_data_train(const engine::Signal& s) {
  auto m = decode_key_data_train(s);
  if (!m) [[unlikely]]
    return protocol_fault(s, m.status());
  const KeyDataTrain& train = *m;
  Transaction* tx = executing(train.api_conn, train.tx);
  if (!tx) return;
  const std::size_t base = tx->results_used_;
  detail::append_bytes(tx->results_, tx->results_used_, train.records);
  KeyDataTrainCursor cursor(train.records);
  uint32_t op_index = 0;
  std::span<const std::byte> values;
  while (cursor.next(op_index, values)) {
    if (op_index >= tx->ops_used_) [[unlikely]]
      return protocol_fault(s, bad_op_index(op_index, tx->ops_used_));
    tx->values_taken(op_index, base + static_cast<std::size_t>(values.data() - train.records.data()), values.size());
  }
  batch_answered(*tx, train.ends_batch, train.data_messages);
}

void Session::on_tc_key_ref(const engine::Signal& s) {
  auto m = decode_tc_key_ref(s);
  if (!m) return protocol_fault(s, m.status());
  const TcKeyRef& ref = *m;
  Transaction* tx = executing(ref.api_conn, ref.tx);
  if (!tx) return;
  if (ref.op_index < tx->ops_used_)
    forget_if_stale(tx->ops_[ref.op_index]->table_id_, tx->ops_[ref.op_index]->table_version_, ref.error);
  tx->error_ = ref.error;
  tx->status_ = Status(
      StatusCode::kRejected,
      error_text(ref.error) + (ref.op_index != UINT32_MAX ? " (operation " + std::to_string(ref.op_index) + ")" : ""));
  complete(*tx);
}

void Session::on_tc_rollback_conf(const engine::Signal& s) {
  auto m = decode_tc_tx_message(s);
  if (!m) return protocol_fault(s, m.status());
  if (Transaction* tx = executing(m->api_conn, m->tx)) complete(*tx);
}

// TC aborted the transaction on its own (a timeout, a dropped table): one
// executing completes with the reason, one open between batches finishes
// and its next execute() returns the reason.
void Session::on_tc_abort_rep(const engine::Signal& s) {
  auto m = decode_tc_abort_rep(s);
  if (!m) return protocol_fault(s, m.status());
  const TcAbortRep& rep = *m;
  const uint32_t slot = rep.api_conn & 0xFFFF;
  if (slot >= transactions_.size() || generations_[slot] != (rep.api_conn >> 16)) return;
  Transaction& tx = *transactions_[slot];
  if (tx.tx_ != rep.tx || tx.state_ == Transaction::State::kIdle) return;
  tx.error_ = rep.error;
  tx.status_ = Status(StatusCode::kRejected, error_text(rep.error));
  if (tx.state_ == Transaction::State::kExecuting)
    complete(tx);
  else
    tx.state_ = Transaction::State::kFinished;
}

// ScanConf, ScanRef and ScanRows all start with api_conn, scan_id. A late
// answer for a scan closed (given up) is dropped, as is one for an earlier
// scan in the slot (another scan_id).
void Session::on_scan_answer(const engine::Signal& s) {
  if (s.word_count() < 2)
    return protocol_fault(s, Status(StatusCode::kProtocolError, std::to_string(s.word_count()) + " words"));
  using Answer = engine::protocol::layout::ScanRows;  // ScanConf and ScanRef begin alike
  const uint32_t handle = s.word(Answer::kApiConn);
  const uint32_t slot = handle & 0xFFFF;
  if (!(handle & kScanHandleBit)) return;
  if (slot >= scans_.size()) return;
  Scan& scan = *scans_[slot];
  if (scan.scan_id_ != s.word(Answer::kScanId) || scan.closed_) return;
  const bool taken = s.number() == gsn::kScanRows   ? on_scan_rows(scan, s)
                     : s.number() == gsn::kScanConf ? on_scan_conf(scan, s)
                                                    : on_scan_ref(scan, s);
  if (!taken) return;
  if (scan.conf_ && scan.messages_received_ >= scan.messages_expected_) {
    scan.conf_ = false;
    scan.round_done_ = true;
  }
}

bool Session::on_scan_rows(Scan& scan, const engine::Signal& s) {
  auto m = decode_scan_rows(s);
  if (!m) {
    protocol_fault(s, m.status());
    return false;
  }
  scan.rows_.insert(scan.rows_.end(), m->data.begin(), m->data.end());
  ++scan.messages_received_;
  return true;
}

bool Session::on_scan_conf(Scan& scan, const engine::Signal& s) {
  auto m = decode_scan_conf(s);
  if (!m) {
    protocol_fault(s, m.status());
    return false;
  }
  scan.messages_expected_ = m->messages;
  scan.round_rows_ = m->rows;
  scan.finished_ = m->finished;
  scan.conf_ = true;
  return true;
}

bool Session::on_scan_ref(Scan& scan, const engine::Signal& s) {
  auto m = decode_scan_ref(s);
  if (!m) {
    protocol_fault(s, m.status());
    return false;
  }
  forget_if_stale(scan.table_id_, scan.table_version_, m->error);
  scan.status_ = Status(StatusCode::kRejected, error_text(m->error));
  scan.finished_ = true;
  return true;
}

void Session::on_schema_ref(const engine::Signal& s) {
  auto m = decode_schema_ref(s);
  if (!m) return protocol_fault(s, m.status());
  if (m->request_id != schema_waiting_) return;  // a request given up at its timeout
  schema_error_ = m->error;
  schema_done_ = true;
}

// CreateTableConf, DropTableConf or GetTableConf.
void Session::on_schema_answer(const engine::Signal& s) {
  auto m = decode_schema_message(s);
  if (!m) return protocol_fault(s, m.status());
  if (m->request_id != schema_waiting_) return;  // a request given up at its timeout
  schema_number_ = m->number;
  schema_payload_.assign(m->payload.begin(), m->payload.end());
  schema_done_ = true;
}

void Session::fail_everything(const Status& why, StatusCode code) {
  for (auto& tx : transactions_)
    if (tx->state_ == Transaction::State::kExecuting) {
      tx->error_ = ErrorCode::kNodeFailure;
      tx->status_ = Status(code, error_text(ErrorCode::kNodeFailure) + ": " + why.message());
      complete(*tx);
    }
  for (auto& scan : scans_)
    if (!scan->finished_ && scan->status_.is_ok()) scan->status_ = Status(code, why.message());
}

// A signal from the data node that does not decode, or names an operation
// the transaction does not have: the node broke the protocol, so nothing it
// has in flight for us can be trusted. Every transaction and scan waiting
// fails now with the reason (instead of at its timeout), as a malformed
// frame takes a link down one level below; what already completed stands.
// A registration or schema request waiting gives up at its own timeout.
void Session::protocol_fault(const engine::Signal& s, const Status& why) {
  const std::string what = "malformed signal " + std::to_string(s.number()) + " from data node " +
                           std::to_string(s.sender_node) + ": " + why.message();
  FJORD_LOG_WARN("API node %u: %s", self_, what.c_str());
  fail_everything(Status(StatusCode::kProtocolError, what), StatusCode::kProtocolError);
}

Status Session::bad_op_index(uint32_t op_index, uint32_t ops) {
  return Status(StatusCode::kProtocolError,
                "values for operation " + std::to_string(op_index) + " of a batch of " + std::to_string(ops));
}

// ---- transactions, scans, schema ------------------------------------------------------------

const engine::KeyCodec& Session::primary_key_codec(const TableDef& table) {
  for (const HintCodec& h : hint_codecs_)
    if (h.table_id == table.table_id && h.version == table.version) return *h.codec;
  hint_codecs_.push_back(
      {table.table_id, table.version, std::make_unique<engine::KeyCodec>(engine::KeyCodec::for_primary_key(table))});
  return *hint_codecs_.back().codec;
}

// The key is encoded as TC will (each key column exactly once, no other
// column) and hashed to its partition; anything else is no key of the table.
std::optional<uint16_t> Session::hinted_tc(const TableDef& table, const Row& key) {
  std::byte buffer[engine::kMaxKeyBytes];
  auto encoded = encode_key_section(primary_key_codec(table), key.entries(), buffer);
  if (!encoded) return std::nullopt;
  return static_cast<uint16_t>(engine::partition_of(engine::hash_key(buffer, *encoded), table.partitions) %
                               tc_instances_);
}

uint16_t Session::tc_for(const TableDef* table, const Row* key) {
  // One TC coordinates everything, whatever the key hashes to (and the round
  // robin below would pick it too): no need to encode and hash the key.
  if (tc_instances_ == 1) return 0;
  if (table && key)
    if (const std::optional<uint16_t> tc = hinted_tc(*table, *key)) return *tc;
  return static_cast<uint16_t>(next_tc_++ % tc_instances_);
}

Transaction& Session::start_transaction(const TableDef* hint_table, const Row* hint) {
  if (free_transactions_.empty()) {
    if (transactions_.size() >= options_.max_transactions) [[unlikely]]
      return refused_transaction();
    free_transactions_.push_back(static_cast<uint32_t>(transactions_.size()));
    transactions_.push_back(std::unique_ptr<Transaction>(new Transaction(*this)));
    generations_.push_back(static_cast<uint16_t>(index_ << 8));  // generation 0 of this session
  }
  const uint32_t slot = free_transactions_.back();
  free_transactions_.pop_back();
  Transaction& tx = *transactions_[slot];
  const uint32_t handle = slot | uint32_t{generations_[slot]} << 16;
  tx.reset(handle, TxId{tx_id_base_ | (next_tx_++ & 0xFF'FFFF'FFFFULL)});
  tx.tc_ = tc_for(hint_table, hint);
  return tx;
}

// Beyond the limit the program gets a transaction that has finished with
// the reason, rather than an end to the program: it takes operations,
// execute() and execute_async() return the reason without sending anything,
// and close() gives it back as any other. A program that leaks transactions
// then learns it from the first one refused. Refused transactions come
// from a pool of their own, as many as the program holds open at once; no
// handle of theirs ever reaches the node.
Transaction& Session::refused_transaction() {
  if (free_refused_.empty()) {
    free_refused_.push_back(static_cast<uint32_t>(refused_.size()));
    refused_.push_back(std::unique_ptr<Transaction>(new Transaction(*this)));
  }
  const uint32_t slot = free_refused_.back();
  free_refused_.pop_back();
  Transaction& tx = *refused_[slot];
  tx.reset(kRefusedHandleBit | slot, TxId{});
  tx.state_ = Transaction::State::kFinished;
  tx.status_ = Status(StatusCode::kResourceExhausted,
                      std::to_string(options_.max_transactions) +
                          " transactions are open on this connection, its ConnectOptions.max_transactions: close "
                          "one before starting another");
  return tx;
}

void Session::release_refused(Transaction& tx) {
  FJORD_ASSERT(tx.handle_ & kRefusedHandleBit);
  FJORD_ASSERT((tx.handle_ & ~kRefusedHandleBit) < refused_.size());
  free_refused_.push_back(tx.handle_ & ~kRefusedHandleBit);
}

// Reused across scans (their capacity stays): a scan allocates nothing
// once the first ones have grown them.
void Session::encode_scan_conditions(const ScanSpec& spec) {
  scan_bounds_.clear();
  scan_filter_.clear();
  if (spec.index && (spec.has_lower || spec.has_upper)) {
    Bounds b;
    b.has_lower = spec.has_lower;
    b.lower_inclusive = spec.has_lower && spec.lower_inclusive;
    b.has_upper = spec.has_upper;
    b.upper_inclusive = spec.has_upper && spec.upper_inclusive;
    b.lower_count = static_cast<uint8_t>(spec.has_lower ? spec.lower.count() : 0);
    b.upper_count = static_cast<uint8_t>(spec.has_upper ? spec.upper.count() : 0);
    scan_bounds_.resize(4);
    put_bounds_header(scan_bounds_, b);
    const auto append = [&](const Row& bound) {
      scan_bounds_.insert(scan_bounds_.end(), bound.entries().begin(), bound.entries().end());
    };
    if (spec.has_lower) append(spec.lower);
    if (spec.has_upper) append(spec.upper);
  }
  // Each predicate gets room for its own value, however long: one whose
  // request then does not fit a frame fails at send_frame, never goes
  // without that predicate.
  for (const ScanSpec::Predicate& p : spec.filter) {
    const std::size_t at = scan_filter_.size();
    const ValueRef v = RowView(p.value.entries()).value(p.column);
    const std::size_t room = 4 + value_entry_bytes(v.is_null ? 0 : v.bytes.size());
    scan_filter_.resize(at + room);
    const std::size_t n = put_predicate(std::span(scan_filter_).subspan(at), p.column, p.op, v.is_null, v.bytes);
    FJORD_ASSERT(n > 0);  // it had the room
    FJORD_ASSERT(n <= room);
    scan_filter_.resize(at + n);
  }
}

Result<Scan*> Session::scan(const ScanSpec& spec) {
  if (!spec.table) return Status(StatusCode::kInvalidArgument, "ScanSpec.table is required");
  if (Status s = check_scan_spec(spec); !s) return s;
  // Only a closed scan is free: one read to its end is still the caller's,
  // whose close() (and next()) must not reach the scan that reuses it.
  uint32_t slot = 0;
  while (slot < scans_.size() && !scans_[slot]->closed_) ++slot;
  if (slot == scans_.size()) scans_.push_back(std::unique_ptr<Scan>(new Scan(*this)));
  Scan& scan = *scans_[slot];
  scan.handle_ = kScanHandleBit | index_ << detail::kSessionShift | slot;
  scan.scan_id_ = next_scan_++;
  scan.tc_instance_ = tc_for(nullptr, nullptr);
  scan.data_node_ = data_node_;
  scan.table_id_ = spec.table->table_id;
  scan.table_version_ = spec.table->version;
  scan.finished_ = scan.closed_ = scan.round_done_ = scan.conf_ = false;
  scan.rows_.clear();
  scan.cursor_ = 0;
  scan.messages_expected_ = scan.messages_received_ = 0;
  scan.rows_returned_ = 0;
  scan.status_ = Status::ok();
  encode_scan_conditions(spec);
  ScanReq req;
  req.api_conn = scan.handle_;
  req.scan_id = scan.scan_id_;
  req.table_id = spec.table->table_id;
  req.table_version = spec.table->version;
  req.index_id = spec.index ? spec.index->index_id : 0;
  req.flags = spec.index ? kScanFlagOrderedIndex : 0;
  req.batch_rows = spec.batch_rows;
  req.bounds = scan_bounds_;
  req.filter = scan_filter_;
  req.columns = std::as_bytes(std::span(spec.columns));
  // A scan that fails here is never handed out, so nobody will close it.
  const auto fail = [&](const Status& why) {
    scan.closed_ = true;
    return why;
  };
  if (Status s = send_frame(encode(req), kTc, scan.tc_instance_); !s) return fail(s);
  if (Status s = flush(); !s) return fail(s);
  if (!scan.fetch_round()) {
    // Refused (ScanRef), or given up at the timeout: then TC may have
    // started it, and close() frees what it holds at the node.
    scan.close();
    return scan.status_;
  }
  return &scan;
}

void Session::retire_table(const TableDef* stale) {
  for (auto it = tables_.begin(); it != tables_.end(); ++it)
    if (it->get() == stale) {
      stale_tables_.push_back(std::move(*it));
      tables_.erase(it);
      return;
    }
}

void Session::forget_if_stale(uint32_t table_id, uint32_t version, ErrorCode error) {
  if (error != ErrorCode::kNoSuchTable && error != ErrorCode::kSchemaVersion) return;
  for (const auto& t : tables_)
    if (t->table_id == table_id && t->version == version) return retire_table(t.get());
}

Result<std::vector<std::byte>> Session::schema_call(uint16_t number, std::span<const std::byte> payload,
                                                    uint16_t expected) {
  schema_waiting_ = index_ << detail::kSessionShift | (next_request_++ & detail::kRequestCountMask);
  schema_done_ = false;
  schema_error_ = ErrorCode::kNone;
  if (Status s = send_frame(encode(SchemaMessage{number, schema_waiting_, payload}), kDict, 0); !s) return s;
  if (Status s = flush(); !s) return s;
  if (!wait_until([&] { return schema_done_; }, options_.request_timeout_ms))
    return Status(StatusCode::kTimeout, "no schema answer from data node " + std::to_string(data_node_));
  if (schema_error_ != ErrorCode::kNone) return Status(StatusCode::kRejected, error_text(schema_error_));
  if (schema_number_ != expected) return Status(StatusCode::kProtocolError, "unexpected schema answer");
  return schema_payload_;
}

Result<const TableDef*> Session::create_table(const TableDef& table) {
  if (Status s = engine::validate_table(table); !s) return s;
  if (Status s = check_table_fits_signals(table); !s) return s;
  // DICT refuses such a name (as a bare kBadRequest): "base$index" is how
  // it names a unique index's hidden table.
  if (table.name.find('$') != std::string::npos)
    return Status(
        StatusCode::kInvalidArgument,
        "table '" + table.name + "': a table name cannot contain '$' (it names the hidden tables of unique indexes)");
  auto reply = schema_call(gsn::kCreateTableReq, encode_table(table), gsn::kCreateTableConf);
  if (!reply) return reply.status();
  auto def = decode_table(*reply);
  if (!def) return def.status();
  return cache_table(std::move(def).value());
}

const TableDef* Session::cache_table(TableDef def) {
  // An older definition of that name (the table was dropped by another
  // connection) must not answer get_table any more; pointers to it stay
  // valid.
  for (const auto& t : tables_)
    if (t->name == def.name) {
      retire_table(t.get());
      break;
    }
  tables_.push_back(std::make_unique<TableDef>(std::move(def)));
  return tables_.back().get();
}

Status Session::drop_table(const std::string& name) {
  auto reply = schema_call(gsn::kDropTableReq, std::as_bytes(std::span(name.data(), name.size())), gsn::kDropTableConf);
  if (!reply) return reply.status();
  for (auto it = tables_.begin(); it != tables_.end(); ++it)
    if ((*it)->name == name) {
      tables_.erase(it);
      break;
    }
  return Status::ok();
}

Result<const TableDef*> Session::get_table(const std::string& name) {
  for (const auto& t : tables_)
    if (t->name == name) return t.get();
  auto reply = schema_call(gsn::kGetTableReq, std::as_bytes(std::span(name.data(), name.size())), gsn::kGetTableConf);
  if (!reply) return reply.status();
  auto def = decode_table(*reply);
  if (!def) return def.status();
  return cache_table(std::move(def).value());
}

}  // namespace fjord::api
