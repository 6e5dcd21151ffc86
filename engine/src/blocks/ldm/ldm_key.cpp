// LDM: key operations (LqhKeyReq): validation, the transaction's view of
// the row, read/insert/update/write/delete, and the replies.
//
// A request is checked completely before it may wait for a lock (table and
// version, partition, key, values, column list), so a malformed request is
// refused at once. Read-committed reads never touch locks. Everything else
// finds the row's lock (ldm_locks.cpp), waits or is granted, and then acts on
// the transaction's view of the row: its own pending version if it holds the
// row exclusively, else the committed one.
#include <bitset>
#include <cstring>

#include "fjord/base/log.h"
#include "ldm_impl.h"

namespace fjord::engine {

using namespace protocol;
using namespace ldm;

namespace {

// A key column's value in the values section must be the key's own.
bool same_as_key(std::span<const std::byte> key_section, const ValueEntry& value) {
  ValueCursor cursor(key_section);
  ValueEntry k;
  while (cursor.next(k)) {
    if (k.column != value.column) continue;
    return k.is_null == value.is_null && k.bytes.size() == value.bytes.size() &&
           std::memcmp(k.bytes.data(), value.bytes.data(), k.bytes.size()) == 0;
  }
  return false;
}

ValueRef value_of(const ValueEntry& e) { return e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes); }

bool is_write(OpType op) { return op == OpType::kInsert || op == OpType::kUpdate || op == OpType::kWrite; }

}  // namespace

void LdmBlock::Impl::lqh_key_req(const Signal& s, BlockContext& c) {
  auto decoded = decode_lqh_key_req(s);
  if (!decoded) {
    faults.refuse(s, decoded.status().message());
    bump(counters.refused);
    using L = layout::LqhKeyReq;
    if (s.word_count() > L::kTxLo) {
      const SignalOut out =
          encode(LqhKeyRef{s.word(L::kTcOp), TxId::from(s.word(L::kTxHi), s.word(L::kTxLo)), ErrorCode::kBadRequest});
      c.send(s.sender_address(), out.number, out.data());
    }
    return;
  }
  // Read results go to an API node's receiver, which a data node has not
  // (unless a test stands one in).
  if (decoded->result_to == ResultTo::kApi && decoded->api_node == c.self_node() &&
      !c.node_hosts({block_numbers::kApi, 0})) [[unlikely]] {
    faults.refuse(s, "an LqhKeyReq whose results go to this data node as if it were an API node");
    const SignalOut out = encode(LqhKeyRef{decoded->tc_op, decoded->tx, ErrorCode::kBadRequest});
    c.send(s.sender_address(), out.number, out.data());
    return;
  }
  (void)execute_key(*decoded, s.sender_address(), false, c);
}

// Runs a request, fresh or resumed after a wait. It is answered (LqhKeyConf
// or LqhKeyRef), or parked (outcome.parked) and answered when it runs again.
KeyOutcome LdmBlock::Impl::execute_key(const LqhKeyReq& req, Address from, bool resumed, BlockContext& c) {
  bump(counters.key_operations);
  KeyOp op;
  op.req = &req;
  op.from = from;
  op.resumed = resumed;
  if (const ErrorCode e = resolve_key(op); e != ErrorCode::kNone) return refuse(op, e, c);
  if (req.op == OpType::kRead && req.lock == LockMode::kCommitted) return read_committed(op, c);
  const bool shared = req.op == OpType::kRead && req.lock == LockMode::kShared;
  op.mode = shared ? LockKind::kShared : LockKind::kExclusive;  // writes always lock exclusively
  uint32_t tx = kNoRecord;
  if (tx_by_id.find(req.tx.value, tx)) op.tx = tx;
  if (op.anchor != kNoRow) {
    op.lock = slot_lock(op.part->slot(op.anchor));
    if (op.lock != kNoRecord) {
      op.hold = hold_of(op.lock, op.tx);
      const Grant g = grant(op.lock, op.hold, op.mode, true);
      if (g != Grant::kGranted) return park(op, g == Grant::kWaitFirst, c);
    }
  }
  return perform(op, c);
}

ErrorCode LdmBlock::Impl::read_committed_now(const LqhKeyReq& req, BlockContext& c, const TcKeyConf* batch_end,
                                             const EncodedKey* key, LdmBlock::Into* into) {
  // The values go to the API, or (into) to the caller, TC: a unique-key
  // lookup's hidden row, or a train's reply.
  // A read-committed read, in one assertion: on this hot path the compiler
  // tests both fields with one comparison, as two it would make two.
  FJORD_ASSERT(req.op == OpType::kRead && req.lock == LockMode::kCommitted);
  FJORD_ASSERT(req.result_to == ResultTo::kApi || into != nullptr);
  bump(counters.key_operations);
  KeyOp op;
  op.req = &req;
  ErrorCode error = resolve_key(op, key);
  std::span<const std::byte> slot;  // looked up once for its kind and its record
  if (error == ErrorCode::kNone && op.anchor != kNoRow)
    slot = op.anchor_slot.empty() ? op.part->rows.get(op.anchor) : op.anchor_slot;
  if (error == ErrorCode::kNone && (slot.empty() || slot_kind(slot.data()) != RowKind::kCommitted))
    error = ErrorCode::kNoSuchRow;
  if (error != ErrorCode::kNone) {
    bump(counters.refused);
    return error;
  }
  bump(counters.reads);
  if (into != nullptr) {
    FJORD_ASSERT(batch_end == nullptr);
    put_record(*op.table, op.part->record_in(slot), req.columns, req.op_index, *into);
    return ErrorCode::kNone;
  }
  send_key_data(op, op.part->record_in(slot), c, batch_end);
  return ErrorCode::kNone;
}

// What resolve_key checks of every read of a train's that is the same for
// all of them: the table, its version, the column list (a read carries no
// values: TC's decoder refused any that did).
LdmBlock::ReadPlan LdmBlock::Impl::plan_reads(uint32_t table_id, uint32_t table_version,
                                              std::span<const std::byte> columns) const {
  const LdmTable* t = table_of(table_id);
  if (t == nullptr || t->def.version != table_version || !columns_valid(*t, columns)) return {};
  return {t, columns};
}

// read_committed_now's path for planned reads: each one's partition
// checked to be the plan table's, its row found (a candidate, else the index) and its values
// written, counted as there.
uint32_t LdmBlock::Impl::read_planned(const LdmBlock::ReadPlan& plan, std::span<const LdmBlock::PlannedRead> reads,
                                      LdmBlock::Into& into, ErrorCode& error) {
  const auto& t = *static_cast<const LdmTable*>(plan.table);
  error = ErrorCode::kNone;
  std::size_t written = 0;
  uint32_t done = 0;
  for (const LdmBlock::PlannedRead& r : reads) {
    bump(counters.key_operations);
    const auto* found = static_cast<const Partition*>(r.found);
    if (found == nullptr || &found->table != &t) {
      bump(counters.refused);
      error = ErrorCode::kBadRequest;
      break;
    }
    const Partition& part = *found;
    const EncodedKey& key = *r.key;
    std::span<const std::byte> slot;
    const RowId row = find_row(t, part, key.bytes, key.hash, key.candidates, key.candidate_count, slot);
    if (row != kNoRow && slot.empty()) slot = part.rows.get(row);
    if (slot.empty() || slot_kind(slot.data()) != RowKind::kCommitted) {
      bump(counters.refused);
      error = ErrorCode::kNoSuchRow;
      break;
    }
    bump(counters.reads);
    LdmBlock::Into one{into.room.subspan(written)};
    put_record(t, part.record_in(slot), plan.columns, r.op_index, one);
    written += one.written;
    ++done;
  }
  into.written = written;
  return done;
}

// The key's row: the look-ahead's candidate that is it (its slot then in
// `slot`), else what an index search finds (`slot` left empty); kNoRow
// when there is none. Counted as a look-ahead hit or an index search.
[[gnu::always_inline]] inline RowId LdmBlock::Impl::find_row(const LdmTable& t, const Partition& part,
                                                             std::span<const std::byte> key, uint64_t hash,
                                                             const RowId* candidates, uint32_t candidate_count,
                                                             std::span<const std::byte>& slot) {
  for (uint32_t i = 0; i < candidate_count; ++i) {
    const std::span<const std::byte> candidate = part.rows.get(candidates[i]);
    if (t.pk.record_matches(t.layout, part.record_in(candidate), key)) {
      slot = candidate;
      bump(counters.lookahead_hits);
      return candidates[i];
    }
  }
  bump(counters.index_searches);
  return part.hash.find(hash, key);
}

// A read's values as a KeyDataTrain record (header and values) at the start
// of `into`, which has room for the table's longest read.
[[gnu::always_inline]] inline void LdmBlock::Impl::put_record(const LdmTable& t, std::span<const std::byte> record,
                                                              std::span<const std::byte> columns, uint32_t op_index,
                                                              LdmBlock::Into& into) const {
  FJORD_ASSERT(into.room.size() >= kKeyDataRecordHeaderBytes + t.max_read_bytes);
  const std::size_t n = put_columns(t, record, columns, into.room.subspan(kKeyDataRecordHeaderBytes));
  put_key_data_record_header(into.room.data(), op_index, static_cast<uint32_t>(n));
  into.written = kKeyDataRecordHeaderBytes + n;
}

void LdmBlock::Impl::prefetch_key(uint32_t table_id, uint32_t partition, uint32_t key_hash, int stage) const {
  if (stage == 0) {
    (void)prefetch_bucket(table_id, partition, key_hash);
    return;
  }
  RowId rows[2];
  (void)prefetch_rows(table_id, partition, key_hash, nullptr, rows, 2);
}

const void* LdmBlock::Impl::prefetch_bucket(uint32_t table_id, uint32_t partition, uint32_t key_hash,
                                            const void** found) const {
  const Partition* part = partition_here(table_id, partition);
  if (found != nullptr) *found = part;
  return part == nullptr ? nullptr : part->hash.prefetch_bucket(key_hash);
}

namespace {
// prefetch_rows' work once the partition is known (inline in both entries).
[[gnu::always_inline]] inline uint32_t rows_ahead(const Partition& part, uint32_t key_hash, const void* bucket,
                                                  RowId* rows, uint32_t max, const void** more) {
  const uint32_t n = part.hash.candidates(key_hash, rows, max, bucket, more);
  // The lines the slot covers (header, key, and what a read returns), at most four.
  const LdmTable& t = part.table;
  const std::size_t slot_bytes = std::min<std::size_t>(t.header_bytes + t.layout.record_bytes(), 4 * kCacheLineBytes);
  for (uint32_t i = 0; i < n; ++i) {
    const auto start = reinterpret_cast<uintptr_t>(part.slot(rows[i]));
    for (uintptr_t line = start & ~uintptr_t{kCacheLineBytes - 1}; line < start + slot_bytes; line += kCacheLineBytes)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
  return n;
}
}  // namespace

uint32_t LdmBlock::Impl::prefetch_rows(uint32_t table_id, uint32_t partition, uint32_t key_hash, const void* bucket,
                                       RowId* rows, uint32_t max, const void** more) const {
  const Partition* part = partition_here(table_id, partition);
  if (part == nullptr) {
    if (more != nullptr) *more = nullptr;
    return 0;
  }
  return rows_ahead(*part, key_hash, bucket, rows, max, more);
}

uint32_t LdmBlock::Impl::prefetch_rows_in(const Partition& part, uint32_t key_hash, const void* bucket, RowId* rows,
                                          uint32_t max, const void** more) const {
  return rows_ahead(part, key_hash, bucket, rows, max, more);
}

ErrorCode LdmBlock::Impl::resolve_key(KeyOp& op, const EncodedKey* known) {
  const LqhKeyReq& req = *op.req;
  LdmTable* t = table_of(req.table_id);
  if (t == nullptr) return ErrorCode::kNoSuchTable;
  if (t->def.version != req.table_version) return ErrorCode::kSchemaVersion;
  // UINT64_MAX is the transaction map's empty key.
  if (req.partition >= t->def.partitions || !owns(req.partition) || req.tx.value == UINT64_MAX)
    return ErrorCode::kBadRequest;
  const RowId* candidates = nullptr;
  uint32_t candidate_count = 0;
  if (known != nullptr) {
    op.key = known->bytes;
    op.hash = known->hash;
    candidates = known->candidates;
    candidate_count = known->candidate_count;
  } else {
    Result<uint32_t> length = encode_key_section(t->pk, req.key, pk_key);
    if (!length.is_ok()) return ErrorCode::kBadRequest;
    op.key = std::span(pk_key).first(length.value());
    op.hash = hash_key(op.key.data(), op.key.size());
  }
  op.table = t;
  op.part = t->partitions[req.partition / o.ldm_instances].get();
  // Also a check of a caller's encoding: it must route where the request says.
  if (partition_of(op.hash, t->def.partitions) != req.partition || static_cast<uint32_t>(op.hash) != req.key_hash)
    return ErrorCode::kBadRequest;
  if (!columns_valid(*t, req.columns)) return ErrorCode::kBadRequest;
  if (const ErrorCode e = check_values(op); e != ErrorCode::kNone) return e;
  op.anchor = find_row(*t, *op.part, op.key, op.hash, candidates, candidate_count, op.anchor_slot);
  return ErrorCode::kNone;
}

// Values: known columns, each once, fitting its column (check_value), key
// columns equal to the key; an insert gives every NOT NULL column.
ErrorCode LdmBlock::Impl::check_values(const KeyOp& op) const {
  const LqhKeyReq& req = *op.req;
  const LdmTable& t = *op.table;
  if (!is_write(req.op)) return req.values.empty() ? ErrorCode::kNone : ErrorCode::kBadRequest;
  if (!t.writable) return ErrorCode::kBadRequest;
  std::bitset<kMaxColumns> given;
  ValueCursor cursor(req.values);
  ValueEntry e;
  while (cursor.next(e)) {
    if (e.column >= t.layout.column_count() || given.test(e.column)) return ErrorCode::kBadRequest;
    given.set(e.column);
    if (!check_value(t.layout.column(e.column), value_of(e), {}).is_ok()) return ErrorCode::kBadRequest;
    if (t.is_key_column[e.column] && !same_as_key(req.key, e)) return ErrorCode::kBadRequest;
  }
  if (!cursor.error().is_ok()) return ErrorCode::kBadRequest;
  if (req.op != OpType::kInsert) return ErrorCode::kNone;
  for (uint32_t column = 0; column < t.layout.column_count(); ++column)
    if (!given.test(column) && !t.is_key_column[column] && !t.layout.column(column).nullable)
      return ErrorCode::kBadRequest;
  return ErrorCode::kNone;
}

bool LdmBlock::Impl::columns_valid(const LdmTable& t, std::span<const std::byte> columns) const {
  if (columns.size() % 2 != 0) return false;
  std::bitset<kMaxColumns> seen;
  for (std::size_t i = 0; i < columns.size(); i += 2) {
    uint16_t column;
    std::memcpy(&column, columns.data() + i, sizeof column);
    if (column >= t.layout.column_count() || seen.test(column)) return false;
    seen.set(column);
  }
  return true;
}

KeyOutcome LdmBlock::Impl::read_committed(KeyOp& op, BlockContext& c) {
  if (op.anchor == kNoRow || slot_kind(op.part->slot(op.anchor)) != RowKind::kCommitted)
    return refuse(op, ErrorCode::kNoSuchRow, c);
  bump(counters.reads);
  reply_read(op, op.part->record(op.anchor), c);
  return {};
}

// The row as the requesting transaction sees it (after the lock was granted).
View LdmBlock::Impl::view_of(const KeyOp& op) {
  if (op.anchor == kNoRow) return {};
  const Partition& p = *op.part;
  if (op.hold != kNoRecord && holds[op.hold].mode == LockKind::kExclusive) {
    const RowLock& lock = locks[op.lock];
    if (lock.pending == Pending::kVersion) return {true, p.record(lock.version)};
    if (lock.pending == Pending::kDeleted) return {};
    return {true, p.record(op.anchor)};  // committed, or its own insert
  }
  // Not the writer: an uncommitted insert would have made it wait.
  if (slot_kind(p.slot(op.anchor)) != RowKind::kCommitted) return {};
  return {true, p.record(op.anchor)};
}

KeyOutcome LdmBlock::Impl::perform(KeyOp& op, BlockContext& c) {
  const View before = view_of(op);
  switch (op.req->op) {
    case OpType::kRead: return perform_read(op, before, c);
    case OpType::kDelete: return perform_delete(op, before, c);
    case OpType::kWrite: return perform_write(op, before.exists ? OpType::kUpdate : OpType::kInsert, before, c);
    case OpType::kInsert:
    case OpType::kUpdate: return perform_write(op, op.req->op, before, c);
  }
  FJORD_ASSERT_MSG(false, "unknown operation type");
  return {};
}

KeyOutcome LdmBlock::Impl::perform_read(KeyOp& op, const View& before, BlockContext& c) {
  if (!before.exists) return refuse(op, ErrorCode::kNoSuchRow, c);
  if (!reserve_records(op)) return refuse(op, ErrorCode::kTooManyOperations, c);
  link_hold(op);
  bump(counters.reads);
  reply_read(op, before.record, c);
  return {};
}

KeyOutcome LdmBlock::Impl::perform_delete(KeyOp& op, const View& before, BlockContext& c) {
  if (!before.exists) return refuse(op, ErrorCode::kNoSuchRow, c);
  if (!reserve_records(op)) return refuse(op, ErrorCode::kTooManyOperations, c);
  const std::size_t before_bytes = put_unique_columns(*op.table, before.record, out_before);
  link_hold(op);
  RowLock& lock = locks[op.lock];
  drop_pending(*op.part, lock);
  lock.pending = Pending::kDeleted;
  bump(counters.deletes);
  reply_write(op, before_bytes, 0, c);
  return {};
}

// Insert or update (a write is one of the two, by the view).
KeyOutcome LdmBlock::Impl::perform_write(KeyOp& op, OpType type, const View& before, BlockContext& c) {
  if (type == OpType::kInsert && before.exists) return refuse(op, ErrorCode::kDuplicateKey, c);
  if (type == OpType::kUpdate && !before.exists) return refuse(op, ErrorCode::kNoSuchRow, c);
  // An insert over an existing anchor is the writer's own delete undone.
  FJORD_ASSERT(op.anchor == kNoRow || before.exists ||
               (op.hold != kNoRecord && holds[op.hold].mode == LockKind::kExclusive));
  const bool insert = type == OpType::kInsert;
  if (!build_image(op, insert ? std::span<const std::byte>() : before.record, insert))
    return refuse(op, ErrorCode::kBadRequest, c);
  if (!reserve_records(op)) return refuse(op, ErrorCode::kTooManyOperations, c);
  const std::size_t before_bytes = before.exists ? put_unique_columns(*op.table, before.record, out_before) : 0;
  ErrorCode error = ErrorCode::kNone;
  if (op.anchor == kNoRow) {
    error = create_anchor(op);
  } else {
    attach_lock(op);
    error = install_version(op);
  }
  if (error != ErrorCode::kNone) {
    bump(counters.out_of_memory);
    return refuse(op, error, c);
  }
  link_hold(op);
  const std::span<const std::byte> image(slot_buffer.data() + op.table->header_bytes, op.table->layout.record_bytes());
  const std::size_t after_bytes = put_unique_columns(*op.table, image, out_after);
  bump(insert ? counters.inserts : counters.updates);
  reply_write(op, before_bytes, after_bytes, c);
  return {};
}

// The new image in slot_buffer: `from` (an update's current view) or an
// empty record with the key (an insert), then the request's values. False
// if an insert leaves a NOT NULL column without a value.
bool LdmBlock::Impl::build_image(const KeyOp& op, std::span<const std::byte> from, bool insert) {
  const LdmTable& t = *op.table;
  const std::span<std::byte> record(slot_buffer.data() + t.header_bytes, t.layout.record_bytes());
  if (insert)
    t.layout.init_record(record);
  else
    std::memcpy(record.data(), from.data(), record.size());
  std::bitset<kMaxColumns> given;
  const auto set = [&](const ValueEntry& e) {
    const Status s = t.layout.set(record, e.column, value_of(e));
    FJORD_ASSERT_MSG(s.is_ok(), "a value that check_values() accepted does not fit");
    given.set(e.column);
  };
  ValueEntry e;
  if (insert)
    for (ValueCursor key(op.req->key); key.next(e);) set(e);
  for (ValueCursor values(op.req->values); values.next(e);) set(e);
  if (!insert) return true;
  for (uint32_t column = 0; column < t.layout.column_count(); ++column)
    if (!given.test(column) && !t.layout.column(column).nullable) return false;
  return true;
}

// ---- replies ------------------------------------------------------------------------------

// The record's columns named in `columns` (u16 each; empty: all) as value
// entries; returns the bytes written.
std::size_t LdmBlock::Impl::put_columns(const LdmTable& t, std::span<const std::byte> record,
                                        std::span<const std::byte> columns, std::span<std::byte> out) const {
  const bool all = columns.empty();
  if (all && !t.fixed_entries.empty()) {
    // Every column fixed and NOT NULL: headers ready, values at fixed places.
    // put_value's format written directly: put_value would build a header
    // and check the room for every column of every row read.
    FJORD_ASSERT_MSG(out.size() >= t.max_read_bytes, "a row's values outgrew their buffer");
    std::byte* at = out.data();
    for (const LdmTable::FixedEntry& e : t.fixed_entries) {
      std::memcpy(at, &e.header, 8);
      const std::size_t padded = padded_to_4(e.length);
      if (padded != e.length) std::memset(at + 8 + padded - 4, 0, 4);
      if (e.length == 8)
        std::memcpy(at + 8, record.data() + e.offset, 8);
      else if (e.length == 4)
        std::memcpy(at + 8, record.data() + e.offset, 4);
      else
        std::memcpy(at + 8, record.data() + e.offset, e.length);
      at += 8 + padded;
    }
    return static_cast<std::size_t>(at - out.data());
  }
  // One loop for both forms of the list, so that its body is inlined once.
  const std::size_t count = all ? t.layout.column_count() : columns.size() / 2;
  std::size_t at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    uint16_t column = static_cast<uint16_t>(i);
    if (!all) std::memcpy(&column, columns.data() + 2 * i, sizeof column);
    const ValueRef v = t.layout.get(record, column);
    const std::size_t n = put_value(out.subspan(at), column, v.is_null, v.bytes);
    FJORD_ASSERT_MSG(n != 0, "a row's values outgrew their buffer");
    at += n;
  }
  return at;
}

std::size_t LdmBlock::Impl::put_unique_columns(const LdmTable& t, std::span<const std::byte> record,
                                               std::span<std::byte> out) const {
  const auto list = std::as_bytes(std::span(t.unique_columns));
  return list.empty() ? 0 : put_columns(t, record, list, out);
}

void LdmBlock::Impl::reply_read(const KeyOp& op, std::span<const std::byte> record, BlockContext& c) {
  const LqhKeyReq& req = *op.req;
  LqhKeyConf conf{req.tc_op, req.tx};
  if (req.result_to == ResultTo::kApi) {
    send_key_data(op, record, c);
    conf.data_sent_to_api = true;
  } else {
    conf.data = std::span(out_data).first(put_columns(*op.table, record, req.columns, out_data));
  }
  const SignalOut out = encode(conf);
  c.send(op.from, out.number, out.data(), out.section_list());
}

// A read's values, straight to the API node (with the batch's end, when given).
void LdmBlock::Impl::send_key_data(const KeyOp& op, std::span<const std::byte> record, BlockContext& c,
                                   const TcKeyConf* batch_end) {
  const LqhKeyReq& req = *op.req;
  const std::size_t n = put_columns(*op.table, record, req.columns, out_data);
  KeyData m{req.api_conn, req.tx, req.op_index, std::span(out_data).first(n)};
  if (batch_end != nullptr) {
    FJORD_ASSERT(batch_end->committed);
    FJORD_ASSERT(batch_end->api_conn == req.api_conn);
    FJORD_ASSERT(batch_end->tx == req.tx);
    m.ends_batch = true;
    m.batch_ops = batch_end->ops;
    m.data_messages = batch_end->data_messages;
  }
  const SignalOut data = encode(m);
  c.send({req.api_node, {block_numbers::kApi, 0}}, data.number, data.data(), data.section_list());
}

void LdmBlock::Impl::reply_write(const KeyOp& op, std::size_t before_bytes, std::size_t after_bytes, BlockContext& c) {
  LqhKeyConf conf{op.req->tc_op, op.req->tx};
  conf.unique_before = std::span(out_before).first(before_bytes);
  conf.unique_after = std::span(out_after).first(after_bytes);
  const SignalOut out = encode(conf);
  c.send(op.from, out.number, out.data(), out.section_list());
}

// Answers LqhKeyRef: the operation leaves nothing behind (records it took
// are given back; its transaction's record too if that holds nothing else).
KeyOutcome LdmBlock::Impl::refuse(KeyOp& op, ErrorCode error, BlockContext& c) {
  unreserve_records(op);
  release_tx_if_empty(op.tx);
  bump(counters.refused);
  const SignalOut out = encode(LqhKeyRef{op.req->tc_op, op.req->tx, error});
  c.send(op.from, out.number, out.data());
  return {};
}

}  // namespace fjord::engine
