// LDM: row locks, waiting requests, commit and abort.
//
// A locked row has a RowLock: its holders (one Hold per transaction, shared
// or exclusive) and a FIFO queue of parked requests. A request is granted
// when its transaction already holds the row in a mode that covers it, or
// holds it shared and is the only holder (an upgrade), or, for a transaction
// holding nothing there, when nobody waits and the modes are compatible.
// Otherwise it parks: at the tail, or, for a holder's upgrade, ahead of the
// transactions that hold nothing (they wait for it anyway).
//
// When holders leave (commit, abort) or waiters go (abort), the row is woken:
// if its first waiter can be granted, the whole queue is taken off and its
// requests run again in order, from their saved bytes. The first that must
// wait again parks on the row's (maybe new) lock; the ones after it join that
// queue in their order without running, unless their transaction holds the
// row (then they run: a transaction's own operations must not wait behind
// transactions that wait for it).
#include "fjord/base/log.h"
#include "ldm_impl.h"

namespace fjord::engine {

using namespace protocol;
using namespace ldm;

Grant LdmBlock::Impl::grant(uint32_t lock_ref, uint32_t hold, LockKind mode, bool respect_queue) {
  const RowLock& lock = locks[lock_ref];
  if (hold != kNoRecord) {
    const Hold& mine = holds[hold];
    if (mode == LockKind::kShared || mine.mode == LockKind::kExclusive || lock.holders == 1) return Grant::kGranted;
    return Grant::kWaitFirst;
  }
  if (respect_queue && lock.queue_head != kNoRecord) return Grant::kWait;
  if (lock.holders == 0 || (mode == LockKind::kShared && !lock.exclusive)) return Grant::kGranted;
  return Grant::kWait;
}

uint32_t LdmBlock::Impl::hold_of(uint32_t lock_ref, uint32_t tx) {
  if (tx == kNoRecord) return kNoRecord;
  for (uint32_t h = locks[lock_ref].first_holder; h != kNoRecord; h = holds[h].next_in_lock)
    if (holds[h].tx == tx) return h;
  return kNoRecord;
}

uint32_t LdmBlock::Impl::new_tx_record(TxId tx) {
  const uint32_t ref = txs.allocate();
  if (ref == kNoRecord) return kNoRecord;
  txs[ref].tx = tx;
  const bool inserted = tx_by_id.insert(tx.value, ref);
  FJORD_ASSERT(inserted);  // sized like the pool, and looked up before
  return ref;
}

void LdmBlock::Impl::release_tx_if_empty(uint32_t tx) {
  if (tx == kNoRecord || !txs.valid(tx)) return;
  const TxRecord& r = txs[tx];
  if (r.first_hold != kNoRecord || r.first_parked != kNoRecord) return;
  tx_by_id.erase(r.tx.value);
  txs.release(tx);
}

// Takes the records the operation needs (its transaction, its hold, the
// row's lock) before anything changes: all of them or none.
bool LdmBlock::Impl::reserve_records(KeyOp& op) {
  op.new_tx = op.tx == kNoRecord;
  op.new_hold = op.hold == kNoRecord;
  op.new_lock = op.lock == kNoRecord;
  if (op.new_tx) op.tx = new_tx_record(op.req->tx);
  if (op.new_hold && op.tx != kNoRecord) op.hold = holds.allocate();
  if (op.new_lock && op.hold != kNoRecord) op.lock = locks.allocate();
  if (op.tx != kNoRecord && op.hold != kNoRecord && op.lock != kNoRecord) {
    if (op.new_lock) {
      RowLock& lock = locks[op.lock];
      lock.partition = op.part;
      lock.table_id = op.req->table_id;
      bump(counters.lock_records_in_use);
    }
    return true;
  }
  unreserve_records(op);
  return false;
}

// Links a new lock to its anchor, so that the KeySource finds the pending
// versions through the row's header.
void LdmBlock::Impl::attach_lock(KeyOp& op) {
  if (!op.new_lock || op.lock_attached) return;
  locks[op.lock].anchor = op.anchor;
  set_slot_lock(op.part->mutable_slot(op.anchor), op.lock);
  op.lock_attached = true;
}

// Gives back what reserve_records took (the operation failed).
void LdmBlock::Impl::unreserve_records(KeyOp& op) {
  if (op.new_lock && op.lock != kNoRecord) {
    if (op.lock_attached && locks[op.lock].anchor != kNoRow)
      set_slot_lock(op.part->mutable_slot(locks[op.lock].anchor), kNoRecord);
    locks.release(op.lock);
    bump(counters.lock_records_in_use, -1);
    op.lock = kNoRecord;
  }
  if (op.new_hold && op.hold != kNoRecord) {
    holds.release(op.hold);
    op.hold = kNoRecord;
  }
  if (op.new_tx && op.tx != kNoRecord) {
    release_tx_if_empty(op.tx);
    op.tx = kNoRecord;
  }
  op.new_tx = op.new_hold = op.new_lock = op.lock_attached = false;
}

// The operation succeeded: its transaction holds the row in `op.mode`.
void LdmBlock::Impl::link_hold(KeyOp& op) {
  attach_lock(op);
  RowLock& lock = locks[op.lock];
  Hold& hold = holds[op.hold];
  if (op.new_hold) {
    hold.tx = op.tx;
    hold.lock = op.lock;
    hold.mode = op.mode;
    hold.next_in_lock = lock.first_holder;
    if (lock.first_holder != kNoRecord) holds[lock.first_holder].prev_in_lock = op.hold;
    lock.first_holder = op.hold;
    ++lock.holders;
    hold.next_in_tx = txs[op.tx].first_hold;
    txs[op.tx].first_hold = op.hold;
    bump(counters.operation_records_in_use);
  } else if (op.mode == LockKind::kExclusive) {
    hold.mode = LockKind::kExclusive;
  }
  if (op.mode == LockKind::kExclusive) lock.exclusive = true;
  ++txs[op.tx].ops;
  op.new_tx = op.new_hold = op.new_lock = false;
}

// ---- waiting --------------------------------------------------------------------------

KeyOutcome LdmBlock::Impl::park(KeyOp& op, bool first, BlockContext& c) {
  const LqhKeyReq& req = *op.req;
  if (op.tx == kNoRecord) {
    op.tx = new_tx_record(req.tx);
    op.new_tx = true;
    if (op.tx == kNoRecord) return refuse(op, ErrorCode::kTooManyOperations, c);
  }
  const uint32_t ref = parked.allocate();
  const uint32_t chunks = ref == kNoRecord ? kNoChunk : parked_bytes.store({req.key, req.values, req.columns});
  if (chunks == kNoChunk) {
    if (ref != kNoRecord) parked.release(ref);
    return refuse(op, ErrorCode::kTooManyOperations, c);
  }
  Parked& p = parked[ref];
  p.tx = op.tx;
  p.mode = op.mode;
  p.from = op.from;
  p.req = req;
  p.req.key = p.req.values = p.req.columns = {};
  p.key_bytes = static_cast<uint32_t>(req.key.size());
  p.value_bytes = static_cast<uint32_t>(req.values.size());
  p.column_bytes = static_cast<uint32_t>(req.columns.size());
  p.chunks = chunks;
  TxRecord& tx = txs[op.tx];
  p.next_in_tx = tx.first_parked;
  if (tx.first_parked != kNoRecord) parked[tx.first_parked].prev_in_tx = ref;
  tx.first_parked = ref;
  enqueue(op.lock, ref, first);
  op.new_tx = false;
  if (!op.resumed) bump(counters.lock_waits);
  bump(counters.parked_now);
  return KeyOutcome{true, op.lock};
}

// Puts a parked request in a lock's queue: at the tail, or (first) after
// the waiting requests of the row's holders and before everyone else.
void LdmBlock::Impl::enqueue(uint32_t lock_ref, uint32_t ref, bool first) {
  RowLock& lock = locks[lock_ref];
  uint32_t after = lock.queue_tail;
  if (first) {
    after = kNoRecord;
    for (uint32_t q = lock.queue_head; q != kNoRecord && hold_of(lock_ref, parked[q].tx) != kNoRecord;
         q = parked[q].next)
      after = q;
  }
  Parked& p = parked[ref];
  p.lock = lock_ref;
  p.prev = after;
  p.next = after == kNoRecord ? lock.queue_head : parked[after].next;
  if (p.prev == kNoRecord)
    lock.queue_head = ref;
  else
    parked[p.prev].next = ref;
  if (p.next == kNoRecord)
    lock.queue_tail = ref;
  else
    parked[p.next].prev = ref;
}

// Frees a parked request (its record and bytes) and unlinks it from its
// transaction; the caller has taken it out of its lock's queue.
void LdmBlock::Impl::unpark(uint32_t ref) {
  Parked& p = parked[ref];
  TxRecord& tx = txs[p.tx];
  if (p.prev_in_tx == kNoRecord)
    tx.first_parked = p.next_in_tx;
  else
    parked[p.prev_in_tx].next_in_tx = p.next_in_tx;
  if (p.next_in_tx != kNoRecord) parked[p.next_in_tx].prev_in_tx = p.prev_in_tx;
  parked_bytes.free(p.chunks);
  parked.release(ref);
  bump(counters.parked_now, -1);
}

// Runs parked requests again, in order (a chain through Parked::next that
// is in no queue any more). See the file comment.
void LdmBlock::Impl::resume(uint32_t first, BlockContext& c) {
  FJORD_ASSERT_MSG(!resuming, "resume() re-entered");
  resuming = true;
  uint32_t parked_on = kNoRecord;  // the lock the first one to wait again went to
  for (uint32_t ref = first; ref != kNoRecord;) {
    Parked& p = parked[ref];
    const uint32_t next = p.next;
    if (parked_on != kNoRecord && hold_of(parked_on, p.tx) == kNoRecord) {
      enqueue(parked_on, ref, false);
      ref = next;
      continue;
    }
    LqhKeyReq req = p.req;
    const Address from = p.from;
    const std::size_t total = std::size_t{p.key_bytes} + p.value_bytes + p.column_bytes;
    parked_bytes.load(p.chunks, total, resume_buffer);
    const std::span<const std::byte> bytes(resume_buffer.data(), total);
    req.key = bytes.first(p.key_bytes);
    req.values = bytes.subspan(p.key_bytes, p.value_bytes);
    req.columns = bytes.subspan(std::size_t{p.key_bytes} + p.value_bytes);
    // A refusal frees its transaction record if that leaves it empty, except
    // a refusal before the request finds the record (its table dropped:
    // resolve_key): that record stays, empty, until TC's abort, which
    // always comes (the refusal aborts the transaction, and TC aborts in
    // every LDM it sent an operation to).
    unpark(ref);
    const KeyOutcome outcome = execute_key(req, from, true, c);
    if (outcome.parked && parked_on == kNoRecord) parked_on = outcome.lock;
    ref = next;
  }
  resuming = false;
}

// Grants what can be granted on a row whose holders or waiters changed, and
// frees its lock when nobody holds or waits any more.
void LdmBlock::Impl::wake(uint32_t lock_ref, BlockContext& c) {
  RowLock& lock = locks[lock_ref];
  if (lock.queue_head == kNoRecord) {
    if (lock.holders == 0) free_lock(lock_ref);
    return;
  }
  const Parked& head = parked[lock.queue_head];
  if (lock.holders > 0 && grant(lock_ref, hold_of(lock_ref, head.tx), head.mode, false) != Grant::kGranted) return;
  const uint32_t first = lock.queue_head;
  lock.queue_head = lock.queue_tail = kNoRecord;
  if (lock.holders == 0) free_lock(lock_ref);
  resume(first, c);
}

void LdmBlock::Impl::free_lock(uint32_t lock_ref) {
  RowLock& lock = locks[lock_ref];
  FJORD_ASSERT(lock.holders == 0);
  FJORD_ASSERT(lock.queue_head == kNoRecord);
  FJORD_ASSERT(lock.pending == Pending::kNone);
  if (lock.anchor != kNoRow) set_slot_lock(lock.partition->mutable_slot(lock.anchor), kNoRecord);
  locks.release(lock_ref);
  bump(counters.lock_records_in_use, -1);
}

// Takes a transaction's hold off its row (the caller wakes the row).
void LdmBlock::Impl::release_hold(uint32_t hold_ref) {
  Hold& hold = holds[hold_ref];
  RowLock& lock = locks[hold.lock];
  if (hold.prev_in_lock == kNoRecord)
    lock.first_holder = hold.next_in_lock;
  else
    holds[hold.prev_in_lock].next_in_lock = hold.next_in_lock;
  if (hold.next_in_lock != kNoRecord) holds[hold.next_in_lock].prev_in_lock = hold.prev_in_lock;
  --lock.holders;
  lock.exclusive = false;
  for (uint32_t h = lock.first_holder; h != kNoRecord; h = holds[h].next_in_lock)
    lock.exclusive |= holds[h].mode == LockKind::kExclusive;
  holds.release(hold_ref);
  bump(counters.operation_records_in_use, -1);
}

// Removes a transaction's waiting requests (no answer: TC gave them up),
// then wakes the rows they waited on.
void LdmBlock::Impl::drop_parked_of(uint32_t tx, BlockContext& c) {
  wake_list.clear();
  while (txs[tx].first_parked != kNoRecord) {
    const uint32_t ref = txs[tx].first_parked;
    Parked& p = parked[ref];
    RowLock& lock = locks[p.lock];
    if (p.prev == kNoRecord)
      lock.queue_head = p.next;
    else
      parked[p.prev].next = p.next;
    if (p.next == kNoRecord)
      lock.queue_tail = p.prev;
    else
      parked[p.next].prev = p.prev;
    if (!lock.wake_listed) {
      lock.wake_listed = true;
      wake_list.push_back(p.lock);
    }
    unpark(ref);
  }
  // Waking one row never frees another's lock, so every listed lock is live.
  for (std::size_t i = 0; i < wake_list.size(); ++i) {
    const uint32_t lock = wake_list[i];
    locks[lock].wake_listed = false;
    wake(lock, c);
  }
}

// LqhCommitReq / LqhAbortReq: make the transaction's changes visible (or
// discard them), release its locks and grant the waiters.
void LdmBlock::Impl::end_tx(const Signal& s, bool commit, BlockContext& c) {
  auto m = decode_lqh_tx_req(s);
  if (!m) {
    faults.refuse(s, m.status().message());
    return;
  }
  bump(commit ? counters.commits : counters.aborts);
  uint32_t ops = 0;
  uint32_t tx = kNoRecord;
  if (tx_by_id.find(m->tx.value, tx)) {
    if (commit && txs[tx].first_parked != kNoRecord)
      FJORD_LOG_WARN("LDM(%u): commit of transaction %llx while it waits for a lock: the waits are dropped", o.instance,
                     static_cast<unsigned long long>(m->tx.value));
    drop_parked_of(tx, c);
    ops = txs[tx].ops;
    for (uint32_t h = txs[tx].first_hold; h != kNoRecord;) {
      const uint32_t next = holds[h].next_in_tx;
      const uint32_t lock = holds[h].lock;
      if (lock == kNoRecord) {  // its table was dropped
        holds.release(h);
        bump(counters.operation_records_in_use, -1);
      } else {
        if (holds[h].mode == LockKind::kExclusive) commit ? commit_row(locks[lock]) : abort_row(locks[lock]);
        release_hold(h);
        wake(lock, c);
      }
      h = next;
    }
    txs[tx].first_hold = kNoRecord;
    release_tx_if_empty(tx);
  }
  const SignalOut out = encode(commit ? gsn::kLqhCommitConf : gsn::kLqhAbortConf, LqhTxConf{m->tx, o.instance, ops});
  c.send({s.sender_node, {block_numbers::kTc, m->tc_instance}}, out.number, out.data());
}

}  // namespace fjord::engine
