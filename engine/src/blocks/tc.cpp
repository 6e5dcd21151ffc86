// TC: key operations, unique indexes, commit and abort, timeouts.
#include <array>
#include <bit>
#include <cstring>

#include "fjord/base/log.h"
#include "tc_impl.h"

namespace fjord::engine {

using namespace protocol;

namespace {
constexpr uint16_t kTcTimer = runtime_signals::kFirstUser;  // TC's own periodic check

bool holds_something(OpType type, LockMode lock) { return type != OpType::kRead || lock != LockMode::kCommitted; }

template <typename M>
void send_out(BlockContext& c, Address to, const M& message) {
  const SignalOut out = encode(message);
  c.send(to, out.number, out.data(), out.section_list());
}

Address api_address(NodeId node) { return {node, {block_numbers::kApi, 0}}; }

// TC's Signal::prefetch_note on a TcKeyReq: where its key routes (the
// partition and the low 32 bits of the key's hash), so that neither the
// prefetch's second stage nor the request itself encodes and hashes the key
// again, and the PreparedKey slot that holds the encoded key. It carries the
// table version's low 15 bits: a table replaced in between invalidates it
// (and the LDM checks hash and partition anyway).
// Bits: 63 set | 48-62 version | 45-47 slot | 32-41 partition | 0-31 hash.
static_assert(kMaxPartitions <= (1u << 10) && Block::kPrefetchWindow <= 8);
uint64_t route_note(const TcTable& t, uint32_t slot, uint32_t partition, uint32_t key_hash) {
  return uint64_t{1} << 63 | uint64_t{t.def.version & 0x7FFF} << 48 | uint64_t{slot} << 45 | uint64_t{partition} << 32 |
         key_hash;
}
uint32_t partition_of_note(uint64_t note) { return static_cast<uint32_t>(note >> 32) & 0x3FF; }
bool read_route_note(uint64_t note, const TcTable& t, uint32_t& partition, uint32_t& key_hash) {
  if ((note >> 63) == 0 || (note >> 48 & 0x7FFF) != (t.def.version & 0x7FFF)) return false;
  partition = partition_of_note(note);
  key_hash = static_cast<uint32_t>(note);
  return partition < t.def.partitions;
}
uint32_t slot_of_note(uint64_t note) { return static_cast<uint32_t>(note >> 45) & 7; }
// The LqhKeyReq for a request on its own table, as far as the request says
// (routing and the transaction's id are the caller's).
LqhKeyReq user_lqh(const TcKeyReq& req, NodeId api_node) {
  LqhKeyReq lqh;
  lqh.op = req.op;
  lqh.lock = req.lock;
  lqh.api_node = api_node;
  lqh.api_conn = req.api_conn;
  lqh.op_index = req.op_index;
  lqh.table_id = req.table_id;
  lqh.table_version = req.table_version;
  lqh.key = req.key;
  lqh.values = req.values;
  lqh.columns = req.columns;
  return lqh;
}
// The lookup of a read by unique key's hidden row: `key` is its key section
// on the hidden table, and every column comes back to TC.
LqhKeyReq hidden_lqh(const TcKeyReq& req, NodeId api_node, const TcTable& hidden, std::span<const std::byte> key) {
  LqhKeyReq lqh;
  lqh.op = OpType::kRead;
  lqh.lock = req.lock;
  lqh.api_node = api_node;
  lqh.api_conn = req.api_conn;
  lqh.op_index = req.op_index;
  lqh.table_id = hidden.def.table_id;
  lqh.table_version = hidden.def.version;
  lqh.result_to = ResultTo::kTc;
  lqh.key = key;
  return lqh;
}
Address ldm_address(BlockContext& c, uint16_t ldm) { return {c.self_node(), {block_numbers::kLdm, ldm}}; }
// A key section encoded as t's primary key into `out`, and hashed (`key`),
// and the partition it routes to: what TC does for every key it routes,
// wherever the encoded bytes are kept. False (nothing set) when the section
// does not encode.
[[gnu::always_inline]] inline bool encode_route(const TcTable& t, std::span<const std::byte> section,
                                                std::span<std::byte> out, EncodedKey& key, uint32_t& partition) {
  uint32_t length = 0;
  if (!encode_key_section(t.pk, section, out, length)) return false;
  key = {out.first(length), hash_key(out.data(), length)};
  partition = partition_of(key.hash, t.def.partitions);
  return true;
}
}  // namespace

TcBlock::Impl::Impl(const TcOptions& options, TcCounters& c)
    : o(options),
      counters(c),
      txs(options.max_transactions),
      tx_by_id(options.max_transactions),
      ops(options.max_operations),
      lookup_columns(options.max_operations),
      scans(options.max_scans),
      key_buffer(kMaxKeyBytes),
      prepared_bytes(std::size_t{Block::kPrefetchWindow} * kMaxKeyBytes),
      section_a(frame::kMaxFrameBytes),
      section_b(frame::kMaxFrameBytes),
      train_key_bytes(std::size_t{kMaxTrainOps} * kMaxKeyBytes),
      train_hidden_rows(std::size_t{kMaxTrainOps} * kHiddenRowBytes),
      train_hidden_keys(std::size_t{kMaxTrainOps} * kHiddenRowBytes),
      reply_bytes(kMaxTrainBytes) {
  FJORD_ASSERT(options.ldm_instances >= 1 && options.ldm_instances <= 64);
}

TcBlock::TcBlock(const TcOptions& options)
    : Block(block_numbers::kTc, options.instance, "TC(" + std::to_string(options.instance) + ")"),
      impl_(std::make_unique<Impl>(options, counters_)) {}

TcBlock::~TcBlock() = default;

TcStats TcBlock::stats() const {
  const auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  TcStats out;
  out.transactions_committed = get(counters_.transactions_committed);
  out.transactions_aborted = get(counters_.transactions_aborted);
  out.operations = get(counters_.operations);
  out.deadlock_aborts = get(counters_.deadlock_aborts);
  out.inactive_aborts = get(counters_.inactive_aborts);
  out.drop_aborts = get(counters_.drop_aborts);
  out.scans = get(counters_.scans);
  out.refused_requests = get(counters_.refused_requests);
  return out;
}

void TcBlock::on_start(BlockContext& c) {
  set_prefetches(impl_->find_direct_ldms(c));
  c.send_delayed(impl_->o.timer_period_ms, ref(), kTcTimer, {});
}

void TcBlock::prefetch(const Signal& s, int stage) const { impl_->prefetch(s, stage); }

void TcBlock::execute(const Signal& s, BlockContext& c) {
  Impl& m = *impl_;
  switch (s.number()) {
    case gsn::kTcKeyReq: return m.tc_key_req(s, c);
    case gsn::kTcKeyTrain: return m.tc_key_train(s, c);
    case gsn::kLqhKeyConf: return m.lqh_key_conf(s, c);
    case gsn::kLqhKeyRef: return m.lqh_key_ref(s, c);
    case gsn::kLqhCommitConf:
    case gsn::kLqhAbortConf: return m.tx_conf(s, c);
    case gsn::kTcCommitReq:
    case gsn::kTcRollbackReq: return m.rollback_req(s, c);
    case gsn::kScanReq: return m.scan_req(s, c);
    case gsn::kScanNextReq:
    case gsn::kScanCloseReq: return m.scan_next(s, c);
    case gsn::kScanFragConf: return m.scan_frag_conf(s, c);
    case gsn::kScanFragRef: return m.scan_frag_ref(s, c);
    case gsn::kSchemaInstall: return m.schema_install(s, c);
    case runtime_signals::kNodeDisconnected: return m.node_disconnected(static_cast<NodeId>(s.word(0)), c);
    case runtime_signals::kNodeConnected: return;
    case kTcTimer:
      m.timer(c);
      c.send_delayed(m.o.timer_period_ms, ref(), kTcTimer, {});
      return;
    default: FJORD_LOG_WARN("%s: ignored signal %u from node %u", name().c_str(), s.number(), s.sender_node);
  }
}

// ---- LDM instances on this thread -------------------------------------------------------

// NDB's EXECUTE_DIRECT: an LDM instance on TC's own thread (single-threaded
// nodes, or a layout that puts them together) can run a read-committed read
// at once, with no LqhKeyReq/LqhKeyConf round. Returns whether there is one.
bool TcBlock::Impl::find_direct_ldms(BlockContext& c) {
  direct_ldm.assign(o.ldm_instances, nullptr);
  train_plans.assign(o.ldm_instances, {});
  bool any = false;
  for (uint16_t i = 0; i < o.ldm_instances; ++i) {
    direct_ldm[i] = dynamic_cast<LdmBlock*>(c.block_on_this_thread({block_numbers::kLdm, i}));
    any = any || direct_ldm[i] != nullptr;
  }
  any_direct_ldm = any;
  return any;
}

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

// ---- schema ---------------------------------------------------------------------------

void TcBlock::Impl::schema_install(const Signal& s, BlockContext& c) {
  auto m = decode_schema_install(s);
  FJORD_ASSERT_MSG(m.is_ok(), "DICT sent a malformed schema install");
  if (m->table_id >= tables.size()) tables.resize(m->table_id + 1);
  if (m->drop) {
    abort_writers_of(m->table_id, c);
    tables[m->table_id].reset();
  } else {
    auto def = decode_table(m->table);
    FJORD_ASSERT_MSG(def.is_ok(), "DICT sent an invalid table");
    auto t = std::make_unique<TcTable>(std::move(def).value());
    for (const IndexDef& index : t->def.indexes)
      if (index.kind == IndexKind::kUnique) t->uniques.push_back({index.index_id, index.columns});
    tables[m->table_id] = std::move(t);
  }
  send_out(c, s.sender_address(), SchemaInstallConf{m->install_id});
}

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

// ---- operations -------------------------------------------------------------------------

void TcBlock::Impl::refuse(NodeId sender, const TcKeyReq& req, ErrorCode error, BlockContext& c) {
  bump(counters.refused_requests);
  send_api(c, sender, TcKeyRef{req.api_conn, req.tx, req.op_index, error});
}

// A TcKeyReq or TcKeyTrain that does not decode: refused (kBadRequest) to
// the handle and transaction its first words name, if it has them.
void TcBlock::Impl::refuse_malformed(const Signal& s, const Status& why, BlockContext& c) {
  FJORD_LOG_WARN("TC: refused a request from node %u: %s", s.sender_node, why.message().c_str());
  TcKeyReq blank;
  if (s.word_count() >= 3) blank = TcKeyReq{s.word(0), TxId::from(s.word(1), s.word(2))};
  refuse(s.sender_node, blank, ErrorCode::kBadRequest, c);
}

// Everything TC sends an API goes after the reads a train answered so far.
template <typename M>
void TcBlock::Impl::send_api(BlockContext& c, NodeId node, const M& message) {
  if (reply.count != 0) flush_reply(c);
  send_out(c, api_address(node), message);
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

uint32_t TcBlock::Impl::new_op(uint32_t tx_ref, OpKind kind) {
  const uint32_t ref = ops.allocate();
  if (ref == kNoRecord) return kNoRecord;
  Op& op = ops[ref];
  Tx& tx = txs[tx_ref];
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

namespace {
// Whether a direct read of `tx` ends its batch: the batch is committed,
// complete, and has nothing else outstanding or held (see read_now).
bool read_ends_batch(const Tx& tx, const LqhKeyReq& lqh) {
  return tx.state == TxState::kActive && tx.execute_pending && tx.commit_requested && tx.outstanding == 0 &&
         tx.ldm_held == 0 && lqh.api_conn == tx.api_conn;
}
}  // namespace

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

// read_now for a read of the train being run (tc_key_train): its values
// join the train's KeyDataTrain, which also carries the batch's TcKeyConf
// when the read ends the batch.
void TcBlock::Impl::read_into_train(uint32_t tx_ref, uint32_t op_index, LqhKeyReq& lqh, LdmBlock& ldm, BlockContext& c,
                                    const EncodedKey* key) {
  Tx& tx = txs[tx_ref];
  lqh.tx = tx.id;
  bump(counters.operations);
  FJORD_ASSERT(lqh.api_node == reply.api_node && lqh.api_conn == reply.api_conn && lqh.tx == reply.tx);
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

void TcBlock::Impl::send_lqh(uint32_t op_ref, const LqhKeyReq& req, BlockContext& c) {
  Op& op = ops[op_ref];
  Tx& tx = txs[op.tx];
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

// Inline in both callers: the single request's path is the serial read's.
[[gnu::always_inline]] inline void TcBlock::Impl::key_req(NodeId sender, const TcKeyReq& req, uint64_t note,
                                                          const EncodedKey* known, BlockContext& c,
                                                          const UniqueAhead* ahead) {
  if (req.tx.api_node() != sender) return refuse(sender, req, ErrorCode::kBadRequest, c);
  uint32_t tx_ref = kNoRecord;
  if (req.flags & kFlagStartTx) {
    if (tx_by_id.find(req.tx.value, tx_ref)) return refuse(sender, req, ErrorCode::kBadRequest, c);
    if (c.pressure_to(sender) == transport::SendPressure::kOverload)
      return refuse(sender, req, ErrorCode::kOverload, c);
    tx_ref = txs.allocate();
    if (tx_ref == kNoRecord) return refuse(sender, req, ErrorCode::kTooManyTransactions, c);
    Tx& fresh = txs[tx_ref];
    fresh.id = req.tx;
    fresh.api_node = sender;
    fresh.api_conn = req.api_conn;
    tx_by_id.insert(req.tx.value, tx_ref);
  } else if (!tx_by_id.find(req.tx.value, tx_ref)) {
    return refuse(sender, req, ErrorCode::kUnknownTransaction, c);
  }
  Tx& tx = txs[tx_ref];
  tx.last_activity_ns = c.now_ns();
  ++tx.batch_ops;
  if (req.flags & kFlagExecute) {
    tx.execute_pending = true;
    tx.commit_requested = (req.flags & kFlagCommit) != 0;
  }
  if (tx.state == TxState::kAborting) {
    // The batch already failed; its remaining operations are dropped and the
    // abort answers when the batch's last operation has arrived.
    if (tx.execute_pending && tx.confs_awaited == 0) abort_ready(tx_ref, c);
    return;
  }
  if (tx.state != TxState::kActive) return;  // operations after commit: the API broke protocol
  if ((req.flags & kFlagExecute) && req.batch_ops != tx.batch_ops)
    return start_abort(tx_ref, ErrorCode::kBadRequest, req.op_index, c);
  const TcTable* t = table(req.table_id);
  if (!t) return start_abort(tx_ref, ErrorCode::kNoSuchTable, req.op_index, c);
  if (t->def.version != req.table_version) return start_abort(tx_ref, ErrorCode::kSchemaVersion, req.op_index, c);
  // A hidden table written other than by TC's own upkeep would disagree
  // with its base table (its row gone, or naming a row that is not there).
  // The API never names one, so only a hand-built request gets here.
  if (t->hidden && req.op != OpType::kRead) [[unlikely]]
    return start_abort(tx_ref, ErrorCode::kBadRequest, req.op_index, c);

  ErrorCode error = ErrorCode::kNone;
  if ((req.flags & kFlagViaUnique) == 0) {
    LqhKeyReq lqh = user_lqh(req, sender);
    // The key encoded and hashed once, here or by prefetch(), for TC's routing and a direct read.
    EncodedKey encoded;
    const EncodedKey* key = &encoded;
    if (read_route_note(note, *t, lqh.partition, lqh.key_hash)) {
      key = known;
    } else if (!route_key(*t, req.key, lqh, error, &encoded)) {
      return start_abort(tx_ref, error, req.op_index, c);
    }
    return issue_user_op(tx_ref, req.op_index, lqh, c, key);
  }
  // Read by unique key: first the hidden table (unique key -> primary key).
  if (ahead != nullptr && ahead->done) {  // a train's stages 0 and 3 found the hidden table and ran the lookup
    bump(counters.operations);
    if (ahead->error != ErrorCode::kNone) return start_abort(tx_ref, ahead->error, req.op_index, c);
    return read_base_of_unique(tx_ref, req.op_index, req.table_id, req.lock, req.columns, *ahead->hidden,
                               ahead->hidden_row, c, known, ahead->base_note);
  }
  const TcTable* hidden = nullptr;
  std::size_t at = 0;
  error = hidden_key(*t, req, hidden, section_a, at);
  if (error != ErrorCode::kNone) return start_abort(tx_ref, error, req.op_index, c);
  LqhKeyReq lqh = hidden_lqh(req, sender, *hidden, std::span(section_a).first(at));
  // `known`, from a train's look-ahead, is then the hidden key's.
  if (known == nullptr || !read_route_note(note, *hidden, lqh.partition, lqh.key_hash)) {
    known = nullptr;
    if (!route_key(*hidden, lqh.key, lqh, error)) return start_abort(tx_ref, error, req.op_index, c);
  }
  // A read-committed lookup in an LDM of this thread runs now, as a direct
  // pk read does (read_now: it holds nothing, and sees what it would see
  // queued), and the base read follows at once: in a train, into its reply.
  if (lqh.lock == LockMode::kCommitted && any_direct_ldm)
    if (LdmBlock* ldm = direct_ldm[ldm_of(lqh.partition)]) {
      lqh.tx = tx.id;
      bump(counters.operations);
      LdmBlock::Into into{section_b};
      const ErrorCode looked_up = ldm->read_committed_now(lqh, c, nullptr, known, &into);
      if (looked_up != ErrorCode::kNone) return start_abort(tx_ref, looked_up, req.op_index, c);
      const std::span<const std::byte> hidden_row =
          std::span(section_b).subspan(kKeyDataRecordHeaderBytes, into.written - kKeyDataRecordHeaderBytes);
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
  // Stages 0 and 1 for the whole train before its first read: loading all
  // its buckets, then all their rows, beat spreading those stages a few
  // records ahead of the reads as stages 2-4 are (node_bench trains at 1 M
  // rows: 235-260 ns per read against 248-288 at distances 7/5 to 40/8).
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
  Tx& tx = txs[tx_ref];
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

void TcBlock::Impl::unique_lookup_done(uint32_t op_ref, const LqhKeyConf& conf, BlockContext& c) {
  const Op& op = ops[op_ref];
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

// A write on a table with unique indexes: delete the old hidden rows and
// insert the new ones (LDM sent the unique and primary key columns before
// and after the change).
void TcBlock::Impl::maintain_unique(uint32_t tx_ref, const Op& op, const LqhKeyConf& conf, BlockContext& c) {
  const TcTable* t = table(op.table);
  if (!t) return;
  for (const TcTable::Unique& u : t->uniques) {
    const TcTable* hidden = table(u.index_id);
    if (!hidden) continue;
    // Build (unique key section, primary key section) for before and after.
    auto collect = [&](std::span<const std::byte> values, std::vector<std::byte>& key_out, std::size_t& key_len,
                       std::size_t& pk_len, bool& complete) {
      key_len = pk_len = 0;
      complete = !values.empty();
      const std::size_t key_columns = u.columns.size();
      for (std::size_t i = 0; i < key_columns && complete; ++i) {
        ValueCursor cur(values);
        ValueEntry e;
        bool found = false;
        while (cur.next(e))
          if (e.column == u.columns[i]) {
            found = !e.is_null;
            key_len += put_value(std::span(key_out).subspan(key_len), static_cast<uint16_t>(i), false, e.bytes);
          }
        complete = found;
      }
      for (std::size_t k = 0; k < t->def.primary_key.size() && complete; ++k) {
        ValueCursor cur(values);
        ValueEntry e;
        while (cur.next(e))
          if (e.column == t->def.primary_key[k])
            pk_len += put_value(std::span(key_out).subspan(key_len + pk_len), static_cast<uint16_t>(key_columns + k),
                                false, e.bytes);
      }
    };
    std::size_t before_key = 0, before_pk = 0, after_key = 0, after_pk = 0;
    bool had = false, has = false;
    collect(conf.unique_before, section_a, before_key, before_pk, had);
    collect(conf.unique_after, section_b, after_key, after_pk, has);
    const bool same =
        had && has && before_key == after_key && std::memcmp(section_a.data(), section_b.data(), before_key) == 0;
    if (same) continue;
    auto issue = [&](OpType type, std::span<const std::byte> key, std::span<const std::byte> values) {
      const uint32_t ref = new_op(tx_ref, OpKind::kUniqueMaintenance);
      if (ref == kNoRecord) return start_abort(tx_ref, ErrorCode::kTooManyOperations, op.op_index, c);
      ops[ref].op_index = op.op_index;
      LqhKeyReq lqh;
      lqh.table_id = hidden->def.table_id;
      lqh.table_version = hidden->def.version;
      lqh.op = type;
      lqh.lock = LockMode::kExclusive;
      lqh.result_to = ResultTo::kTc;
      lqh.key = key;
      lqh.values = values;
      ErrorCode error = ErrorCode::kNone;
      if (!route_key(*hidden, key, lqh, error)) return start_abort(tx_ref, error, op.op_index, c);
      send_lqh(ref, lqh, c);
    };
    if (had) issue(OpType::kDelete, std::span(section_a).first(before_key), {});
    // The hidden row is the unique key columns, then the primary key columns.
    if (has && txs[tx_ref].state == TxState::kActive)
      issue(OpType::kInsert, std::span(section_b).first(after_key), std::span(section_b).first(after_key + after_pk));
  }
}

void TcBlock::Impl::lqh_key_conf(const Signal& s, BlockContext& c) {
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

// ---- commit and abort --------------------------------------------------------------------

void TcBlock::Impl::start_commit(uint32_t tx_ref, BlockContext& c) {
  Tx& tx = txs[tx_ref];
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
  if (tx.state == TxState::kAborting) return;  // the first error is the one reported
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
  auto conf = decode_lqh_tx_conf(s);
  FJORD_ASSERT_MSG(conf.is_ok(), "LDM sent a malformed commit/abort confirmation");
  uint32_t tx_ref;
  if (!tx_by_id.find(conf->tx.value, tx_ref)) return;
  Tx& tx = txs[tx_ref];
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
  if (!m || m->tx.api_node() != s.sender_node) {
    FJORD_LOG_WARN("TC: refused a commit/rollback from node %u", s.sender_node);
    return;
  }
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

}  // namespace fjord::engine
