// TC: the end of a transaction. A commit or an abort goes to every LDM
// instance the transaction touched, whose confirmations free it and answer
// the API; a rollback from the API, its node's failure, a dropped table it
// wrote to and the timeouts (deadlock, inactivity) abort it.
#include <bit>

#include "fjord/base/log.h"
#include "tc_impl.h"

namespace fjord::engine {

using namespace protocol;

// ---- commit and abort --------------------------------------------------------------------

void TcBlock::Impl::start_commit(uint32_t tx_ref, BlockContext& c) {
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state == TxState::kActive);
  FJORD_ASSERT(tx.outstanding == 0);  // every operation answered
  tx.state = TxState::kCommitting;
  tx.confs_awaited = static_cast<uint32_t>(std::popcount(tx.ldm_held));
  for (uint16_t ldm = 0; ldm < o.ldm_instances; ++ldm)
    if (tx.ldm_held & (uint64_t{1} << ldm)) {
      const SignalOut out = encode(gsn::kLqhCommitReq, LqhTxReq{tx.id, o.instance});
      c.send(ldm_address(c, ldm), out.number, out.data());
    }
  if (tx.confs_awaited == 0) finish_tx(tx_ref, c);
}

void TcBlock::Impl::start_abort(uint32_t tx_ref, ErrorCode error, uint32_t op_index, BlockContext& c) {
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state != TxState::kCommitting);  // a commit starts only when every operation answered
  if (tx.state == TxState::kAborting) return;      // the first error is the one reported
  tx.state = TxState::kAborting;
  tx.error = error;
  tx.error_op = op_index;
  // Every LDM that got an operation, so queued lock waits are removed too.
  tx.confs_awaited = static_cast<uint32_t>(std::popcount(tx.ldm_touched));
  for (uint16_t ldm = 0; ldm < o.ldm_instances; ++ldm)
    if (tx.ldm_touched & (uint64_t{1} << ldm)) {
      const SignalOut out = encode(gsn::kLqhAbortReq, LqhTxReq{tx.id, o.instance});
      c.send(ldm_address(c, ldm), out.number, out.data());
    }
  if (tx.confs_awaited == 0) abort_ready(tx_ref, c);
}

void TcBlock::Impl::tx_conf(const Signal& s, BlockContext& c) {
  if (!from_own_ldm(s, c)) return;
  auto conf = decode_lqh_tx_conf(s);
  FJORD_ASSERT_MSG(conf.is_ok(), "LDM sent a malformed commit/abort confirmation");
  uint32_t tx_ref;
  if (!tx_by_id.find(conf->tx.value, tx_ref)) return;
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state != TxState::kActive);  // it awaits confirmations only once committing or aborting
  FJORD_ASSERT(tx.confs_awaited > 0);
  if (--tx.confs_awaited > 0) return;
  if (tx.state == TxState::kCommitting)
    finish_tx(tx_ref, c);
  else if (tx.state == TxState::kAborting)
    abort_ready(tx_ref, c);
}

// Every LDM released the transaction. Answer once the API's batch is complete.
void TcBlock::Impl::abort_ready(uint32_t tx_ref, BlockContext& c) {
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state == TxState::kAborting);
  FJORD_ASSERT(tx.confs_awaited == 0);
  const bool batch_in_flight = tx.batch_ops > 0 && !tx.execute_pending && !tx.silent;
  if (batch_in_flight) return;  // the rest of the batch is still arriving
  bump(counters.transactions_aborted);
  if (!tx.silent) {
    if (tx.reply_rollback)
      send_api(c, tx.api_node, TcTxMessage{gsn::kTcRollbackConf, tx.api_conn, tx.id});
    else if (tx.batch_ops > 0)
      send_api(c, tx.api_node, TcKeyRef{tx.api_conn, tx.id, tx.error_op, tx.error});
    else
      send_api(c, tx.api_node, TcAbortRep{tx.api_conn, tx.id, tx.error});
  }
  free_tx(tx_ref);
}

// Committed. `answered`: the API already has its TcKeyConf (read_now).
void TcBlock::Impl::finish_tx(uint32_t tx_ref, BlockContext& c, bool answered) {
  Tx& tx = txs[tx_ref];
  bump(counters.transactions_committed);
  if (!answered) send_api(c, tx.api_node, TcKeyConf{tx.api_conn, tx.id, tx.batch_ops, tx.data_messages, true});
  free_tx(tx_ref);
}

void TcBlock::Impl::free_tx(uint32_t tx_ref) {
  Tx& tx = txs[tx_ref];
  for (uint32_t op = tx.first_op; op != kNoRecord;) {
    const uint32_t next = ops[op].next;
    ops.release(op);
    op = next;
  }
  tx_by_id.erase(tx.id.value);
  txs.release(tx_ref);
}

void TcBlock::Impl::rollback_req(const Signal& s, BlockContext& c) {
  auto m = decode_tc_tx_message(s);
  if (!m) return faults.refuse(s, m.status().message());
  if (m->tx.api_node() != s.sender_node) return faults.refuse(s, "a commit or rollback of another node's transaction");
  uint32_t tx_ref;
  if (!tx_by_id.find(m->tx.value, tx_ref)) {
    // Unknown: already gone. A rollback succeeds trivially; a commit cannot.
    if (m->number == gsn::kTcRollbackReq)
      send_api(c, s.sender_node, TcTxMessage{gsn::kTcRollbackConf, m->api_conn, m->tx});
    else
      send_api(c, s.sender_node, TcKeyRef{m->api_conn, m->tx, UINT32_MAX, ErrorCode::kUnknownTransaction});
    return;
  }
  Tx& tx = txs[tx_ref];
  tx.last_activity_ns = c.now_ns();
  if (tx.state != TxState::kActive) return;  // already ending: its own answer follows
  if (m->number == gsn::kTcCommitReq) {
    if (tx.outstanding > 0) return;  // API broke protocol; ignore
    return start_commit(tx_ref, c);
  }
  // A rollback while operations are outstanding comes from an API that gave
  // up waiting for them (its request timeout; a lock wait, say): aborted as
  // a deadlock victim is, which also removes its queued lock waits, and
  // answered with the rollback's confirmation instead of the batch's.
  tx.reply_rollback = true;
  tx.batch_ops = 0;
  start_abort(tx_ref, ErrorCode::kNone, UINT32_MAX, c);
}

// ---- failures and timeouts -------------------------------------------------------------------

void TcBlock::Impl::node_disconnected(NodeId node, BlockContext& c) {
  for (uint32_t i = 0; i < txs.capacity(); ++i) {
    const uint32_t ref = txs.ref_at(i);
    if (ref == kNoRecord || txs[ref].api_node != node) continue;
    txs[ref].silent = true;
    if (txs[ref].state == TxState::kAborting) {
      if (txs[ref].confs_awaited == 0) abort_ready(ref, c);
    } else if (txs[ref].state == TxState::kActive) {
      start_abort(ref, ErrorCode::kNodeFailure, UINT32_MAX, c);
    }
    // Committing transactions finish: their locks go with the commit.
  }
  scans_of_node_gone(node, c);
}

void TcBlock::Impl::timer(BlockContext& c) {
  const uint64_t now = c.now_ns();
  const uint64_t deadlock_ns = uint64_t{o.deadlock_timeout_ms} * 1'000'000;
  const uint64_t inactive_ns = uint64_t{o.inactive_timeout_ms} * 1'000'000;
  // At most one deadlock victim per pass: aborting it releases its locks, and
  // the transactions that waited for it get them instead of being aborted too.
  bool victim_chosen = false;
  for (uint32_t i = 0; i < txs.capacity(); ++i) {
    const uint32_t ref = txs.ref_at(i);
    if (ref == kNoRecord || txs[ref].state != TxState::kActive) continue;
    Tx& tx = txs[ref];
    if (tx.outstanding > 0 && !victim_chosen) {
      for (uint32_t op = tx.first_op; op != kNoRecord; op = ops[op].next) {
        if (ops[op].answered || now - ops[op].sent_ns < deadlock_ns) continue;
        bump(counters.deadlock_aborts);
        FJORD_LOG_INFO("TC(%u): transaction %llx waited %llu ms for operation %u: aborting (deadlock timeout)",
                       o.instance, static_cast<unsigned long long>(tx.id.value),
                       static_cast<unsigned long long>((now - ops[op].sent_ns) / 1'000'000), ops[op].op_index);
        start_abort(ref, ErrorCode::kDeadlockTimeout, ops[op].op_index, c);
        victim_chosen = true;
        break;
      }
    } else if (tx.outstanding == 0 && inactive_ns > 0 && now - tx.last_activity_ns > inactive_ns) {
      // Idle between batches, or in the middle of one whose rest the API
      // never sent (it stopped, or gave up when its send buffer stayed
      // full): either way nothing more is coming, and the locks it holds
      // must go. A batch cut short is answered now (its TcKeyRef) rather
      // than when its last operation arrives, as abort_ready would wait.
      bump(counters.inactive_aborts);
      if (tx.batch_ops > 0) tx.execute_pending = true;
      start_abort(ref, ErrorCode::kInactiveTimeout, UINT32_MAX, c);
    }
  }
}

// ---- a dropped table ----------------------------------------------------------------------

// A dropped table's rows and locks go at once in every LDM, uncommitted
// changes included, so a transaction that wrote to it could commit only
// its other changes while these went nowhere: it is aborted here (283),
// its other changes rolled back and its locks released, and its next
// execute() says why. Here and not at commit: a drop is rare and may walk
// every transaction's operations, while a check at commit would cost every
// commit a walk of its own (TC keeps no per-table state on the hot path).
// DICT drops a table's hidden unique-index tables by installs of their
// own, so the maintenance writes of its unique indexes are found too.
// Reads keep their transaction: what they returned was committed when they
// ran. A transaction already committing is left to finish: its commit went
// to the LDMs before TC saw the drop, so it comes before the drop, which
// then removes what it wrote to the table, as it would after any commit.
void TcBlock::Impl::abort_writers_of(uint32_t table_id, BlockContext& c) {
  for (uint32_t i = 0; i < txs.capacity(); ++i) {
    const uint32_t ref = txs.ref_at(i);
    if (ref == kNoRecord || txs[ref].state != TxState::kActive) continue;
    for (uint32_t op = txs[ref].first_op; op != kNoRecord; op = ops[op].next) {
      if (ops[op].table != table_id || ops[op].type == OpType::kRead) continue;
      bump(counters.drop_aborts);
      FJORD_LOG_INFO("TC(%u): transaction %llx wrote to table %u, which is being dropped: aborting it", o.instance,
                     static_cast<unsigned long long>(txs[ref].id.value), table_id);
      start_abort(ref, ErrorCode::kTableDropped, UINT32_MAX, c);
      break;
    }
  }
}

}  // namespace fjord::engine
