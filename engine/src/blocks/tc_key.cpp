// TC: key requests. A TcKeyReq's key is encoded, hashed and routed ahead
// (prefetch), the request runs on its transaction (key_req, tc_key_req.h):
// a read-committed read whose LDM is on this thread runs there at once
// (read_now), anything else goes to the LDM owning its partition as an
// LqhKeyReq, whose answer (LqhKeyConf/Ref) counts towards the batch's
// TcKeyConf (op_done) or aborts the transaction.
#include <array>

#include "fjord/base/log.h"
#include "tc_impl.h"
#include "tc_key_req.h"

namespace fjord::engine {

using namespace protocol;

// ---- look-ahead of a single request --------------------------------------------------------

// The reads TC will run directly: start loading the key's hash bucket
// (stage 0), then its rows (stage 1), as the LDM does for its own queue;
// for a read by unique key, its hidden row's key. Stage 0 also leaves the
// key's route on the signal (route_note) for stage 1 and for tc_key_req,
// and the encoded key in a PreparedKey slot.
void TcBlock::Impl::prefetch(const Signal& s, int stage) const {
  if (stage == 1) {
    // Stage 0 read the request: its slot has the table, the note the route
    // (a prefetch is only a hint: prefetch_key checks what it is given).
    const PreparedKey* p = prepared_for(s);
    if (p == nullptr) return;
    const uint32_t partition = partition_of_note(p->note);
    if (const LdmBlock* ldm = direct_ldm[ldm_of(partition)])
      ldm->prefetch_key(p->table_id, partition, static_cast<uint32_t>(p->note), stage);
    return;
  }
  TcKeyReadRoute r;
  if (!peek_tc_key_read(s, r)) return;
  const TcTable* t = table(r.table_id);
  if (t == nullptr) return;
  std::span<const std::byte> section = r.key;
  std::array<std::byte, 2 * kMaxKeyBytes> unique_section;  // a hint: a key that does not fit is not prefetched
  if (r.index_id != 0) {
    TcKeyReq req;
    req.index_id = r.index_id;
    req.key = r.key;
    const TcTable* hidden = nullptr;
    std::size_t at = 0;
    if (hidden_key(*t, req, hidden, unique_section, at) != ErrorCode::kNone) return;
    t = hidden;
    section = std::span(unique_section).first(at);
  }
  uint32_t partition = 0, key_hash = 0;
  if (!read_route_note(s.prefetch_note, *t, partition, key_hash)) {
    const uint32_t slot = prepared_next;
    prepared_next = slot + 1 == prepared.size() ? 0 : slot + 1;
    EncodedKey key;
    if (!encode_route(*t, section, std::span(prepared_bytes).subspan(slot * kMaxKeyBytes, kMaxKeyBytes), key,
                      partition))
      return;
    key_hash = static_cast<uint32_t>(key.hash);
    s.prefetch_note = route_note(*t, slot, partition, key_hash);
    prepared[slot] = {&s, s.prefetch_note, t->def.table_id, key};
  }
  if (const LdmBlock* ldm = direct_ldm[ldm_of(partition)])
    ldm->prefetch_key(t->def.table_id, partition, key_hash, stage);
}

// The key prefetch() prepared for `s` (its note names the slot), if the
// slot still holds it: a slot is rewritten only by a later window's
// prefetch, and decode clears a signal's note before that.
const TcBlock::Impl::PreparedKey* TcBlock::Impl::prepared_for(const Signal& s) const {
  const PreparedKey& p = prepared[slot_of_note(s.prefetch_note)];
  return p.signal == &s && p.note == s.prefetch_note ? &p : nullptr;
}

// ---- requests -----------------------------------------------------------------------------

void TcBlock::Impl::tc_key_req(const Signal& s, BlockContext& c) {
  TcKeyReq req;
  if (const Status decoded = decode_tc_key_req(s, req); !decoded) return refuse_malformed(s, decoded, c);
  const PreparedKey* p = (s.prefetch_note >> 63) != 0 ? prepared_for(s) : nullptr;
  const EncodedKey* known = p != nullptr ? &p->key : nullptr;
  if (one_shot_read(s.sender_node, req, s.prefetch_note, known, c)) return;
  key_req(s.sender_node, req, s.prefetch_note, known, c);
}

// A transaction of one read-committed read by primary key whose LDM is on
// this thread (start, execute and commit in one TcKeyReq: a serial or
// asynchronous pk read) needs no transaction record: the read runs at once
// and its KeyDataConf ends the transaction, or it fails and a TcKeyRef
// says why, as key_req's path answers it (read_now, start_abort,
// abort_ready) with the record allocated and freed around it. False
// (nothing done) for anything else, which key_req takes, and for a request
// it would refuse (a transaction id in use, a sender that is not the id's
// node, an overloaded link to the API), which it refuses.
bool TcBlock::Impl::one_shot_read(NodeId sender, const TcKeyReq& req, uint64_t note, const EncodedKey* known,
                                  BlockContext& c) {
  constexpr uint32_t kOneShot = kFlagStartTx | kFlagExecute | kFlagCommit;
  if ((req.flags & (kOneShot | kFlagViaUnique)) != kOneShot || req.op != OpType::kRead ||
      req.lock != LockMode::kCommitted || req.batch_ops != 1 || !any_direct_ldm || req.tx.api_node() != sender)
    return false;
  const TcTable* t = table(req.table_id);
  if (t == nullptr || t->def.version != req.table_version) return false;
  LqhKeyReq lqh = user_lqh(req, sender);
  lqh.tx = req.tx;
  EncodedKey encoded;
  const EncodedKey* key = known;
  if (known == nullptr || !read_route_note(note, *t, lqh.partition, lqh.key_hash)) {
    ErrorCode error = ErrorCode::kNone;
    if (!route_key(*t, req.key, lqh, error, &encoded)) return false;
    key = &encoded;
  }
  LdmBlock* ldm = direct_ldm[ldm_of(lqh.partition)];
  uint32_t in_use = kNoRecord;
  if (ldm == nullptr || tx_by_id.find(req.tx.value, in_use) ||
      c.pressure_to(sender) == transport::SendPressure::kOverload)
    return false;
  bump(counters.operations);
  const TcKeyConf end{req.api_conn, req.tx, 1, 1, true};
  const ErrorCode error = ldm->read_committed_now(lqh, c, &end, key);
  if (error == ErrorCode::kNone) {
    bump(counters.transactions_committed);
    return true;
  }
  bump(counters.transactions_aborted);
  send_api(c, sender, TcKeyRef{req.api_conn, req.tx, req.op_index, error});
  return true;
}

void TcBlock::Impl::refuse(NodeId sender, const TcKeyReq& req, ErrorCode error, BlockContext& c) {
  bump(counters.refused_requests);
  send_api(c, sender, TcKeyRef{req.api_conn, req.tx, req.op_index, error});
}

// A TcKeyReq or TcKeyTrain that does not decode: refused (kBadRequest) to
// the handle and transaction its first words name, if it has them.
void TcBlock::Impl::refuse_malformed(const Signal& s, const Status& why, BlockContext& c) {
  faults.refuse(s, why.message());
  TcKeyReq blank;
  // A train begins with a request's handle and transaction words.
  using L = layout::TcKeyReq;
  static_assert(int{layout::TcKeyTrain::kApiConn} == int{L::kApiConn});
  static_assert(int{layout::TcKeyTrain::kTxLo} == int{L::kTxLo});
  if (s.word_count() > L::kTxLo) blank = TcKeyReq{s.word(L::kApiConn), TxId::from(s.word(L::kTxHi), s.word(L::kTxLo))};
  refuse(s.sender_node, blank, ErrorCode::kBadRequest, c);
}

uint32_t TcBlock::Impl::new_op(uint32_t tx_ref, OpKind kind) {
  const uint32_t ref = ops.allocate();
  if (ref == kNoRecord) return kNoRecord;
  Op& op = ops[ref];
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state == TxState::kActive);  // an aborting or committing transaction takes no more operations
  op.tx = tx_ref;
  op.kind = kind;
  op.next = tx.first_op;
  tx.first_op = ref;
  return ref;
}

bool TcBlock::Impl::route_key(const TcTable& t, std::span<const std::byte> key, LqhKeyReq& lqh, ErrorCode& error,
                              EncodedKey* encoded) {
  EncodedKey k;
  if (!encode_route(t, key, key_buffer, k, lqh.partition)) {
    error = ErrorCode::kBadRequest;
    return false;
  }
  lqh.key_hash = static_cast<uint32_t>(k.hash);
  if (encoded != nullptr) *encoded = k;
  return true;
}

// An operation on a base table: run at once when it is a read-committed
// read whose LDM is on this thread (read_now), else sent as an LqhKeyReq.
void TcBlock::Impl::issue_user_op(uint32_t tx_ref, uint32_t op_index, LqhKeyReq& lqh, BlockContext& c,
                                  const EncodedKey* key) {
  if (lqh.op == OpType::kRead && lqh.lock == LockMode::kCommitted && lqh.result_to == ResultTo::kApi)
    if (LdmBlock* ldm = direct_ldm.empty() ? nullptr : direct_ldm[ldm_of(lqh.partition)])
      return read_now(tx_ref, op_index, lqh, *ldm, c, key);
  const uint32_t op_ref = new_op(tx_ref, OpKind::kUser);
  if (op_ref == kNoRecord) return start_abort(tx_ref, ErrorCode::kTooManyOperations, op_index, c);
  ops[op_ref].op_index = op_index;
  send_lqh(op_ref, lqh, c);
}

// The read runs in the LDM now and holds nothing there, so it needs no
// operation record: it is answered (its KeyData already sent) or it failed.
// Running it ahead of signals still queued for that LDM changes nothing a
// read-committed read can see: it reads the last committed version, and no
// commit it could miss has been confirmed to anyone yet.
// When it is the last of a committed batch with nothing else outstanding
// and nothing held to commit, the batch ends with it: its KeyData carries
// the TcKeyConf that finish_tx() would have sent (one signal, not two), if
// both name the API's transaction handle alike (an API may give each
// operation a handle of its own; ours does not).
void TcBlock::Impl::read_now(uint32_t tx_ref, uint32_t op_index, LqhKeyReq& lqh, LdmBlock& ldm, BlockContext& c,
                             const EncodedKey* key) {
  if (reply.active) [[unlikely]]
    return read_into_train(tx_ref, op_index, lqh, ldm, c, key);
  Tx& tx = txs[tx_ref];
  lqh.tx = tx.id;
  bump(counters.operations);
  const bool ends_batch = read_ends_batch(tx, lqh);
  TcKeyConf end;
  if (ends_batch) end = {tx.api_conn, tx.id, tx.batch_ops, tx.data_messages + 1, true};
  const ErrorCode error = ldm.read_committed_now(lqh, c, ends_batch ? &end : nullptr, key);
  if (error != ErrorCode::kNone) return start_abort(tx_ref, error, op_index, c);
  ++tx.data_messages;
  if (ends_batch) return finish_tx(tx_ref, c, /*answered=*/true);
  ++tx.outstanding;  // op_done() counts it answered
  op_done(tx_ref, c);
}

void TcBlock::Impl::send_lqh(uint32_t op_ref, const LqhKeyReq& req, BlockContext& c) {
  Op& op = ops[op_ref];
  Tx& tx = txs[op.tx];
  FJORD_ASSERT(tx.state == TxState::kActive);
  op.ldm = ldm_of(req.partition);
  op.table = req.table_id;
  op.type = req.op;
  op.lock = req.lock;
  op.sent_ns = c.now_ns();
  tx.ldm_touched |= uint64_t{1} << op.ldm;
  if (holds_something(req.op, req.lock)) tx.ldm_held |= uint64_t{1} << op.ldm;
  ++tx.outstanding;
  bump(counters.operations);
  LqhKeyReq out = req;
  out.tc_op = op_ref;
  out.tx = tx.id;
  send_out(c, ldm_address(c, op.ldm), out);
}

// ---- answers from the LDMs ----------------------------------------------------------------

void TcBlock::Impl::lqh_key_conf(const Signal& s, BlockContext& c) {
  if (!from_own_ldm(s, c)) return;
  auto conf = decode_lqh_key_conf(s);
  FJORD_ASSERT_MSG(conf.is_ok(), "LDM sent a malformed LqhKeyConf");
  if (!ops.valid(conf->tc_op)) return;  // a late answer for an operation already given up
  Op& op = ops[conf->tc_op];
  if (op.answered) return;
  op.answered = true;
  const uint32_t tx_ref = op.tx;
  Tx& tx = txs[tx_ref];
  if (tx.state == TxState::kActive) {
    if (conf->data_sent_to_api) ++tx.data_messages;
    if (op.kind == OpKind::kUniqueLookup)
      unique_lookup_done(conf->tc_op, *conf, c);
    else if (op.kind == OpKind::kUser && op.type != OpType::kRead)
      maintain_unique(tx_ref, op, *conf, c);
  }
  op_done(tx_ref, c);
}

void TcBlock::Impl::lqh_key_ref(const Signal& s, BlockContext& c) {
  if (!from_own_ldm(s, c)) return;
  auto ref = decode_lqh_key_ref(s);
  FJORD_ASSERT_MSG(ref.is_ok(), "LDM sent a malformed LqhKeyRef");
  if (!ops.valid(ref->tc_op)) return;
  Op& op = ops[ref->tc_op];
  if (op.answered) return;
  op.answered = true;
  const uint32_t tx_ref = op.tx;
  ErrorCode error = ref->error;
  if (op.kind == OpKind::kUniqueMaintenance && error == ErrorCode::kDuplicateKey)
    error = ErrorCode::kDuplicateUniqueKey;
  if (op.kind == OpKind::kUniqueMaintenance && error == ErrorCode::kNoSuchRow) [[unlikely]] {
    // A hidden row is deleted only for a unique value the base row had in
    // the transaction's view (a NULL has no hidden row and is not deleted),
    // and the base row's exclusive lock keeps any other transaction from
    // changing it meanwhile: the hidden row must be there. Missing, the
    // index and its table disagree, and going on would leave the base row
    // changed without its index; the transaction is aborted instead, as
    // an internal error the operator must hear of.
    const TcTable* hidden = table(op.table);
    FJORD_LOG_ERROR(
        "TC(%u): unique index table '%s' (id %u) has no row for a value its table's row had, deleting it for "
        "operation %u of transaction %llx: the index disagrees with its table; aborting the transaction",
        o.instance, hidden != nullptr ? hidden->def.name.c_str() : "?", op.table, op.op_index,
        static_cast<unsigned long long>(txs[tx_ref].id.value));
    error = ErrorCode::kIndexInconsistent;
  }
  --txs[tx_ref].outstanding;
  start_abort(tx_ref, error, op.op_index, c);
}

void TcBlock::Impl::op_done(uint32_t tx_ref, BlockContext& c) {
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.outstanding > 0);
  --tx.outstanding;
  if (tx.state != TxState::kActive || !tx.execute_pending || tx.outstanding > 0) return;
  if (tx.commit_requested) return start_commit(tx_ref, c);
  send_api(c, tx.api_node, TcKeyConf{tx.api_conn, tx.id, tx.batch_ops, tx.data_messages, false});
  tx.batch_ops = tx.data_messages = 0;
  tx.execute_pending = false;
  tx.last_activity_ns = c.now_ns();
}

}  // namespace fjord::engine
