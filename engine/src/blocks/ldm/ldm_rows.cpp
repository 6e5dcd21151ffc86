// LDM: row versions and their index entries (see ldm_impl.h for the slot
// format and the tags).
//
// Every change that needs memory happens while an operation is prepared and
// is undone completely if memory runs out: a new anchor (row, hash entry,
// ordered entries) for an insert, a version slot and its ordered entries for
// an update. Commit and abort only copy, erase and flip tags, none of which
// can fail.
#include <cstring>

#include "ldm_impl.h"

namespace fjord::engine {

using namespace protocol;
using namespace ldm;

namespace {
void expect_ok(const Status& s, const char* what) { FJORD_ASSERT_MSG(s.is_ok(), what); }
}  // namespace

namespace ldm {

uint32_t PkKeySource::encoded_key(RowId row, std::span<std::byte> out) const {
  return partition_.table.pk.encode_record(partition_.table.layout, partition_.record(row), out);
}

bool PkKeySource::key_equals(RowId row, std::span<const std::byte> key) const {
  return partition_.table.pk.record_matches(partition_.table.layout, partition_.record(row), key);
}

uint32_t OrderedKeySource::encoded_key(RowId value, std::span<std::byte> out) const {
  const RowId anchor = untagged(value);
  const uint32_t tag = tag_of(value);
  const std::byte* slot = partition_.slot(anchor);
  const uint32_t base = slot_tag(slot, index_);
  RowId holder = anchor;
  if (tag != base) {
    const uint32_t lock_ref = slot_lock(slot);
    FJORD_ASSERT_MSG(lock_ref != kNoRecord, "a pending index entry on a row without a lock");
    const RowLock& lock = impl_.locks[lock_ref];
    if (lock.pending == Pending::kVersion && tag == pending_tag(base, lock.depth)) {
      holder = lock.version;
    } else {
      FJORD_ASSERT_MSG(lock.building != kNoRow, "an index entry whose lock builds no version");
      FJORD_ASSERT_MSG(tag == pending_tag(base, lock.depth + 1), "an index entry whose tag names no version");
      holder = lock.building;
    }
  }
  return partition_.table.ordered[index_].codec.encode_record(partition_.table.layout, partition_.record(holder), out);
}

}  // namespace ldm

uint32_t LdmBlock::Impl::index_key(const Partition& p, uint32_t index, std::span<const std::byte> record,
                                   std::span<std::byte> out) const {
  return p.table.ordered[index].codec.encode_record(p.table.layout, record, out);
}

// The length of record a's key for the index (left in key_a) if it differs
// from record b's, else 0.
uint32_t LdmBlock::Impl::changed_index_key(const Partition& p, uint32_t index, std::span<const std::byte> a,
                                           std::span<const std::byte> b) {
  const uint32_t na = index_key(p, index, a, key_a);
  const uint32_t nb = index_key(p, index, b, key_b);
  return na == nb && std::memcmp(key_a.data(), key_b.data(), na) == 0 ? 0 : na;
}

// A new row for an insert: the image in slot_buffer becomes the anchor
// (kind kPendingInsert, invisible to read-committed readers), entered into
// the hash index and, under base tag 0, into every ordered index.
ErrorCode LdmBlock::Impl::create_anchor(KeyOp& op) {
  Partition& p = *op.part;
  const LdmTable& t = *op.table;
  std::byte* slot = slot_buffer.data();
  std::memset(slot, 0, t.header_bytes);
  set_slot_lock(slot, op.lock);
  set_slot_kind(slot, RowKind::kPendingInsert);
  Result<RowId> row = p.rows.insert({slot, t.slot_bytes});
  if (!row.is_ok()) return ErrorCode::kOutOfDataMemory;
  const RowId anchor = row.value();
  if (anchor > kRowIdMask) {  // the partition is at its size limit
    p.rows.erase(anchor);
    return ErrorCode::kOutOfDataMemory;
  }
  if (!p.hash.insert(op.hash, op.key, anchor).is_ok()) {
    p.rows.erase(anchor);
    return ErrorCode::kOutOfDataMemory;
  }
  uint32_t i = 0;
  for (; i < t.ordered.size(); ++i) {
    const uint32_t n = index_key(p, i, p.record(anchor), key_a);
    if (!p.ordered[i]->insert(std::span(key_a).first(n), tagged(anchor, 0)).is_ok()) break;
  }
  if (i < t.ordered.size()) {
    while (i-- > 0) {
      const uint32_t n = index_key(p, i, p.record(anchor), key_a);
      expect_ok(p.ordered[i]->erase(std::span(key_a).first(n), tagged(anchor, 0)), "undo of an ordered insert");
    }
    expect_ok(p.hash.erase(op.hash, anchor), "undo of a hash insert");
    p.rows.erase(anchor);
    return ErrorCode::kOutOfDataMemory;
  }
  op.anchor = anchor;
  return ErrorCode::kNone;
}

// The image in slot_buffer becomes the transaction's pending version of the
// row (copy-on-write: read-committed readers keep reading the anchor). Its
// keys that differ from the anchor's are entered into the ordered indexes
// under the next version's tag before the previous version's entries go, so
// that running out of memory leaves the previous version untouched.
ErrorCode LdmBlock::Impl::install_version(KeyOp& op) {
  Partition& p = *op.part;
  const LdmTable& t = *op.table;
  RowLock& lock = locks[op.lock];
  FJORD_ASSERT(lock.anchor == op.anchor);
  FJORD_ASSERT(lock.building == kNoRow);
  std::byte* slot = slot_buffer.data();
  std::memset(slot, 0, t.header_bytes);
  set_slot_lock(slot, op.lock);
  set_slot_kind(slot, RowKind::kVersion);
  Result<RowId> row = p.rows.insert({slot, t.slot_bytes});
  if (!row.is_ok()) return ErrorCode::kOutOfDataMemory;
  const RowId version = row.value();
  const uint32_t depth = lock.depth + 1;
  lock.building = version;
  const std::byte* anchor_slot = p.slot(op.anchor);
  const auto entry_of = [&](uint32_t i) { return tagged(op.anchor, pending_tag(slot_tag(anchor_slot, i), depth)); };
  uint32_t i = 0;
  for (; i < t.ordered.size(); ++i) {
    const uint32_t n = changed_index_key(p, i, p.record(version), p.record(op.anchor));
    if (n != 0 && !p.ordered[i]->insert(std::span(key_a).first(n), entry_of(i)).is_ok()) break;
  }
  if (i < t.ordered.size()) {
    while (i-- > 0) {
      const uint32_t n = changed_index_key(p, i, p.record(version), p.record(op.anchor));
      if (n != 0) expect_ok(p.ordered[i]->erase(std::span(key_a).first(n), entry_of(i)), "undo of a pending entry");
    }
    lock.building = kNoRow;
    p.rows.erase(version);
    return ErrorCode::kOutOfDataMemory;
  }
  drop_pending(p, lock);
  lock.pending = Pending::kVersion;
  lock.version = version;
  lock.depth = depth;
  lock.building = kNoRow;
  return ErrorCode::kNone;
}

// Forgets the pending version (its entries and slot), if there is one.
void LdmBlock::Impl::drop_pending(Partition& p, RowLock& lock) {
  if (lock.pending == Pending::kVersion) {
    const std::byte* anchor_slot = p.slot(lock.anchor);
    for (uint32_t i = 0; i < p.ordered.size(); ++i) {
      const uint32_t n = changed_index_key(p, i, p.record(lock.version), p.record(lock.anchor));
      if (n == 0) continue;
      const RowId entry = tagged(lock.anchor, pending_tag(slot_tag(anchor_slot, i), lock.depth));
      expect_ok(p.ordered[i]->erase(std::span(key_a).first(n), entry), "erase of a pending entry");
    }
    p.rows.erase(lock.version);
  }
  lock.pending = Pending::kNone;
  lock.version = kNoRow;
}

// Commit: the pending version is copied into the anchor. For each ordered
// index whose key changed, the anchor's old entry goes and the pending
// entry's tag becomes the base tag; the others keep their entry.
void LdmBlock::Impl::apply_version(Partition& p, RowLock& lock) {
  const RowId anchor = lock.anchor;
  std::byte* slot = p.mutable_slot(anchor);
  for (uint32_t i = 0; i < p.ordered.size(); ++i) {
    const uint32_t n = changed_index_key(p, i, p.record(anchor), p.record(lock.version));
    changed[i] = n != 0 ? 1 : 0;
    if (n != 0)
      expect_ok(p.ordered[i]->erase(std::span(key_a).first(n), tagged(anchor, slot_tag(slot, i))),
                "erase of a committed entry");
  }
  std::memcpy(p.mutable_record(anchor).data(), p.record(lock.version).data(), p.table.layout.record_bytes());
  for (uint32_t i = 0; i < p.ordered.size(); ++i)
    if (changed[i]) set_slot_tag(slot, i, pending_tag(slot_tag(slot, i), lock.depth));
  p.rows.erase(lock.version);
  lock.pending = Pending::kNone;
  lock.version = kNoRow;
}

// Erases a row and all its entries (a committed delete, an aborted insert).
void LdmBlock::Impl::remove_row(Partition& p, RowId anchor) {
  const std::byte* slot = p.slot(anchor);
  for (uint32_t i = 0; i < p.ordered.size(); ++i) {
    const uint32_t n = index_key(p, i, p.record(anchor), key_a);
    expect_ok(p.ordered[i]->erase(std::span(key_a).first(n), tagged(anchor, slot_tag(slot, i))), "erase of a row");
  }
  const uint32_t n = p.table.pk.encode_record(p.table.layout, p.record(anchor), key_a);
  expect_ok(p.hash.erase(hash_key(key_a.data(), n), anchor), "hash erase of a row");
  p.rows.erase(anchor);
}

void LdmBlock::Impl::commit_row(RowLock& lock) {
  Partition& p = *lock.partition;
  const RowKind kind = slot_kind(p.slot(lock.anchor));
  if (lock.pending == Pending::kDeleted) {
    remove_row(p, lock.anchor);
    lock.anchor = kNoRow;
    lock.pending = Pending::kNone;
    if (kind == RowKind::kCommitted) {
      --p.committed_rows;
      bump(counters.committed_rows, -1);
    }
    return;
  }
  if (lock.pending == Pending::kVersion) apply_version(p, lock);
  if (kind == RowKind::kPendingInsert) {
    set_slot_kind(p.mutable_slot(lock.anchor), RowKind::kCommitted);
    ++p.committed_rows;
    bump(counters.committed_rows);
  }
}

void LdmBlock::Impl::abort_row(RowLock& lock) {
  Partition& p = *lock.partition;
  drop_pending(p, lock);
  if (slot_kind(p.slot(lock.anchor)) == RowKind::kPendingInsert) {
    remove_row(p, lock.anchor);
    lock.anchor = kNoRow;
  }
}

}  // namespace fjord::engine
