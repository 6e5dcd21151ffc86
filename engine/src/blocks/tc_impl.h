// TcBlock's records, its state (TcBlock::Impl) and the helpers its files
// share; private to TC. The block's work is split by topic:
//
//   tc.cpp         construction, start-up, execute()'s dispatch, statistics,
//                  schema installs
//   tc_key.cpp     key requests: a TcKeyReq's look-ahead (prefetch), routing
//                  to the LDM owning the key, direct reads, LDM answers, the
//                  batch's answer (key_req itself, shared with trains, is in
//                  tc_key_req.h)
//   tc_train.cpp   trains (TcKeyTrain): look-ahead stages, planned reads,
//                  the KeyDataTrain reply
//   tc_unique.cpp  unique indexes: reads by unique key through the hidden
//                  table, and keeping the hidden tables in step with writes
//   tc_commit.cpp  commit, abort, rollback, node failures and timeouts
//   tc_scan.cpp    scans
//
// Thread: TC's own. Hot path: the inline helpers at the end of this file
// run on every key request.
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "fjord/base/counter.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/protocol_faults.h"
#include "fjord/engine/blocks/tc.h"
#include "pools.h"

namespace fjord::engine {

struct TcTable {
  explicit TcTable(TableDef d)
      : def(std::move(d)),
        pk(KeyCodec::for_primary_key(def)),
        max_read_bytes(protocol::max_read_bytes(def)),
        hidden(def.name.find('$') != std::string::npos) {}
  TableDef def;
  KeyCodec pk;
  std::size_t max_read_bytes;  // room a direct read's KeyDataTrain record may need, beyond its header
  // A unique index's hidden table ("table$index"; a user table's name has
  // no '$'): TC alone writes it, in step with its base table.
  bool hidden;
  struct Unique {
    uint32_t index_id = 0;          // = the hidden table's id
    std::vector<uint16_t> columns;  // base table positions of the unique key
  };
  std::vector<Unique> uniques;
};

enum class TxState : uint8_t { kActive, kCommitting, kAborting };

struct Tx {
  protocol::TxId id;
  NodeId api_node = kNoNode;
  uint32_t api_conn = 0;
  TxState state = TxState::kActive;
  uint32_t first_op = kNoRecord;  // singly linked through Op::next
  uint32_t outstanding = 0;       // operations sent to LDM and not answered
  uint32_t batch_ops = 0;         // API operations received in this execute() batch
  uint32_t data_messages = 0;     // KeyData the API gets for this batch
  bool execute_pending = false;   // the batch's last operation has arrived
  bool commit_requested = false;
  uint64_t ldm_touched = 0;                                // LDM instances that received operations
  uint64_t ldm_held = 0;                                   // ... that hold locks or pending changes for us
  uint32_t confs_awaited = 0;                              // commit or abort confirmations
  protocol::ErrorCode error = protocol::ErrorCode::kNone;  // why it aborts
  uint32_t error_op = UINT32_MAX;
  bool reply_rollback = false;  // the API asked for the rollback (TcRollbackConf)
  bool silent = false;          // abort without telling the API (it is gone)
  uint64_t last_activity_ns = 0;
};

enum class OpKind : uint8_t { kUser, kUniqueLookup, kUniqueMaintenance };

struct Op {
  uint32_t tx = kNoRecord;
  uint32_t next = kNoRecord;
  OpKind kind = OpKind::kUser;
  protocol::OpType type = protocol::OpType::kRead;
  protocol::LockMode lock = protocol::LockMode::kCommitted;
  bool answered = false;
  uint16_t ldm = 0;
  uint32_t op_index = 0;
  uint32_t table = 0;
  uint64_t sent_ns = 0;
  // kUniqueLookup: what the base read will ask for (the column list itself is
  // in TcBlock::Impl::lookup_columns, so allocating an Op clears no 256 bytes).
  uint32_t base_table = 0;
  uint16_t column_count = 0;
};

// The column list of a unique-key lookup's base read, by the Op's record index.
using LookupColumns = std::array<uint16_t, kMaxColumns>;

struct ScanPartition {
  bool finished = false;
  bool awaiting = false;
};

struct Scan {
  NodeId api_node = kNoNode;
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  uint32_t table = 0;
  uint32_t partitions = 0;
  uint32_t awaiting = 0;  // partitions that owe a ScanFragConf this round
  uint32_t active = 0;    // partitions not finished
  uint32_t rows = 0;      // rows sent in this round
  uint32_t messages = 0;
  bool closing = false;
  // The API closed the scan while a round ran (it gave the round up): the
  // round's answers close the rest and end the scan (scan_round_done).
  bool close_requested = false;
  bool failed = false;
  protocol::ErrorCode error = protocol::ErrorCode::kNone;
  std::array<ScanPartition, kMaxPartitions> parts{};
};

struct TcBlock::Impl {
  Impl(const TcOptions& options, TcCounters& counters);

  TcOptions o;
  TcCounters& counters;
  ProtocolFaults faults;                         // signals refused as malformed or out of place
  std::vector<std::unique_ptr<TcTable>> tables;  // by table id
  RecordPool<Tx> txs;
  IdMap tx_by_id;
  RecordPool<Op> ops;
  std::vector<LookupColumns> lookup_columns;  // by record_index(op ref); valid for kUniqueLookup ops
  RecordPool<Scan> scans;
  std::vector<std::byte> key_buffer;  // kMaxKeyBytes
  // Keys prefetch() encoded and hashed for the signals of the current
  // window (one slot each, in turn; the window is never longer than the
  // slots), so that tc_key_req and the LDM need not do it again. The
  // signal's note names its slot (prepared_for).
  struct PreparedKey {
    const Signal* signal = nullptr;
    uint64_t note = 0;
    uint32_t table_id = 0;
    EncodedKey key;
  };
  mutable std::array<PreparedKey, Block::kPrefetchWindow> prepared{};
  mutable uint32_t prepared_next = 0;
  mutable std::vector<std::byte> prepared_bytes;  // kPrefetchWindow * kMaxKeyBytes
  std::vector<std::byte> section_a, section_b;    // scratch sections
  // LDM instances on TC's own thread (null for the others), found at start:
  // read-committed pk reads run there directly (read_now).
  std::vector<LdmBlock*> direct_ldm;
  bool any_direct_ldm = false;
  // A TcKeyTrain being run (tc_key_train): its requests, and the keys of
  // its direct reads encoded and hashed ahead (key i in train_key_bytes at
  // i * kMaxKeyBytes), each with its route note (0: none).
  std::array<protocol::TcKeyReq, protocol::kMaxTrainOps + 1> train_reqs{};  // + 1: see tc_key_train
  std::array<EncodedKey, protocol::kMaxTrainOps> train_keys{};
  std::array<uint64_t, protocol::kMaxTrainOps> train_notes{};
  // A read by unique key's look-ahead is its hidden row's: that key's
  // route note (0: none), train_notes[i] staying 0.
  std::array<uint64_t, protocol::kMaxTrainOps> train_unique_notes{};
  std::array<uint32_t, protocol::kMaxTrainOps> train_tables{};  // the table train_keys[i] is a key of
  // A read by unique key whose hidden lookup ran ahead (stage 3; it is a
  // read-committed read and no write runs inside the train's signal, so it
  // finds what it would at its turn): its outcome, the hidden row (the
  // values of a KeyDataTrain record in train_hidden_rows at
  // i * kHiddenRowBytes), and, when stage 3 went on to route the base read
  // (base_note not 0), train_keys[i] is the base key, whose rows stage 4
  // loads.
  struct UniqueAhead {
    bool done = false;
    protocol::ErrorCode error = protocol::ErrorCode::kNone;
    std::span<const std::byte> hidden_row;
    uint64_t base_note = 0;
    const TcTable* hidden = nullptr;  // the unique index's hidden table
  };
  static constexpr std::size_t kHiddenRowBytes = 256;  // a larger hidden row is not looked up ahead
  std::array<UniqueAhead, protocol::kMaxTrainOps> train_unique{};
  uint64_t train_note(uint32_t i) const { return train_notes[i] | train_unique_notes[i]; }
  std::array<std::array<uint32_t, 2>, protocol::kMaxTrainOps> train_rows{};  // EncodedKey::candidates
  // Stage 0's bucket (LdmBlock::prefetch_bucket); after stage 1, the
  // overflow block it started loading for a key its bucket did not list
  // (null: none), which stage 2 looks in a few records ahead of the reads.
  std::array<const void*, protocol::kMaxTrainOps> train_buckets{};
  // Stage 0's partition (LdmBlock::prefetch_bucket's `found`) of a key
  // whose LDM is here, for stage 1 and the read; null otherwise.
  std::array<const void*, protocol::kMaxTrainOps> train_found{};
  // The read plan (LdmBlock::plan_reads) planned_run_end made last in each
  // LDM of this thread, by LDM instance; good for the train whose serial it
  // has (the schema does not change inside a train's signal).
  struct TrainPlan {
    uint64_t train = 0;
    uint32_t table_id = 0;
    uint32_t table_version = 0;
    LdmBlock::ReadPlan plan;
    // The plan this train's request r would make.
    bool fits(uint64_t serial, const protocol::TcKeyReq& r) const {
      return train == serial && table_id == r.table_id && table_version == r.table_version &&
             plan.columns.size() == r.columns.size() &&
             (r.columns.empty() || std::memcmp(plan.columns.data(), r.columns.data(), r.columns.size()) == 0);
    }
  };
  std::vector<TrainPlan> train_plans;
  std::array<LdmBlock::PlannedRead, protocol::kMaxTrainOps> train_run{};  // run_planned's reads
  uint64_t train_serial = 0;
  std::vector<std::byte> train_key_bytes;    // kMaxTrainOps * kMaxKeyBytes
  std::vector<std::byte> train_hidden_rows;  // kMaxTrainOps * kHiddenRowBytes
  // A read by unique key's hidden key section, built once by stage 0 (in
  // train_hidden_keys at i * kHiddenRowBytes) for stage 3's lookup; empty
  // when longer than that, and then not looked up ahead.
  std::vector<std::byte> train_hidden_keys;
  std::array<std::span<const std::byte>, protocol::kMaxTrainOps> train_hidden_key{};
  // The KeyDataTrain its direct reads fill while it runs (active), sent
  // when it is full, when the train is done, and before anything else TC
  // sends the API (send_api), so that the API sees it in order.
  struct ReplyTrain {
    bool active = false;
    NodeId api_node = kNoNode;
    uint32_t api_conn = 0;
    protocol::TxId tx;
    uint32_t count = 0;
    std::size_t used = 0;
    bool ends_batch = false;
    uint32_t batch_ops = 0;
    uint32_t data_messages = 0;
  } reply;
  std::vector<std::byte> reply_bytes;  // kMaxTrainBytes

  const TcTable* table(uint32_t id) const { return id < tables.size() ? tables[id].get() : nullptr; }
  uint16_t ldm_of(uint32_t partition) const { return static_cast<uint16_t>(partition % o.ldm_instances); }

  // tc.cpp
  bool find_direct_ldms(BlockContext& c);
  void schema_install(const Signal& s, BlockContext& c);

  // tc_key.cpp
  void prefetch(const Signal& s, int stage) const;
  void tc_key_req(const Signal& s, BlockContext& c);
  bool one_shot_read(NodeId sender, const protocol::TcKeyReq& req, uint64_t note, const EncodedKey* known,
                     BlockContext& c);
  void lqh_key_conf(const Signal& s, BlockContext& c);
  void lqh_key_ref(const Signal& s, BlockContext& c);

  // tc_train.cpp
  void tc_key_train(const Signal& s, BlockContext& c);

  // tc_commit.cpp
  void tx_conf(const Signal& s, BlockContext& c);
  void rollback_req(const Signal& s, BlockContext& c);
  void node_disconnected(NodeId node, BlockContext& c);
  void timer(BlockContext& c);
  void abort_writers_of(uint32_t table_id, BlockContext& c);

  // tc_scan.cpp
  void scan_req(const Signal& s, BlockContext& c);
  void scan_next(const Signal& s, BlockContext& c);
  void scan_frag_conf(const Signal& s, BlockContext& c);
  void scan_frag_ref(const Signal& s, BlockContext& c);
  void scan_round_done(uint32_t ref, BlockContext& c);
  void scans_of_node_gone(NodeId node, BlockContext& c);

 private:
  // tc_key_req.h: one request, alone or from a train. `note` is its route
  // note (or 0), `known` its key encoded and hashed when the note is valid
  // (or null); for a read by unique key both are its hidden row's key's,
  // and `ahead` is what a train's stage 3 did for it (then `known` is the
  // base key).
  void key_req(NodeId sender, const protocol::TcKeyReq& req, uint64_t note, const EncodedKey* known, BlockContext& c,
               const UniqueAhead* ahead = nullptr);
  bool key_req_tx(NodeId sender, const protocol::TcKeyReq& req, BlockContext& c, uint32_t& tx_ref);
  bool start_tx(NodeId sender, const protocol::TcKeyReq& req, BlockContext& c, uint32_t& tx_ref);
  bool count_in_batch(Tx& tx, uint32_t tx_ref, const protocol::TcKeyReq& req, BlockContext& c);
  const TcTable* key_req_table(uint32_t tx_ref, const Tx& tx, const protocol::TcKeyReq& req, BlockContext& c);
  void key_req_by_pk(uint32_t tx_ref, NodeId sender, const protocol::TcKeyReq& req, const TcTable& t, uint64_t note,
                     const EncodedKey* known, BlockContext& c);
  void key_req_by_unique(const Tx& tx, uint32_t tx_ref, NodeId sender, const protocol::TcKeyReq& req, const TcTable& t,
                         uint64_t note, const EncodedKey* known, BlockContext& c, const UniqueAhead* ahead);

  // tc_key.cpp
  const PreparedKey* prepared_for(const Signal& s) const;
  void refuse(NodeId sender, const protocol::TcKeyReq& req, protocol::ErrorCode error, BlockContext& c);
  void refuse_malformed(const Signal& s, const Status& why, BlockContext& c);
  // An answer of an LDM: TC asks only this node's LDM instances, so an
  // answer from another node is refused (the rest is this node's own
  // invariant, asserted).
  bool from_own_ldm(const Signal& s, BlockContext& c) {
    if (s.sender_node == c.self_node()) [[likely]]
      return true;
    faults.refuse(s, "an LDM answer from another node; TC asks only this node's LDM instances");
    return false;
  }
  uint32_t new_op(uint32_t tx_ref, OpKind kind);
  // Sets lqh.partition and lqh.key_hash for `key` (unencoded key values);
  // `encoded`, when given, gets the encoded key (in key_buffer) and its hash.
  bool route_key(const TcTable& t, std::span<const std::byte> key, protocol::LqhKeyReq& lqh, protocol::ErrorCode& error,
                 EncodedKey* encoded = nullptr);
  // `key`: lqh's key encoded and hashed, if known (for read_now).
  void issue_user_op(uint32_t tx_ref, uint32_t op_index, protocol::LqhKeyReq& lqh, BlockContext& c,
                     const EncodedKey* key = nullptr);
  void read_now(uint32_t tx_ref, uint32_t op_index, protocol::LqhKeyReq& lqh, LdmBlock& ldm, BlockContext& c,
                const EncodedKey* key);
  void send_lqh(uint32_t op_ref, const protocol::LqhKeyReq& req, BlockContext& c);
  void op_done(uint32_t tx_ref, BlockContext& c);

  // tc_train.cpp
  void train_route(uint32_t i);
  void train_bucket_rows(uint32_t i);
  void train_overflow(uint32_t i);
  void train_hidden_lookup(uint32_t i, BlockContext& c);
  void train_base_rows(uint32_t i);
  uint32_t one_shot_train(NodeId sender, uint32_t n, BlockContext& c);
  uint32_t planned_run_end(uint32_t tx_ref, uint32_t i, uint32_t n);
  uint32_t run_planned(uint32_t tx_ref, uint32_t i, uint32_t end, BlockContext& c);
  void read_into_train(uint32_t tx_ref, uint32_t op_index, protocol::LqhKeyReq& lqh, LdmBlock& ldm, BlockContext& c,
                       const EncodedKey* key);
  LdmBlock::Into reply_room(uint32_t table_id, BlockContext& c);
  // The record a direct read wrote into reply_room's answer joins the train.
  void add_to_reply(const LdmBlock::Into& into) {
    reply.used += into.written;
    ++reply.count;
  }
  protocol::ErrorCode read_into_reply(const protocol::LqhKeyReq& lqh, LdmBlock& ldm, const EncodedKey* key,
                                      BlockContext& c);
  void flush_reply(BlockContext& c);
  // Sends `message` to API node `node`, after the reads a train answered so
  // far (the API sees them in order).
  // Not inline: its callers' hot paths return before it, and it would cost
  // them registers saved and restored.
  template <typename M>
  [[gnu::noinline]] void send_api(BlockContext& c, NodeId node, const M& message);

  // tc_unique.cpp
  protocol::ErrorCode hidden_key(const TcTable& t, const protocol::TcKeyReq& req, const TcTable*& hidden,
                                 std::span<std::byte> out, std::size_t& length) const;
  void unique_lookup_done(uint32_t op_ref, const protocol::LqhKeyConf& conf, BlockContext& c);
  // The base table's key section of a unique index's hidden row (its
  // primary key columns after the unique ones), in `out`; kNone, or why not.
  protocol::ErrorCode base_key_of_unique(const TcTable& base, const TcTable& hidden,
                                         std::span<const std::byte> hidden_row, std::span<std::byte> out,
                                         std::size_t& length) const;
  // `base_key` and `base_note`, from a train's look-ahead (stage 3), are the
  // base read's key encoded and routed, when valid.
  void read_base_of_unique(uint32_t tx_ref, uint32_t op_index, uint32_t base_table, protocol::LockMode lock,
                           std::span<const std::byte> columns, const TcTable& hidden,
                           std::span<const std::byte> hidden_row, BlockContext& c, const EncodedKey* base_key = nullptr,
                           uint64_t base_note = 0);
  void maintain_unique(uint32_t tx_ref, const Op& op, const protocol::LqhKeyConf& conf, BlockContext& c);
  void change_hidden_row(uint32_t tx_ref, const Op& op, const TcTable& hidden, protocol::OpType type,
                         std::span<const std::byte> key, std::span<const std::byte> values, BlockContext& c);

  // tc_commit.cpp
  void start_commit(uint32_t tx_ref, BlockContext& c);
  void start_abort(uint32_t tx_ref, protocol::ErrorCode error, uint32_t op_index, BlockContext& c);
  void abort_ready(uint32_t tx_ref, BlockContext& c);
  void finish_tx(uint32_t tx_ref, BlockContext& c, bool answered = false);
  void free_tx(uint32_t tx_ref);
};

// ---- helpers every TC file may use ------------------------------------------------------
// Inline: they run on every key request, and each is small.

inline Address api_address(NodeId node) { return {node, {block_numbers::kApi, 0}}; }
inline Address ldm_address(BlockContext& c, uint16_t ldm) { return {c.self_node(), {block_numbers::kLdm, ldm}}; }

template <typename M>
void send_out(BlockContext& c, Address to, const M& message) {
  const protocol::SignalOut out = protocol::encode(message);
  c.send(to, out.number, out.data(), out.section_list());
}

template <typename M>
void TcBlock::Impl::send_api(BlockContext& c, NodeId node, const M& message) {
  if (reply.count != 0) flush_reply(c);
  send_out(c, api_address(node), message);
}

// Whether an operation leaves something in its LDM to commit or abort (a
// lock, a pending change): all but read-committed reads.
inline bool holds_something(protocol::OpType type, protocol::LockMode lock) {
  return type != protocol::OpType::kRead || lock != protocol::LockMode::kCommitted;
}

// TC's Signal::prefetch_note on a TcKeyReq: where its key routes (the
// partition and the low 32 bits of the key's hash), so that neither the
// prefetch's second stage nor the request itself encodes and hashes the key
// again, and the PreparedKey slot that holds the encoded key. It carries the
// table version's low 15 bits: a table replaced in between invalidates it
// (and the LDM checks hash and partition anyway). A train's records carry
// such notes too (TcBlock::Impl::train_notes, slot 0).
// Bits: 63 set | 48-62 version | 45-47 slot | 32-41 partition | 0-31 hash.
static_assert(kMaxPartitions <= (1u << 10), "a partition takes 10 bits of a note");
static_assert(Block::kPrefetchWindow <= 8, "a window slot takes 3 bits of a note");
inline uint64_t route_note(const TcTable& t, uint32_t slot, uint32_t partition, uint32_t key_hash) {
  return uint64_t{1} << 63 | uint64_t{t.def.version & 0x7FFF} << 48 | uint64_t{slot} << 45 | uint64_t{partition} << 32 |
         key_hash;
}
inline uint32_t partition_of_note(uint64_t note) { return static_cast<uint32_t>(note >> 32) & 0x3FF; }
inline uint32_t slot_of_note(uint64_t note) { return static_cast<uint32_t>(note >> 45) & 7; }
// The partition and hash a note gives for a key of t; false (nothing to
// trust) when there is no note or it was made for another version of t.
inline bool read_route_note(uint64_t note, const TcTable& t, uint32_t& partition, uint32_t& key_hash) {
  if ((note >> 63) == 0 || (note >> 48 & 0x7FFF) != (t.def.version & 0x7FFF)) return false;
  partition = partition_of_note(note);
  key_hash = static_cast<uint32_t>(note);
  return partition < t.def.partitions;
}

// A key section encoded as t's primary key into `out`, and hashed (`key`),
// and the partition it routes to: what TC does for every key it routes,
// wherever the encoded bytes are kept. False (nothing set) when the section
// does not encode.
[[gnu::always_inline]] inline bool encode_route(const TcTable& t, std::span<const std::byte> section,
                                                std::span<std::byte> out, EncodedKey& key, uint32_t& partition) {
  uint32_t length = 0;
  if (!protocol::encode_key_section(t.pk, section, out, length)) return false;
  key = {out.first(length), hash_key(out.data(), length)};
  partition = partition_of(key.hash, t.def.partitions);
  return true;
}

// The LqhKeyReq for a request on its own table, as far as the request says
// (routing and the transaction's id are the caller's).
inline protocol::LqhKeyReq user_lqh(const protocol::TcKeyReq& req, NodeId api_node) {
  protocol::LqhKeyReq lqh;
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
inline protocol::LqhKeyReq hidden_lqh(const protocol::TcKeyReq& req, NodeId api_node, const TcTable& hidden,
                                      std::span<const std::byte> key) {
  protocol::LqhKeyReq lqh;
  lqh.op = protocol::OpType::kRead;
  lqh.lock = req.lock;
  lqh.api_node = api_node;
  lqh.api_conn = req.api_conn;
  lqh.op_index = req.op_index;
  lqh.table_id = hidden.def.table_id;
  lqh.table_version = hidden.def.version;
  lqh.result_to = protocol::ResultTo::kTc;
  lqh.key = key;
  return lqh;
}

// Whether a direct read of `tx` ends its batch: the batch is committed,
// complete, and has nothing else outstanding or held (see read_now).
inline bool read_ends_batch(const Tx& tx, const protocol::LqhKeyReq& lqh) {
  return tx.state == TxState::kActive && tx.execute_pending && tx.commit_requested && tx.outstanding == 0 &&
         tx.ldm_held == 0 && lqh.api_conn == tx.api_conn;
}

}  // namespace fjord::engine
