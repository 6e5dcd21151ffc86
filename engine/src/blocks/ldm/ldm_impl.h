// LdmBlock's state and helpers (internal header of engine/src/blocks/ldm/).
//
// Files: ldm.cpp (signals in, schema, stats), ldm_key.cpp (key operations),
// ldm_rows.cpp (row versions and index entries), ldm_locks.cpp (row locks,
// waiting requests, commit and abort), ldm_scan.cpp (scans).
//
// Rows and versions (docs/ldm.md has the whole story):
//  - Every slot of a partition's RowStore is [header][base tags][record]. A
//    row's *anchor* slot holds its committed version (kind kCommitted), or
//    the image of an insert not yet committed (kPendingInsert). The anchor's
//    RowId never changes while the row lives: the hash index, the ordered
//    indexes and full-scan cursors all rely on it. Commit copies the new
//    version into the anchor; nothing moves.
//  - The exclusive holder's uncommitted image lives in a *version* slot
//    (kind kVersion) of the same RowStore, named by the row's lock record.
//  - Ordered-index entries are (key, tagged RowId): the anchor's RowId with a
//    2-bit tag above it. The committed key of index i is entered with the
//    anchor's base tag i; a pending version whose key for index i differs is
//    entered beforehand, at prepare time, under another tag. The KeySource
//    maps a tag back to the slot holding that key, so two entries of one row
//    never confuse the tree, and commit only erases entries and flips tags:
//    it never needs memory.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "../pools.h"
#include "chunk_arena.h"
#include "fjord/base/counter.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/blocks/protocol_faults.h"
#include "fjord/engine/key_codec.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/row_layout.h"
#include "fjord/engine/storage/hash_index.h"
#include "fjord/engine/storage/ordered_index.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::ldm {

using storage::kNoRow;
using storage::RowId;

// An internal signal the LDM sends to itself: continue a scan round.
inline constexpr uint16_t kScanContinue = 390;
inline constexpr uint32_t kScanFetchRows = 64;  // RowIds taken from a scan cursor at a time

// ---- row slots ----------------------------------------------------------------

enum class RowKind : uint8_t { kCommitted = 1, kPendingInsert = 2, kVersion = 3 };

// Header: u32 lock record (kNoRecord if unlocked), u8 kind, 3 bytes zero;
// then 2 bits per ordered index (its base tag); then the record.
inline constexpr uint32_t kFixedHeaderBytes = 8;
inline uint32_t slot_lock(const std::byte* slot) {
  uint32_t v;
  std::memcpy(&v, slot, sizeof v);
  return v;
}
inline void set_slot_lock(std::byte* slot, uint32_t lock) { std::memcpy(slot, &lock, sizeof lock); }
inline RowKind slot_kind(const std::byte* slot) { return static_cast<RowKind>(slot[4]); }
inline void set_slot_kind(std::byte* slot, RowKind kind) { slot[4] = static_cast<std::byte>(kind); }
inline uint32_t slot_tag(const std::byte* slot, uint32_t index) {
  return (static_cast<uint32_t>(slot[kFixedHeaderBytes + index / 4]) >> (index % 4 * 2)) & 3;
}
inline void set_slot_tag(std::byte* slot, uint32_t index, uint32_t tag) {
  std::byte& b = slot[kFixedHeaderBytes + index / 4];
  const unsigned shift = index % 4 * 2;
  b = static_cast<std::byte>((static_cast<unsigned>(b) & ~(3u << shift)) | tag << shift);
}

// Tagged RowIds in ordered indexes. Anchors are kept below 2^30 (a partition
// of at least 8 GB of tiny rows; larger partitions report DataMemory full).
inline constexpr uint32_t kRowIdBits = 30;
inline constexpr RowId kRowIdMask = (RowId{1} << kRowIdBits) - 1;
inline RowId tagged(RowId row, uint32_t tag) { return row | tag << kRowIdBits; }
inline RowId untagged(RowId value) { return value & kRowIdMask; }
inline uint32_t tag_of(RowId value) { return value >> kRowIdBits; }
// The tag of the entries of pending version number `depth` (1, 2, ...) of a
// row whose base tag is `base`: never the base, and never that of the
// version before it, so an update can enter its keys before erasing those of
// the version it replaces.
inline uint32_t pending_tag(uint32_t base, uint32_t depth) { return (base + 1 + (depth & 1)) % 3; }

// ---- tables and partitions ------------------------------------------------------

struct Partition;
struct LdmTable;

// The hash index's view of a row: the primary key of its anchor.
class PkKeySource final : public storage::KeySource {
 public:
  explicit PkKeySource(const Partition& partition) : partition_(partition) {}
  uint32_t encoded_key(RowId row, std::span<std::byte> out) const override;
  bool key_equals(RowId row, std::span<const std::byte> key) const override;

 private:
  const Partition& partition_;
};

// An ordered index's view of a tagged RowId: the key of the slot that the
// tag names (the anchor, the pending version, or the one being built).
class OrderedKeySource final : public storage::KeySource {
 public:
  OrderedKeySource(LdmBlock::Impl& impl, const Partition& partition, uint32_t index)
      : impl_(impl), partition_(partition), index_(index) {}
  uint32_t encoded_key(RowId value, std::span<std::byte> out) const override;

 private:
  LdmBlock::Impl& impl_;  // its lock records (RecordPool has no const access)
  const Partition& partition_;
  uint32_t index_;
};

struct OrderedDef {
  uint32_t index_id = 0;
  KeyCodec codec;
};

struct LdmTable {
  LdmTable(TableDef d, RowLayout l);
  TableDef def;
  RowLayout layout;
  KeyCodec pk;
  std::vector<OrderedDef> ordered;
  // Unique-index columns and primary-key columns (for LqhKeyConf's
  // unique_before/after); empty when the table has no unique index.
  std::vector<uint16_t> unique_columns;
  std::vector<uint8_t> is_key_column;  // by column position
  uint32_t header_bytes = 0;           // slot header, base tags included
  uint32_t slot_bytes = 0;             // header + record
  uint32_t max_read_bytes = 0;         // the most a read's values take (protocol::max_read_bytes)
  // When every column is fixed-size and NOT NULL, a read of all columns is
  // the same entries for every row: each column's entry header, ready, and
  // where its bytes lie in the record (put_columns copies them). Else empty.
  struct FixedEntry {
    uint64_t header = 0;  // put_value's first 8 bytes
    uint32_t offset = 0;
    uint32_t length = 0;
  };
  std::vector<FixedEntry> fixed_entries;
  bool writable = true;                                // false: unique sections could overflow a frame
  std::vector<std::unique_ptr<Partition>> partitions;  // by p / ldm_instances
};

struct Partition {
  Partition(LdmBlock::Impl& impl, const LdmTable& table, storage::PagePool& pool, uint32_t number);
  const LdmTable& table;
  const uint32_t number;
  uint64_t committed_rows = 0;
  storage::RowStore rows;
  PkKeySource pk_keys;
  storage::HashIndex hash;
  std::vector<std::unique_ptr<OrderedKeySource>> ordered_keys;
  std::vector<std::unique_ptr<storage::OrderedIndex>> ordered;

  const std::byte* slot(RowId row) const { return rows.get(row).data(); }
  std::byte* mutable_slot(RowId row) { return rows.get_mutable(row).data(); }
  std::span<const std::byte> record(RowId row) const { return record_in(rows.get(row)); }
  // The record within a slot already looked up (rows.get).
  std::span<const std::byte> record_in(std::span<const std::byte> slot) const {
    return slot.subspan(table.header_bytes, table.layout.record_bytes());
  }
  std::span<std::byte> mutable_record(RowId row) {
    return rows.get_mutable(row).subspan(table.header_bytes, table.layout.record_bytes());
  }
};

// ---- records ------------------------------------------------------------------------

enum class LockKind : uint8_t { kShared, kExclusive };
enum class Pending : uint8_t { kNone, kVersion, kDeleted };
// Whether a lock request can be granted now; kWaitFirst: wait ahead of
// requests of transactions that hold nothing on the row (an upgrade).
enum class Grant : uint8_t { kGranted, kWait, kWaitFirst };

struct TxRecord {  // a transaction with something held or waiting here
  protocol::TxId tx;
  uint32_t first_hold = kNoRecord;    // singly linked through Hold::next_in_tx
  uint32_t first_parked = kNoRecord;  // doubly linked through Parked::{prev,next}_in_tx
  uint32_t ops = 0;                   // operations that succeeded (reported at commit/abort)
};

struct Hold {  // one transaction's lock on one row (all its operations on it)
  uint32_t tx = kNoRecord;
  uint32_t lock = kNoRecord;  // kNoRecord once its table was dropped
  uint32_t next_in_tx = kNoRecord;
  uint32_t prev_in_lock = kNoRecord;
  uint32_t next_in_lock = kNoRecord;
  LockKind mode = LockKind::kShared;
};

struct RowLock {  // a row that is locked: holders, waiters, the writer's pending version
  Partition* partition = nullptr;
  uint32_t table_id = 0;
  RowId anchor = kNoRow;  // kNoRow once the row is gone (committed delete, aborted insert)
  uint32_t first_holder = kNoRecord;
  uint32_t holders = 0;
  bool exclusive = false;
  uint32_t queue_head = kNoRecord;  // parked requests, FIFO (holders' upgrades first)
  uint32_t queue_tail = kNoRecord;
  // The exclusive holder's view of the row.
  Pending pending = Pending::kNone;
  RowId version = kNoRow;   // with kVersion: the slot of the pending image
  uint32_t depth = 0;       // pending versions made so far (selects their tag)
  RowId building = kNoRow;  // a version being entered into the indexes (depth + 1)
  bool wake_listed = false;
};

struct Parked {  // a request waiting for a lock
  uint32_t tx = kNoRecord;
  uint32_t lock = kNoRecord;
  uint32_t prev = kNoRecord;  // in the lock's queue
  uint32_t next = kNoRecord;
  uint32_t prev_in_tx = kNoRecord;
  uint32_t next_in_tx = kNoRecord;
  LockKind mode = LockKind::kShared;
  Address from;
  protocol::LqhKeyReq req;  // sections empty: their bytes are in the chunk arena
  uint32_t key_bytes = 0, value_bytes = 0, column_bytes = 0;
  uint32_t chunks = kNoChunk;
};

struct ScanRecord {
  uint64_t key = 0;  // in scan_by_key
  Address tc;
  uint32_t tc_scan = 0;
  uint32_t partition = 0;
  uint32_t table_id = 0;
  uint32_t table_version = 0;
  int32_t ordered = -1;  // index into LdmTable::ordered, or -1: full partition scan
  uint32_t batch_rows = 0;
  NodeId api_node = kNoNode;
  uint32_t api_conn = 0;
  uint32_t scan_id = 0;
  uint32_t definition = kNoChunk;  // filter then column list, in scan_definitions
  uint32_t filter_bytes = 0;
  uint32_t column_bytes = 0;
  bool in_round = false;
  uint32_t round_rows = 0;
  uint32_t round_messages = 0;
  storage::RowScanCursor full;
  storage::OrderedScanCursor range;
};

// ---- a key operation in progress ------------------------------------------------------

struct KeyOp {
  const protocol::LqhKeyReq* req = nullptr;
  Address from;
  LdmTable* table = nullptr;
  Partition* part = nullptr;
  std::span<const std::byte> key;  // the encoded primary key (in Impl::pk_key, or the caller's)
  uint64_t hash = 0;
  RowId anchor = kNoRow;
  std::span<const std::byte> anchor_slot;  // its slot, when resolve_key already looked it up
  LockKind mode = LockKind::kShared;
  uint32_t tx = kNoRecord;                                  // TxRecord
  uint32_t lock = kNoRecord;                                // RowLock of the anchor
  uint32_t hold = kNoRecord;                                // the transaction's Hold on it
  bool new_tx = false, new_lock = false, new_hold = false;  // reserved by this operation
  bool lock_attached = false;                               // a new lock is linked to the anchor
  bool resumed = false;                                     // it waited before (a new wait is not counted)
};

struct KeyOutcome {
  bool parked = false;
  uint32_t lock = kNoRecord;  // where it parked
};

// What a transaction sees of a row.
struct View {
  bool exists = false;
  std::span<const std::byte> record;
};

}  // namespace fjord::engine::ldm

namespace fjord::engine {

struct LdmBlock::Impl {
  Impl(storage::PagePool& pool, const LdmOptions& options, BlockRef self);

  storage::PagePool& pool;
  const LdmOptions o;
  LdmCounters counters;
  const BlockRef self;
  ProtocolFaults faults;                               // signals refused as malformed or out of place
  std::vector<std::unique_ptr<ldm::LdmTable>> tables;  // by table id

  RecordPool<ldm::TxRecord> txs;
  IdMap tx_by_id;
  RecordPool<ldm::Hold> holds;
  RecordPool<ldm::RowLock> locks;
  ldm::ChunkArena parked_bytes;
  RecordPool<ldm::Parked> parked;  // one per chunk: every parked request takes at least one
  RecordPool<ldm::ScanRecord> scans;
  IdMap scan_by_key;
  ldm::ChunkArena scan_definitions;

  // Scratch, sized at start-up.
  std::vector<std::byte> slot_buffer;                      // a slot being built (header + record)
  std::vector<std::byte> pk_key, key_a, key_b;             // encoded keys (kMaxKeyBytes)
  std::vector<std::byte> resume_buffer;                    // a parked request's sections while it runs again
  std::vector<std::byte> out_data, out_before, out_after;  // sections of replies
  std::vector<std::byte> scan_out;                         // rows of one ScanRows
  std::vector<std::byte> definition_buffer;                // a scan's filter and columns
  std::vector<storage::RowId> scan_ids;
  std::vector<uint32_t> wake_list;
  std::vector<uint8_t> changed;  // per ordered index, during commit
  bool resuming = false;

  ldm::LdmTable* table_of(uint32_t id) const { return id < tables.size() ? tables[id].get() : nullptr; }
  bool owns(uint32_t partition) const { return partition % o.ldm_instances == o.instance; }

  // ldm.cpp
  void schema_install(const Signal& s, BlockContext& c);
  void install_table(TableDef def, RowLayout layout);
  void drop_table(uint32_t id, BlockContext& c);

  // ldm_key.cpp
  void lqh_key_req(const Signal& s, BlockContext& c);
  // LdmBlock::prefetch for an LqhKeyReq: stage 0 the key's bucket, stage 1
  // the rows in it whose hash bits match.
  void prefetch_key(uint32_t table_id, uint32_t partition, uint32_t key_hash, int stage) const;
  const void* prefetch_bucket(uint32_t table_id, uint32_t partition, uint32_t key_hash,
                              const void** found = nullptr) const;
  uint32_t prefetch_rows(uint32_t table_id, uint32_t partition, uint32_t key_hash, const void* bucket,
                         storage::RowId* rows, uint32_t max, const void** more = nullptr) const;
  uint32_t prefetch_rows_in(const ldm::Partition& part, uint32_t key_hash, const void* bucket, storage::RowId* rows,
                            uint32_t max, const void** more) const;
  // The partition of this instance that `partition` of the table names, or
  // null (no such table, no such partition, another instance's).
  const ldm::Partition* partition_here(uint32_t table_id, uint32_t partition) const {
    const ldm::LdmTable* t = table_of(table_id);
    if (t == nullptr || partition >= t->def.partitions || !owns(partition)) return nullptr;
    return t->partitions[partition / o.ldm_instances].get();
  }
  ldm::KeyOutcome execute_key(const protocol::LqhKeyReq& req, Address from, bool resumed, BlockContext& c);
  LdmBlock::ReadPlan plan_reads(uint32_t table_id, uint32_t table_version, std::span<const std::byte> columns) const;
  uint32_t read_planned(const LdmBlock::ReadPlan& plan, std::span<const LdmBlock::PlannedRead> reads,
                        LdmBlock::Into& into, protocol::ErrorCode& error);
  protocol::ErrorCode read_committed_now(const protocol::LqhKeyReq& req, BlockContext& c,
                                         const protocol::TcKeyConf* batch_end, const EncodedKey* key,
                                         LdmBlock::Into* into);
  // `known`: the request's key already encoded and hashed (read_committed_now).
  protocol::ErrorCode resolve_key(ldm::KeyOp& op, const EncodedKey* known = nullptr);
  ldm::RowId find_row(const ldm::LdmTable& t, const ldm::Partition& part, std::span<const std::byte> key, uint64_t hash,
                      const ldm::RowId* candidates, uint32_t candidate_count, std::span<const std::byte>& slot);
  void put_record(const ldm::LdmTable& t, std::span<const std::byte> record, std::span<const std::byte> columns,
                  uint32_t op_index, LdmBlock::Into& into) const;
  protocol::ErrorCode check_values(const ldm::KeyOp& op) const;
  bool columns_valid(const ldm::LdmTable& t, std::span<const std::byte> columns) const;
  ldm::KeyOutcome read_committed(ldm::KeyOp& op, BlockContext& c);
  ldm::KeyOutcome perform(ldm::KeyOp& op, BlockContext& c);
  ldm::KeyOutcome perform_read(ldm::KeyOp& op, const ldm::View& before, BlockContext& c);
  ldm::KeyOutcome perform_delete(ldm::KeyOp& op, const ldm::View& before, BlockContext& c);
  ldm::KeyOutcome perform_write(ldm::KeyOp& op, protocol::OpType type, const ldm::View& before, BlockContext& c);
  ldm::View view_of(const ldm::KeyOp& op);
  bool build_image(const ldm::KeyOp& op, std::span<const std::byte> from, bool insert);
  std::size_t put_columns(const ldm::LdmTable& t, std::span<const std::byte> record, std::span<const std::byte> columns,
                          std::span<std::byte> out) const;
  std::size_t put_unique_columns(const ldm::LdmTable& t, std::span<const std::byte> record,
                                 std::span<std::byte> out) const;
  void reply_read(const ldm::KeyOp& op, std::span<const std::byte> record, BlockContext& c);
  void send_key_data(const ldm::KeyOp& op, std::span<const std::byte> record, BlockContext& c,
                     const protocol::TcKeyConf* batch_end = nullptr);
  void reply_write(const ldm::KeyOp& op, std::size_t before_bytes, std::size_t after_bytes, BlockContext& c);
  ldm::KeyOutcome refuse(ldm::KeyOp& op, protocol::ErrorCode error, BlockContext& c);

  // ldm_rows.cpp
  protocol::ErrorCode create_anchor(ldm::KeyOp& op);
  protocol::ErrorCode install_version(ldm::KeyOp& op);
  void drop_pending(ldm::Partition& p, ldm::RowLock& lock);
  void commit_row(ldm::RowLock& lock);
  void abort_row(ldm::RowLock& lock);
  void apply_version(ldm::Partition& p, ldm::RowLock& lock);
  void remove_row(ldm::Partition& p, storage::RowId anchor);
  uint32_t index_key(const ldm::Partition& p, uint32_t index, std::span<const std::byte> record,
                     std::span<std::byte> out) const;
  uint32_t changed_index_key(const ldm::Partition& p, uint32_t index, std::span<const std::byte> a,
                             std::span<const std::byte> b);

  // ldm_locks.cpp
  ldm::Grant grant(uint32_t lock, uint32_t hold, ldm::LockKind mode, bool respect_queue);
  uint32_t hold_of(uint32_t lock, uint32_t tx);
  bool reserve_records(ldm::KeyOp& op);
  void attach_lock(ldm::KeyOp& op);
  void unreserve_records(ldm::KeyOp& op);
  void link_hold(ldm::KeyOp& op);
  uint32_t new_tx_record(protocol::TxId tx);
  void release_tx_if_empty(uint32_t tx);
  ldm::KeyOutcome park(ldm::KeyOp& op, bool first, BlockContext& c);
  void enqueue(uint32_t lock, uint32_t parked_ref, bool first);
  void unpark(uint32_t parked_ref);
  void resume(uint32_t first, BlockContext& c);
  void wake(uint32_t lock, BlockContext& c);
  void release_hold(uint32_t hold);
  void free_lock(uint32_t lock);
  void drop_parked_of(uint32_t tx, BlockContext& c);
  void end_tx(const Signal& s, bool commit, BlockContext& c);

  // ldm_scan.cpp
  void scan_frag_req(const Signal& s, BlockContext& c);
  void scan_frag_next(const Signal& s, BlockContext& c);
  void scan_continue(const Signal& s, BlockContext& c);
  protocol::ErrorCode set_bounds(const ldm::OrderedDef& index, std::span<const std::byte> section,
                                 storage::OrderedScanCursor& cursor);
  bool filter_valid(const ldm::LdmTable& t, std::span<const std::byte> filter) const;
  void scan_round(uint32_t ref, BlockContext& c);
  void close_scan(uint32_t ref);
};

}  // namespace fjord::engine
