// TC: trains. A TcKeyTrain carries a batch of key requests; TC runs them as
// it would one by one, but looks ahead (stages 0-4 load each read's bucket
// and rows before it runs), runs reads of one table and column list by one
// read plan of the LDM (planned reads), and answers the direct reads in one
// KeyDataTrain.
#include <algorithm>
#include <cstring>

#include "tc_impl.h"
#include "tc_key_req.h"

namespace fjord::engine {

using namespace protocol;

// Stage 0 of train record i: a read-committed read's key (a read by unique
// key: its hidden row's) encoded, hashed and routed, and its bucket loaded
// when its LDM is on this thread.
[[gnu::always_inline]] inline void TcBlock::Impl::train_route(uint32_t i) {
  train_notes[i] = 0;
  train_unique_notes[i] = 0;
  train_unique[i].done = false;
  train_buckets[i] = nullptr;
  train_found[i] = nullptr;
  const TcKeyReq& r = train_reqs[i];
  if (!any_direct_ldm || r.op != OpType::kRead || r.lock != LockMode::kCommitted) return;
  const TcTable* t = table(r.table_id);
  if (t == nullptr || t->def.version != r.table_version) return;
  // A read by unique key looks ahead for its hidden row: t becomes the
  // hidden table, the section its key.
  std::span<const std::byte> section = r.key;
  if (r.flags & kFlagViaUnique) {
    // The section is as long as r.key: kept for stage 3 when it fits its
    // room (a longer one's hidden row does not fit stage 3's either).
    const bool kept = r.key.size() <= kHiddenRowBytes;
    const std::span<std::byte> out =
        kept ? std::span(train_hidden_keys).subspan(i * kHiddenRowBytes, kHiddenRowBytes) : std::span(section_a);
    const TcTable* hidden = nullptr;
    std::size_t at = 0;
    if (hidden_key(*t, r, hidden, out, at) != ErrorCode::kNone) return;
    t = hidden;
    section = out.first(at);
    train_hidden_key[i] = kept ? section : std::span<const std::byte>();
  }
  uint32_t partition = 0;
  if (!encode_route(*t, section, std::span(train_key_bytes).subspan(i * kMaxKeyBytes, kMaxKeyBytes), train_keys[i],
                    partition))
    return;  // key_req finds the fault again and answers it
  const auto hash = static_cast<uint32_t>(train_keys[i].hash);
  (r.flags & kFlagViaUnique ? train_unique_notes : train_notes)[i] = route_note(*t, 0, partition, hash);
  train_tables[i] = t->def.table_id;
  if (const LdmBlock* ldm = direct_ldm[ldm_of(partition)])
    train_buckets[i] = ldm->prefetch_bucket(t->def.table_id, partition, hash, &train_found[i]);
}

// Stage 1: the rows the key's bucket lists under its hash bits, loaded and
// named as its candidates (and the overflow block after a bucket that
// lists none). Nothing is inserted into or erased from a hash index while
// the train's signal runs (only direct reads run in an LDM inside it), so
// the bucket stage 0 found is still the key's, and the rows it lists are
// still the ones to compare when the read runs.
[[gnu::always_inline]] inline void TcBlock::Impl::train_bucket_rows(uint32_t i) {
  const uint64_t note = train_note(i);
  if (note == 0) return;
  const uint32_t partition = partition_of_note(note);
  if (const void* found = train_found[i]) {  // its partition, found by stage 0 in an LDM here
    EncodedKey& k = train_keys[i];
    k.candidate_count = direct_ldm[ldm_of(partition)]->prefetch_rows_in(
        found, static_cast<uint32_t>(note), train_buckets[i], train_rows[i].data(), 2, &train_buckets[i]);
    k.candidates = train_rows[i].data();
  }
}

// A train runs as its requests would one by one, but reads ahead: the keys
// of its read-committed reads (a read by unique key: its hidden row's key)
// are encoded and hashed and their buckets loaded (stage 0), then their
// rows (stage 1), before the first runs; a key its bucket did not list has
// its overflow block loaded in stage 1 and its rows a few records before it
// runs (stage 2); a read by unique key has its hidden lookup run and its
// base row's bucket loaded three records before its turn (stage 3), and
// that bucket's rows one record before (stage 4); and its direct reads
// answer in one KeyDataTrain. A train with a fault in any record is
// refused whole, before any of it runs.
void TcBlock::Impl::tc_key_train(const Signal& s, BlockContext& c) {
  TcKeyTrainCursor cursor(s);
  uint32_t n = 0;
  // The cursor stops at the count, at most kMaxTrainOps; the last call (at
  // the end, reading nothing) may get the spare slot.
  static_assert(std::tuple_size_v<decltype(train_reqs)> == kMaxTrainOps + 1);
  while (cursor.next(train_reqs[n])) ++n;
  if (!cursor.error().is_ok()) return refuse_malformed(s, cursor.error(), c);
  // Stages 0 and 1 for the whole train before its first read: all its
  // buckets, then all their rows, so that every load is under way long
  // before the read that needs it, and a train (kMaxTrainOps records) is
  // short enough that its lines are still cached when the reads run.
  for (uint32_t i = 0; i < n; ++i) train_route(i);
  for (uint32_t i = 0; i < n; ++i) train_bucket_rows(i);
  ++train_serial;  // the LDMs' read plans of earlier trains are stale
  reply.active = true;
  reply.api_node = s.sender_node;
  reply.api_conn = cursor.train().api_conn;
  reply.tx = cursor.train().tx;
  // The train's transaction, once a record went the general way (key_req)
  // and left it known: the direct reads in the middle of an active batch
  // then take the short way (planned_run_end, run_planned).
  uint32_t tx_ref = kNoRecord;
  // Stages 2-4 run this many records ahead of the reads (the first read
  // takes them all for the records up to there): time for a line to load,
  // not so long that it leaves the cache.
  const auto ahead = [&](uint32_t i, uint32_t distance, auto&& stage) {
    if (i != 0) {
      if (i + distance < n) stage(i + distance);
      return;
    }
    for (uint32_t j = 0; j <= distance && j < n; ++j) stage(j);
  };
  // A whole transaction of reads may need none (one_shot_train): the train
  // is then answered, or goes on after the read that failed.
  uint32_t i = one_shot_train(s.sender_node, n, c);
  if (i != 0 && !tx_by_id.find(reply.tx.value, tx_ref)) tx_ref = kNoRecord;
  while (i < n) {
    // Records i to end - 1 run as one read plan; none when end is i.
    const uint32_t end = train_notes[i] != 0 && tx_ref != kNoRecord ? planned_run_end(tx_ref, i, n) : i;
    // Each record's look-ahead as if the records ran one by one. The tests
    // here are the stages' own first ones, inline: most records of most
    // trains need none of them.
    for (uint32_t k = i; k < std::max(end, i + 1); ++k) {
      ahead(k, 4, [&](uint32_t j) {
        if (train_buckets[j] != nullptr) train_overflow(j);
      });
      ahead(k, 3, [&](uint32_t j) {
        if (train_unique_notes[j] != 0) train_hidden_lookup(j, c);
      });
      ahead(k, 1, [&](uint32_t j) {
        if (train_unique[j].done) train_base_rows(j);
      });
    }
    if (end != i) {
      i = run_planned(tx_ref, i, end, c);
      continue;
    }
    const bool known = train_note(i) != 0 || train_unique[i].done;
    key_req(s.sender_node, train_reqs[i], train_note(i), known ? &train_keys[i] : nullptr, c, &train_unique[i]);
    if (!tx_by_id.find(reply.tx.value, tx_ref)) tx_ref = kNoRecord;
    ++i;
  }
  flush_reply(c);
  reply.active = false;
}

// Stage 2 of train record i: when stage 1 found no candidate in its bucket
// but an overflow block after it, the rows that block lists under its hash
// bits (loading them), as its candidates.
void TcBlock::Impl::train_overflow(uint32_t i) {
  const void* block = train_buckets[i];
  const uint64_t note = train_note(i);
  if (block == nullptr || note == 0) return;  // stage 1 set it only for a direct read
  const uint32_t partition = partition_of_note(note);
  EncodedKey& k = train_keys[i];
  k.candidate_count = direct_ldm[ldm_of(partition)]->prefetch_rows(
      train_tables[i], partition, static_cast<uint32_t>(note), block, train_rows[i].data(), 2);
  train_buckets[i] = nullptr;
}

// Stage 3 of train record i, a read-committed read by unique key whose
// hidden row's LDM is on this thread: the hidden lookup runs (see
// UniqueAhead), and the base read's key is encoded and routed and, when its
// LDM is here too, its bucket loaded.
void TcBlock::Impl::train_hidden_lookup(uint32_t i, BlockContext& c) {
  const uint64_t note = train_unique_notes[i];
  if (note == 0) return;
  const TcKeyReq& r = train_reqs[i];
  // Stage 0 found both tables and built the hidden key; nothing in the
  // train's signal changes the schema.
  const TcTable* base = table(r.table_id);
  const TcTable* hidden = table(train_tables[i]);
  LdmBlock* ldm = direct_ldm[ldm_of(partition_of_note(note))];
  if (ldm == nullptr || train_hidden_key[i].empty() ||
      kKeyDataRecordHeaderBytes + hidden->max_read_bytes > kHiddenRowBytes)
    return;
  LqhKeyReq lqh = hidden_lqh(r, reply.api_node, *hidden, train_hidden_key[i]);
  lqh.partition = partition_of_note(note);
  lqh.key_hash = static_cast<uint32_t>(note);
  lqh.tx = r.tx;
  train_unique_notes[i] = 0;  // the record takes its lookup's outcome; train_keys[i] becomes the base key
  train_found[i] = nullptr;   // the hidden table's partition
  const std::span<std::byte> room = std::span(train_hidden_rows).subspan(i * kHiddenRowBytes, kHiddenRowBytes);
  LdmBlock::Into into{room};
  UniqueAhead& u = train_unique[i];
  u = {true, ldm->read_committed_now(lqh, c, nullptr, &train_keys[i], &into), {}, 0, hidden};
  if (u.error != ErrorCode::kNone) return;
  std::size_t at = 0;
  u.hidden_row = room.subspan(kKeyDataRecordHeaderBytes, into.written - kKeyDataRecordHeaderBytes);
  if (base_key_of_unique(*base, *hidden, u.hidden_row, section_a, at) != ErrorCode::kNone) return;
  uint32_t partition = 0;
  if (!encode_route(*base, std::span(section_a).first(at),
                    std::span(train_key_bytes).subspan(i * kMaxKeyBytes, kMaxKeyBytes), train_keys[i], partition))
    return;  // the base read finds the fault again
  const auto hash = static_cast<uint32_t>(train_keys[i].hash);
  train_tables[i] = base->def.table_id;
  u.base_note = route_note(*base, 0, partition, hash);
  if (const LdmBlock* base_ldm = direct_ldm[ldm_of(partition)])
    train_buckets[i] = base_ldm->prefetch_bucket(base->def.table_id, partition, hash);
}

// Stage 4: the rows of the base key's bucket that stage 3 loaded.
void TcBlock::Impl::train_base_rows(uint32_t i) {
  const void* bucket = train_buckets[i];
  const uint64_t note = train_unique[i].base_note;
  if (!train_unique[i].done || note == 0 || bucket == nullptr) return;
  train_buckets[i] = nullptr;
  const uint32_t partition = partition_of_note(note);
  EncodedKey& k = train_keys[i];
  k.candidate_count = direct_ldm[ldm_of(partition)]->prefetch_rows(
      train_tables[i], partition, static_cast<uint32_t>(note), bucket, train_rows[i].data(), 2);
  k.candidates = train_rows[i].data();
}

// A train that is a whole transaction of read-committed reads by primary
// key (its first record starts it, its last executes and commits), each
// routed by stage 0 to one LDM of this thread, of one table and column
// list (a batched pk read), needs no transaction record, as one_shot_read's
// single read does not: the reads run by one read plan into the reply,
// which then ends the batch. Returns the record the train goes on with: 0
// when this does not apply (nothing done; a transaction id in use, a sender
// that is not the id's node, an overloaded link are key_req's to refuse);
// n when the train is answered; after a read that failed, the record after
// it, with the transaction made as key_req's path has it at that point and
// aborting with the read's error (the reads before it stay in the reply, and
// the records after it are dropped by key_req as that path drops them).
uint32_t TcBlock::Impl::one_shot_train(NodeId sender, uint32_t n, BlockContext& c) {
  constexpr uint32_t kEndsAndCommits = kFlagExecute | kFlagCommit;
  if (n < 2) return 0;
  const TcKeyReq& first = train_reqs[0];
  const TcKeyReq& last = train_reqs[n - 1];
  if ((first.flags & kFlagStartTx) == 0 || (last.flags & kEndsAndCommits) != kEndsAndCommits || last.batch_ops != n ||
      first.tx.api_node() != sender || train_notes[0] == 0 || train_found[0] == nullptr || reply.count != 0)
    return 0;
  uint32_t in_use = kNoRecord;
  if (tx_by_id.find(first.tx.value, in_use) || c.pressure_to(sender) == transport::SendPressure::kOverload) return 0;
  const uint16_t l = ldm_of(partition_of_note(train_notes[0]));
  LdmBlock& ldm = *direct_ldm[l];
  TrainPlan& p = train_plans[l];
  if (!p.fits(train_serial, first))
    p = {train_serial, first.table_id, first.table_version,
         ldm.plan_reads(first.table_id, first.table_version, first.columns)};
  if (!p.plan.valid()) return 0;
  for (uint32_t i = 1; i < n; ++i)
    if (train_notes[i] == 0 || train_found[i] == nullptr || ldm_of(partition_of_note(train_notes[i])) != l ||
        !p.fits(train_serial, train_reqs[i]))
      return 0;
  if (n * (kKeyDataRecordHeaderBytes + table(first.table_id)->max_read_bytes) > reply_bytes.size()) return 0;
  for (uint32_t k = 0; k < n; ++k) {
    if (train_buckets[k] != nullptr) train_overflow(k);  // stage 2, for all of them at once as stages 0 and 1
    train_run[k] = {train_found[k], train_reqs[k].op_index, &train_keys[k]};
  }
  LdmBlock::Into into{std::span(reply_bytes)};
  ErrorCode error = ErrorCode::kNone;
  const uint32_t done = ldm.read_planned(p.plan, std::span(train_run).first(n), into, error);
  if (error == ErrorCode::kNone) {
    bump(counters.operations, n);
    bump(counters.transactions_committed);
    reply.used = into.written;
    reply.count = n;
    reply.ends_batch = true;
    reply.batch_ops = reply.data_messages = n;
    return n;
  }
  const uint32_t tx_ref = txs.allocate();
  if (tx_ref == kNoRecord) return 0;  // key_req refuses the train's first record for that; the reads are forgotten
  // Record `done` failed: the transaction as key_req, read_into_train and
  // run_planned leave it then.
  bump(counters.operations, done + 1);
  reply.used = into.written;
  reply.count = done;
  Tx& tx = txs[tx_ref];
  tx.id = first.tx;
  tx.api_node = sender;
  tx.api_conn = first.api_conn;
  tx_by_id.insert(first.tx.value, tx_ref);
  tx.last_activity_ns = c.now_ns();
  tx.batch_ops = done + 1;
  tx.data_messages = done;
  if (done + 1 == n) {
    tx.execute_pending = true;
    tx.commit_requested = true;
  }
  start_abort(tx_ref, error, train_reqs[done].op_index, c);
  return done + 1;
}

// The records from i on that can run by one read plan of an LDM of this
// thread (run_planned): read-committed reads by primary key that stage 0
// routed (their table found, its version current, their key encoded) to
// that LDM, of one table and column list, neither starting nor ending the
// batch, while the transaction is active and waits for no execute, each
// with the partition stage 0 found. Returns the record after the last of
// them: i when record i cannot (its LDM is on another thread, it starts or
// ends the batch, or the LDM could not make the plan, whose error key_req's
// path then names).
uint32_t TcBlock::Impl::planned_run_end(uint32_t tx_ref, uint32_t i, uint32_t n) {
  constexpr uint32_t kEndsOrStarts = kFlagStartTx | kFlagExecute;
  const TcKeyReq& r = train_reqs[i];
  if ((r.flags & kEndsOrStarts) != 0 || !txs.valid(tx_ref)) return i;
  const Tx& tx = txs[tx_ref];
  if (tx.id != r.tx || tx.state != TxState::kActive || tx.execute_pending) return i;
  // Stage 0 found its partition only in an LDM of this thread (else an
  // LqhKeyReq) that has it.
  if (train_found[i] == nullptr) return i;
  const uint16_t l = ldm_of(partition_of_note(train_notes[i]));
  const LdmBlock* ldm = direct_ldm[l];
  // The LDM's checks of the table and column list, made once for the
  // train's reads of the same ones.
  TrainPlan& p = train_plans[l];
  if (!p.fits(train_serial, r))
    p = {train_serial, r.table_id, r.table_version, ldm->plan_reads(r.table_id, r.table_version, r.columns)};
  if (!p.plan.valid()) return i;
  uint32_t end = i + 1;
  while (end < n && train_notes[end] != 0 && train_found[end] != nullptr &&
         (train_reqs[end].flags & kEndsOrStarts) == 0 && ldm_of(partition_of_note(train_notes[end])) == l &&
         p.fits(train_serial, train_reqs[end]))
    ++end;
  return end;
}

// What key_req, issue_user_op, read_now and op_done do for records i to
// end - 1 (planned_run_end), in order: each counted in the batch, run in
// the LDM by the plan into the reply train; the first that fails aborts
// the transaction. Returns the record to go on with: end, or the one after
// the read that failed.
uint32_t TcBlock::Impl::run_planned(uint32_t tx_ref, uint32_t i, uint32_t end, BlockContext& c) {
  FJORD_ASSERT(i < end);
  Tx& tx = txs[tx_ref];
  FJORD_ASSERT(tx.state == TxState::kActive);
  const uint16_t l = ldm_of(partition_of_note(train_notes[i]));
  LdmBlock& ldm = *direct_ldm[l];
  const LdmBlock::ReadPlan& plan = train_plans[l].plan;
  const std::size_t record_room = kKeyDataRecordHeaderBytes + table(train_reqs[i].table_id)->max_read_bytes;
  tx.last_activity_ns = c.now_ns();
  while (i < end) {
    if (reply_bytes.size() - reply.used < record_room) flush_reply(c);
    const auto count =
        static_cast<uint32_t>(std::min<std::size_t>(end - i, (reply_bytes.size() - reply.used) / record_room));
    FJORD_ASSERT(count > 0);  // an empty reply holds a record of any table (kMaxRecordBytes)
    for (uint32_t k = 0; k < count; ++k)
      train_run[k] = {train_found[i + k], train_reqs[i + k].op_index, &train_keys[i + k]};
    LdmBlock::Into into{std::span(reply_bytes).subspan(reply.used)};
    ErrorCode error = ErrorCode::kNone;
    const uint32_t done = ldm.read_planned(plan, std::span(train_run).first(count), into, error);
    tx.batch_ops += done;
    bump(counters.operations, done);
    tx.data_messages += done;
    reply.used += into.written;
    reply.count += done;
    i += done;
    if (error != ErrorCode::kNone) {
      ++tx.batch_ops;  // the read that failed is the batch's as well
      bump(counters.operations);
      start_abort(tx_ref, error, train_reqs[i].op_index, c);
      return i + 1;
    }
  }
  return end;
}

// ---- the reply train ----------------------------------------------------------------------

// read_now for a read of the train being run (tc_key_train): its values
// join the train's KeyDataTrain, which also carries the batch's TcKeyConf
// when the read ends the batch.
void TcBlock::Impl::read_into_train(uint32_t tx_ref, uint32_t op_index, LqhKeyReq& lqh, LdmBlock& ldm, BlockContext& c,
                                    const EncodedKey* key) {
  Tx& tx = txs[tx_ref];
  lqh.tx = tx.id;
  bump(counters.operations);
  FJORD_ASSERT(lqh.api_node == reply.api_node);
  FJORD_ASSERT(lqh.api_conn == reply.api_conn);
  FJORD_ASSERT(lqh.tx == reply.tx);
  const bool ends_batch = read_ends_batch(tx, lqh);
  const ErrorCode error = read_into_reply(lqh, ldm, key, c);
  if (error != ErrorCode::kNone) return start_abort(tx_ref, error, op_index, c);
  ++tx.data_messages;
  if (ends_batch) {
    reply.ends_batch = true;
    reply.batch_ops = tx.batch_ops;
    reply.data_messages = tx.data_messages;
    return finish_tx(tx_ref, c, /*answered=*/true);
  }
  ++tx.outstanding;  // op_done() counts it answered
  op_done(tx_ref, c);
}

// Where a direct read of table `table_id` writes its record in the reply
// train (the train sent first if the table's longest read might not fit).
[[gnu::always_inline]] inline LdmBlock::Into TcBlock::Impl::reply_room(uint32_t table_id, BlockContext& c) {
  if (reply_bytes.size() - reply.used < kKeyDataRecordHeaderBytes + table(table_id)->max_read_bytes) flush_reply(c);
  return {std::span(reply_bytes).subspan(reply.used)};
}

// Runs a direct read whose values go into the reply train: kNone with its
// record added, or the read's error.
[[gnu::always_inline]] inline ErrorCode TcBlock::Impl::read_into_reply(const LqhKeyReq& lqh, LdmBlock& ldm,
                                                                       const EncodedKey* key, BlockContext& c) {
  LdmBlock::Into into = reply_room(lqh.table_id, c);
  const ErrorCode error = ldm.read_committed_now(lqh, c, nullptr, key, &into);
  if (error == ErrorCode::kNone) add_to_reply(into);
  return error;
}

void TcBlock::Impl::flush_reply(BlockContext& c) {
  if (reply.count == 0) return;
  const SignalOut out = encode(KeyDataTrain{reply.api_conn, reply.tx, reply.count, reply.ends_batch, reply.batch_ops,
                                            reply.data_messages, std::span(reply_bytes).first(reply.used)});
  c.send(api_address(reply.api_node), out.number, out.data(), out.section_list());
  reply.count = 0;
  reply.used = 0;
  reply.ends_batch = false;
}

}  // namespace fjord::engine
