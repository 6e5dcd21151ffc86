// TcBlock::Impl::key_req, the path of one key request, and its steps. Both
// of its callers, tc_key_req (tc_key.cpp: a TcKeyReq) and tc_key_train
// (tc_train.cpp: each record of a TcKeyTrain the train's own paths do not
// take), have it inline: the single request's path is the serial read's,
// and a call per record would cost every read of a train. Include it only
// in those two files.
//
// Thread: TC's own. Hot path.
#pragma once

#include <cstring>

#include "tc_impl.h"

namespace fjord::engine {

// The transaction `req` names: found, or started by it (kFlagStartTx).
// False when the request is refused (the API has its TcKeyRef).
[[gnu::always_inline]] inline bool TcBlock::Impl::key_req_tx(NodeId sender, const protocol::TcKeyReq& req,
                                                             BlockContext& c, uint32_t& tx_ref) {
  if (req.tx.api_node() != sender) {
    refuse(sender, req, protocol::ErrorCode::kBadRequest, c);
    return false;
  }
  if (req.flags & protocol::kFlagStartTx) return start_tx(sender, req, c, tx_ref);
  if (!tx_by_id.find(req.tx.value, tx_ref)) {
    refuse(sender, req, protocol::ErrorCode::kUnknownTransaction, c);
    return false;
  }
  return true;
}

// A transaction record for the request that starts it: refused when its id
// is in use, the link to the API is overloaded, or the pool is full.
[[gnu::always_inline]] inline bool TcBlock::Impl::start_tx(NodeId sender, const protocol::TcKeyReq& req,
                                                           BlockContext& c, uint32_t& tx_ref) {
  using protocol::ErrorCode;
  if (tx_by_id.find(req.tx.value, tx_ref)) {
    refuse(sender, req, ErrorCode::kBadRequest, c);
    return false;
  }
  if (c.pressure_to(sender) == transport::SendPressure::kOverload) {
    refuse(sender, req, ErrorCode::kOverload, c);
    return false;
  }
  tx_ref = txs.allocate();
  if (tx_ref == kNoRecord) {
    refuse(sender, req, ErrorCode::kTooManyTransactions, c);
    return false;
  }
  Tx& fresh = txs[tx_ref];
  fresh.id = req.tx;
  fresh.api_node = sender;
  fresh.api_conn = req.api_conn;
  tx_by_id.insert(req.tx.value, tx_ref);
  return true;
}

// Counts the request in its transaction's batch (and notes the batch's end
// and whether it commits). Returns whether the request goes on: not when
// the transaction is aborting (the batch already failed; its remaining
// operations are dropped and the abort answers when the batch's last
// operation has arrived) or committing (the API broke protocol).
[[gnu::always_inline]] inline bool TcBlock::Impl::count_in_batch(Tx& tx, uint32_t tx_ref, const protocol::TcKeyReq& req,
                                                                 BlockContext& c) {
  tx.last_activity_ns = c.now_ns();
  ++tx.batch_ops;
  if (req.flags & protocol::kFlagExecute) {
    tx.execute_pending = true;
    tx.commit_requested = (req.flags & protocol::kFlagCommit) != 0;
  }
  if (tx.state == TxState::kAborting) {
    if (tx.execute_pending && tx.confs_awaited == 0) abort_ready(tx_ref, c);
    return false;
  }
  return tx.state == TxState::kActive;
}

// The request's table, when the request may run; null when it aborts the
// transaction instead (start_abort, with the reason).
[[gnu::always_inline]] inline const TcTable* TcBlock::Impl::key_req_table(uint32_t tx_ref, const Tx& tx,
                                                                          const protocol::TcKeyReq& req,
                                                                          BlockContext& c) {
  using protocol::ErrorCode;
  if ((req.flags & protocol::kFlagExecute) && req.batch_ops != tx.batch_ops) {
    start_abort(tx_ref, ErrorCode::kBadRequest, req.op_index, c);  // the batch's count disagrees
    return nullptr;
  }
  const TcTable* t = table(req.table_id);
  if (!t) {
    start_abort(tx_ref, ErrorCode::kNoSuchTable, req.op_index, c);
    return nullptr;
  }
  if (t->def.version != req.table_version) {
    start_abort(tx_ref, ErrorCode::kSchemaVersion, req.op_index, c);
    return nullptr;
  }
  // A hidden table written other than by TC's own upkeep would disagree
  // with its base table (its row gone, or naming a row that is not there).
  // The API never names one, so only a hand-built request gets here.
  if (t->hidden && req.op != protocol::OpType::kRead) [[unlikely]] {
    start_abort(tx_ref, ErrorCode::kBadRequest, req.op_index, c);
    return nullptr;
  }
  return t;
}

// A request by primary key: routed (by its note, or here), then run or sent.
[[gnu::always_inline]] inline void TcBlock::Impl::key_req_by_pk(uint32_t tx_ref, NodeId sender,
                                                                const protocol::TcKeyReq& req, const TcTable& t,
                                                                uint64_t note, const EncodedKey* known,
                                                                BlockContext& c) {
  protocol::LqhKeyReq lqh = user_lqh(req, sender);
  // The key encoded and hashed once, here or by prefetch(), for TC's routing and a direct read.
  EncodedKey encoded;
  const EncodedKey* key = &encoded;
  protocol::ErrorCode error = protocol::ErrorCode::kNone;
  if (read_route_note(note, t, lqh.partition, lqh.key_hash)) {
    key = known;
  } else if (!route_key(t, req.key, lqh, error, &encoded)) {
    return start_abort(tx_ref, error, req.op_index, c);
  }
  issue_user_op(tx_ref, req.op_index, lqh, c, key);
}

// A read by unique key: first the hidden table's row (unique key -> primary
// key), then the base row (read_base_of_unique, tc_unique.cpp).
[[gnu::always_inline]] inline void TcBlock::Impl::key_req_by_unique(const Tx& tx, uint32_t tx_ref, NodeId sender,
                                                                    const protocol::TcKeyReq& req, const TcTable& t,
                                                                    uint64_t note, const EncodedKey* known,
                                                                    BlockContext& c, const UniqueAhead* ahead) {
  using protocol::ErrorCode;
  if (ahead != nullptr && ahead->done) {  // a train's stages 0 and 3 found the hidden table and ran the lookup
    bump(counters.operations);
    if (ahead->error != ErrorCode::kNone) return start_abort(tx_ref, ahead->error, req.op_index, c);
    return read_base_of_unique(tx_ref, req.op_index, req.table_id, req.lock, req.columns, *ahead->hidden,
                               ahead->hidden_row, c, known, ahead->base_note);
  }
  const TcTable* hidden = nullptr;
  std::size_t at = 0;
  ErrorCode error = hidden_key(t, req, hidden, section_a, at);
  if (error != ErrorCode::kNone) return start_abort(tx_ref, error, req.op_index, c);
  protocol::LqhKeyReq lqh = hidden_lqh(req, sender, *hidden, std::span(section_a).first(at));
  // `known`, from a train's look-ahead, is then the hidden key's.
  if (known == nullptr || !read_route_note(note, *hidden, lqh.partition, lqh.key_hash)) {
    known = nullptr;
    if (!route_key(*hidden, lqh.key, lqh, error)) return start_abort(tx_ref, error, req.op_index, c);
  }
  // A read-committed lookup in an LDM of this thread runs now, as a direct
  // pk read does (read_now: it holds nothing, and sees what it would see
  // queued), and the base read follows at once: in a train, into its reply.
  if (lqh.lock == protocol::LockMode::kCommitted && any_direct_ldm)
    if (LdmBlock* ldm = direct_ldm[ldm_of(lqh.partition)]) {
      lqh.tx = tx.id;
      bump(counters.operations);
      LdmBlock::Into into{section_b};
      const ErrorCode looked_up = ldm->read_committed_now(lqh, c, nullptr, known, &into);
      if (looked_up != ErrorCode::kNone) return start_abort(tx_ref, looked_up, req.op_index, c);
      const std::span<const std::byte> hidden_row = std::span(section_b).subspan(
          protocol::kKeyDataRecordHeaderBytes, into.written - protocol::kKeyDataRecordHeaderBytes);
      return read_base_of_unique(tx_ref, req.op_index, req.table_id, req.lock, req.columns, *hidden, hidden_row, c);
    }
  const uint32_t op_ref = new_op(tx_ref, OpKind::kUniqueLookup);
  if (op_ref == kNoRecord) return start_abort(tx_ref, ErrorCode::kTooManyOperations, req.op_index, c);
  Op& op = ops[op_ref];
  op.op_index = req.op_index;
  op.base_table = req.table_id;
  op.column_count = static_cast<uint16_t>(req.columns.size() / 2);
  std::memcpy(lookup_columns[record_index(op_ref)].data(), req.columns.data(), req.columns.size());
  send_lqh(op_ref, lqh, c);
}

// One request: its transaction (key_req_tx), its place in the batch
// (count_in_batch), its table (key_req_table), then its run by primary key
// or by unique key. Each step that stops the request has answered it or
// started the transaction's abort.
[[gnu::always_inline]] inline void TcBlock::Impl::key_req(NodeId sender, const protocol::TcKeyReq& req, uint64_t note,
                                                          const EncodedKey* known, BlockContext& c,
                                                          const UniqueAhead* ahead) {
  uint32_t tx_ref = kNoRecord;
  if (!key_req_tx(sender, req, c, tx_ref)) return;
  Tx& tx = txs[tx_ref];
  if (!count_in_batch(tx, tx_ref, req, c)) return;
  const TcTable* t = key_req_table(tx_ref, tx, req, c);
  if (t == nullptr) return;
  if ((req.flags & protocol::kFlagViaUnique) == 0) return key_req_by_pk(tx_ref, sender, req, *t, note, known, c);
  key_req_by_unique(tx, tx_ref, sender, req, *t, note, known, c, ahead);
}

}  // namespace fjord::engine
