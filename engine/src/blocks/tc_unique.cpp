// TC: unique indexes. A unique index is a hidden table ("table$index") whose
// rows are the unique key columns, then the base table's primary key. A read
// by unique key reads the hidden row, then the base row; a write on a table
// with unique indexes deletes and inserts hidden rows in the same
// transaction, so the index and its table commit or abort together.
#include <cstring>

#include "fjord/base/log.h"
#include "tc_impl.h"

namespace fjord::engine {

using namespace protocol;

// The hidden table of a read by unique key, and its key: req.key's values
// re-addressed to the hidden table's columns, as a value section in `out`
// (`length` bytes, as many as req.key's). kNone, or why the read fails
// (kBadRequest also when `out` is too short: only a look-ahead's room can
// be, and that look-ahead is then not made).
ErrorCode TcBlock::Impl::hidden_key(const TcTable& t, const TcKeyReq& req, const TcTable*& hidden,
                                    std::span<std::byte> out, std::size_t& length) const {
  const TcTable::Unique* unique = nullptr;
  for (const TcTable::Unique& u : t.uniques)
    if (u.index_id == req.index_id) unique = &u;
  hidden = unique != nullptr ? table(unique->index_id) : nullptr;
  if (hidden == nullptr) return ErrorCode::kNoSuchIndex;
  if (req.columns.size() / 2 > kMaxColumns) return ErrorCode::kBadRequest;  // the base read's column list
  length = 0;
  ValueCursor cursor(req.key);
  ValueEntry e;
  while (cursor.next(e)) {
    uint16_t position = UINT16_MAX;
    for (std::size_t i = 0; i < unique->columns.size(); ++i)
      if (unique->columns[i] == e.column) position = static_cast<uint16_t>(i);
    if (position == UINT16_MAX) return ErrorCode::kBadRequest;
    if (e.is_null) return ErrorCode::kNoSuchRow;  // NULLs are not indexed
    const std::size_t put = put_value(out.subspan(length), position, false, e.bytes);
    if (put == 0) return ErrorCode::kBadRequest;
    length += put;
  }
  return cursor.error().is_ok() ? ErrorCode::kNone : ErrorCode::kBadRequest;
}

void TcBlock::Impl::unique_lookup_done(uint32_t op_ref, const LqhKeyConf& conf, BlockContext& c) {
  const Op& op = ops[op_ref];
  FJORD_ASSERT(op.kind == OpKind::kUniqueLookup);
  const TcTable* hidden = table(op.table);
  if (!hidden) return start_abort(op.tx, ErrorCode::kNoSuchTable, op.op_index, c);
  read_base_of_unique(op.tx, op.op_index, op.base_table, op.lock,
                      std::as_bytes(std::span(lookup_columns[record_index(op_ref)].data(), op.column_count)), *hidden,
                      conf.data, c);
}

// The base-table read of a read by unique key, given the row of the hidden
// table the lookup found: the unique key columns, then the base primary key
// columns.
void TcBlock::Impl::read_base_of_unique(uint32_t tx_ref, uint32_t op_index, uint32_t base_table, LockMode lock,
                                        std::span<const std::byte> columns, const TcTable& hidden,
                                        std::span<const std::byte> hidden_row, BlockContext& c,
                                        const EncodedKey* base_key, uint64_t base_note) {
  const TcTable* base = table(base_table);
  if (!base) return start_abort(tx_ref, ErrorCode::kNoSuchTable, op_index, c);
  std::size_t at = 0;
  if (const ErrorCode e = base_key_of_unique(*base, hidden, hidden_row, section_a, at); e != ErrorCode::kNone)
    return start_abort(tx_ref, e, op_index, c);
  LqhKeyReq lqh;
  lqh.table_id = base->def.table_id;
  lqh.table_version = base->def.version;
  lqh.op = OpType::kRead;
  lqh.lock = lock;
  lqh.api_node = txs[tx_ref].api_node;
  lqh.api_conn = txs[tx_ref].api_conn;
  lqh.op_index = op_index;
  lqh.key = std::span(section_a).first(at);
  lqh.columns = columns;
  if (base_key != nullptr && read_route_note(base_note, *base, lqh.partition, lqh.key_hash))
    return issue_user_op(tx_ref, op_index, lqh, c, base_key);
  ErrorCode error = ErrorCode::kNone;
  if (!route_key(*base, lqh.key, lqh, error)) return start_abort(tx_ref, error, op_index, c);
  issue_user_op(tx_ref, op_index, lqh, c);
}

ErrorCode TcBlock::Impl::base_key_of_unique(const TcTable& base, const TcTable& hidden,
                                            std::span<const std::byte> hidden_row, std::span<std::byte> out,
                                            std::size_t& length) const {
  const std::size_t key_columns = hidden.def.primary_key.size();
  length = 0;
  ValueCursor cursor(hidden_row);
  ValueEntry e;
  while (cursor.next(e)) {
    if (e.column < key_columns) continue;
    const std::size_t k = e.column - key_columns;
    if (k >= base.def.primary_key.size()) return ErrorCode::kBadRequest;
    length += put_value(out.subspan(length), base.def.primary_key[k], e.is_null, e.bytes);
  }
  return ErrorCode::kNone;
}

// ---- keeping the hidden tables in step ---------------------------------------------------

namespace {
// The hidden row of unique index `u` of table t that a write's image names
// (`values`: the unique and primary key columns an LqhKeyConf carries for
// the row before or after the change), in `out`: the unique key section
// (`key_length` bytes), then the primary key columns (`pk_length` bytes
// more). False when the image names none: there is no row, or a unique
// column is NULL (NULLs are not indexed).
bool unique_row_of(const TcTable& t, const TcTable::Unique& u, std::span<const std::byte> values,
                   std::span<std::byte> out, std::size_t& key_length, std::size_t& pk_length) {
  key_length = pk_length = 0;
  bool complete = !values.empty();
  const std::size_t key_columns = u.columns.size();
  for (std::size_t i = 0; i < key_columns && complete; ++i) {
    ValueCursor cursor(values);
    ValueEntry e;
    bool found = false;
    while (cursor.next(e))
      if (e.column == u.columns[i]) {
        found = !e.is_null;
        key_length += put_value(out.subspan(key_length), static_cast<uint16_t>(i), false, e.bytes);
      }
    complete = found;
  }
  for (std::size_t k = 0; k < t.def.primary_key.size() && complete; ++k) {
    ValueCursor cursor(values);
    ValueEntry e;
    while (cursor.next(e))
      if (e.column == t.def.primary_key[k])
        pk_length +=
            put_value(out.subspan(key_length + pk_length), static_cast<uint16_t>(key_columns + k), false, e.bytes);
  }
  return complete;
}
}  // namespace

// A write on a table with unique indexes: delete the old hidden rows and
// insert the new ones (LDM sent the unique and primary key columns before
// and after the change), in the write's transaction. A change that cannot
// be sent aborts the transaction, and nothing more is sent for it.
void TcBlock::Impl::maintain_unique(uint32_t tx_ref, const Op& op, const LqhKeyConf& conf, BlockContext& c) {
  FJORD_ASSERT(op.type != OpType::kRead);
  FJORD_ASSERT(txs[tx_ref].state == TxState::kActive);
  const TcTable* t = table(op.table);
  if (!t) return;
  for (const TcTable::Unique& u : t->uniques) {
    const TcTable* hidden = table(u.index_id);
    if (!hidden) continue;
    std::size_t before_key = 0, before_pk = 0, after_key = 0, after_pk = 0;
    const bool had = unique_row_of(*t, u, conf.unique_before, section_a, before_key, before_pk);
    const bool has = unique_row_of(*t, u, conf.unique_after, section_b, after_key, after_pk);
    if (had && has && before_key == after_key && std::memcmp(section_a.data(), section_b.data(), before_key) == 0)
      continue;  // the unique key did not change
    if (had) change_hidden_row(tx_ref, op, *hidden, OpType::kDelete, std::span(section_a).first(before_key), {}, c);
    // The hidden row is the unique key columns, then the primary key columns.
    if (has && txs[tx_ref].state == TxState::kActive)
      change_hidden_row(tx_ref, op, *hidden, OpType::kInsert, std::span(section_b).first(after_key),
                        std::span(section_b).first(after_key + after_pk), c);
    if (txs[tx_ref].state != TxState::kActive) return;
  }
}

// One change of a hidden table's row on behalf of user operation `op`: an
// exclusive delete or insert of the row whose key section is `key`.
void TcBlock::Impl::change_hidden_row(uint32_t tx_ref, const Op& op, const TcTable& hidden, OpType type,
                                      std::span<const std::byte> key, std::span<const std::byte> values,
                                      BlockContext& c) {
  const uint32_t ref = new_op(tx_ref, OpKind::kUniqueMaintenance);
  if (ref == kNoRecord) return start_abort(tx_ref, ErrorCode::kTooManyOperations, op.op_index, c);
  ops[ref].op_index = op.op_index;
  LqhKeyReq lqh;
  lqh.table_id = hidden.def.table_id;
  lqh.table_version = hidden.def.version;
  lqh.op = type;
  lqh.lock = LockMode::kExclusive;
  lqh.result_to = ResultTo::kTc;
  lqh.key = key;
  lqh.values = values;
  ErrorCode error = ErrorCode::kNone;
  if (!route_key(hidden, key, lqh, error)) return start_abort(tx_ref, error, op.op_index, c);
  send_lqh(ref, lqh, c);
}

}  // namespace fjord::engine
