// LDM: signals in, schema installs and drops, statistics.
#include "fjord/engine/blocks/ldm.h"

#include <algorithm>

#include "fjord/base/log.h"
#include "ldm_impl.h"

namespace fjord::engine {

using namespace protocol;
using namespace ldm;

LdmBlock::Impl::Impl(storage::PagePool& data_memory, const LdmOptions& options, BlockRef self_ref)
    : pool(data_memory),
      o(options),
      self(self_ref),
      faults("LDM " + std::to_string(options.instance)),
      txs(options.max_operations),
      tx_by_id(options.max_operations),
      holds(options.max_operations),
      locks(options.max_operations),
      parked_bytes(options.parked_request_bytes),
      parked(parked_bytes.chunk_count()),
      scans(options.max_scans),
      scan_by_key(options.max_scans),
      scan_definitions(options.scan_definition_bytes),
      slot_buffer(kFixedHeaderBytes + kMaxRecordBytes),
      pk_key(kMaxKeyBytes),
      key_a(kMaxKeyBytes),
      key_b(kMaxKeyBytes),
      resume_buffer(frame::kMaxFrameBytes),
      out_data(frame::kMaxFrameBytes),
      out_before(frame::kMaxFrameBytes),
      out_after(frame::kMaxFrameBytes),
      scan_out(frame::kMaxFrameBytes),
      definition_buffer(frame::kMaxFrameBytes),
      scan_ids(kScanFetchRows) {
  FJORD_ASSERT(options.ldm_instances >= 1);
  FJORD_ASSERT(options.instance < options.ldm_instances);
  FJORD_ASSERT(options.max_operations >= 1);
  FJORD_ASSERT(options.max_operations < (1u << 24));  // a record reference's index
  FJORD_ASSERT(options.max_scans >= 1);
  FJORD_ASSERT(options.max_scans < (1u << 24));
  FJORD_ASSERT(parked_bytes.chunk_count() < (1u << 24));
  FJORD_ASSERT(options.scan_slice_rows >= 1);
  wake_list.reserve(parked_bytes.chunk_count());
}

LdmBlock::LdmBlock(storage::PagePool& data_memory, const LdmOptions& options)
    : Block(block_numbers::kLdm, options.instance, "LDM(" + std::to_string(options.instance) + ")",
            /*prefetches=*/true),
      impl_(std::make_unique<Impl>(data_memory, options, ref())) {}

LdmBlock::~LdmBlock() = default;

void LdmBlock::execute(const Signal& s, BlockContext& c) {
  Impl& m = *impl_;
  switch (s.number()) {
    case gsn::kLqhKeyReq: return m.lqh_key_req(s, c);
    case gsn::kLqhCommitReq: return m.end_tx(s, true, c);
    case gsn::kLqhAbortReq: return m.end_tx(s, false, c);
    case gsn::kScanFragReq: return m.scan_frag_req(s, c);
    case gsn::kScanFragNextReq:
    case gsn::kScanFragCloseReq: return m.scan_frag_next(s, c);
    case kScanContinue: return m.scan_continue(s, c);
    case gsn::kSchemaInstall: return m.schema_install(s, c);
    case runtime_signals::kStart:
    case runtime_signals::kNodeConnected:
    case runtime_signals::kNodeDisconnected: return;
    default: m.faults.refuse(s, "a signal LDM does not serve");
  }
}

void LdmBlock::prefetch(const Signal& s, int stage) const {
  if (protocol::LqhKeyRoute r; protocol::peek_lqh_key_route(s, r))
    impl_->prefetch_key(r.table_id, r.partition, r.key_hash, stage);
}

protocol::ErrorCode LdmBlock::read_committed_now(const protocol::LqhKeyReq& req, BlockContext& c,
                                                 const protocol::TcKeyConf* batch_end, const EncodedKey* key,
                                                 Into* into) {
  return impl_->read_committed_now(req, c, batch_end, key, into);
}

LdmBlock::ReadPlan LdmBlock::plan_reads(uint32_t table_id, uint32_t table_version,
                                        std::span<const std::byte> columns) const {
  return impl_->plan_reads(table_id, table_version, columns);
}

uint32_t LdmBlock::read_planned(const ReadPlan& plan, std::span<const PlannedRead> reads, Into& into,
                                protocol::ErrorCode& error) {
  return impl_->read_planned(plan, reads, into, error);
}

const void* LdmBlock::prefetch_bucket(uint32_t table_id, uint32_t partition, uint32_t key_hash,
                                      const void** found) const {
  return impl_->prefetch_bucket(table_id, partition, key_hash, found);
}

uint32_t LdmBlock::prefetch_rows(uint32_t table_id, uint32_t partition, uint32_t key_hash, const void* bucket,
                                 uint32_t* rows, uint32_t max, const void** more) const {
  return impl_->prefetch_rows(table_id, partition, key_hash, bucket, rows, max, more);
}

uint32_t LdmBlock::prefetch_rows_in(const void* found, uint32_t key_hash, const void* bucket, uint32_t* rows,
                                    uint32_t max, const void** more) const {
  return impl_->prefetch_rows_in(*static_cast<const ldm::Partition*>(found), key_hash, bucket, rows, max, more);
}

void LdmBlock::prefetch_key(uint32_t table_id, uint32_t partition, uint32_t key_hash, int stage) const {
  impl_->prefetch_key(table_id, partition, key_hash, stage);
}

LdmStats LdmBlock::stats() const {
  const LdmCounters& k = impl_->counters;
  const auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  LdmStats out;
  out.committed_rows = get(k.committed_rows);
  out.key_operations = get(k.key_operations);
  out.reads = get(k.reads);
  out.inserts = get(k.inserts);
  out.updates = get(k.updates);
  out.deletes = get(k.deletes);
  out.refused = get(k.refused);
  out.lock_waits = get(k.lock_waits);
  out.commits = get(k.commits);
  out.aborts = get(k.aborts);
  out.scans = get(k.scans);
  out.scan_rows = get(k.scan_rows);
  out.scan_rounds = get(k.scan_rounds);
  out.lookahead_hits = get(k.lookahead_hits);
  out.index_searches = get(k.index_searches);
  out.out_of_memory = get(k.out_of_memory);
  out.parked_now = get(k.parked_now);
  out.operation_records_in_use = get(k.operation_records_in_use);
  out.lock_records_in_use = get(k.lock_records_in_use);
  out.scans_open = get(k.scans_open);
  out.data_memory_used_bytes = uint64_t{impl_->pool.pages_in_use()} * storage::PagePool::kPageBytes;
  out.data_memory_bytes = uint64_t{impl_->pool.capacity_pages()} * storage::PagePool::kPageBytes;
  return out;
}

// ---- tables ----------------------------------------------------------------------------

namespace ldm {

LdmTable::LdmTable(TableDef d, RowLayout l)
    : def(std::move(d)), layout(std::move(l)), pk(KeyCodec::for_primary_key(def)) {
  pk.locate(layout);
  is_key_column.assign(def.columns.size(), 0);
  for (uint16_t position : def.primary_key) is_key_column[position] = 1;
  std::vector<uint8_t> in_unique(def.columns.size(), 0);
  bool has_unique = false;
  for (const IndexDef& index : def.indexes) {
    if (index.kind == IndexKind::kOrdered) {
      ordered.push_back(OrderedDef{index.index_id, KeyCodec::for_index(def, index)});
      continue;
    }
    has_unique = true;
    for (uint16_t position : index.columns) in_unique[position] = 1;
  }
  if (has_unique) {
    for (std::size_t c = 0; c < def.columns.size(); ++c)
      if (in_unique[c]) unique_columns.push_back(static_cast<uint16_t>(c));
    for (uint16_t position : def.primary_key)
      if (!in_unique[position]) unique_columns.push_back(position);
  }
  header_bytes = kFixedHeaderBytes + static_cast<uint32_t>((2 * ordered.size() + 7) / 8);
  slot_bytes = header_bytes + layout.record_bytes();
  max_read_bytes = static_cast<uint32_t>(protocol::max_read_bytes(def));
  for (uint32_t c = 0; c < layout.column_count(); ++c) {
    FixedEntry e;
    if (!layout.fixed_slot(c, e.offset, e.length)) {
      fixed_entries.clear();
      break;
    }
    e.header = uint64_t{c} | uint64_t{e.length} << 32;  // column, not NULL, length
    fixed_entries.push_back(e);
  }
  // LqhKeyConf carries the unique columns twice (before and after).
  // decode_table() refuses a table where they do not fit; kept as a guard.
  writable = protocol::unique_report_bytes(def) <= protocol::kMaxUniqueReportBytes;
}

Partition::Partition(LdmBlock::Impl& impl, const LdmTable& t, storage::PagePool& pool, uint32_t partition)
    : table(t), number(partition), rows(pool, t.slot_bytes), pk_keys(*this), hash(pool, pk_keys) {
  for (uint32_t i = 0; i < t.ordered.size(); ++i) {
    ordered_keys.push_back(std::make_unique<OrderedKeySource>(impl, *this, i));
    ordered.push_back(
        std::make_unique<storage::OrderedIndex>(pool, t.ordered[i].codec.max_encoded_bytes(), ordered_keys[i].get()));
  }
}

}  // namespace ldm

void LdmBlock::Impl::schema_install(const Signal& s, BlockContext& c) {
  auto m = decode_schema_install(s);
  if (!m) return faults.refuse(s, m.status().message());
  if (m->drop) {
    drop_table(m->table_id, c);
  } else {
    auto def = decode_installed_table(*m);
    if (!def) return faults.refuse(s, def.status().message());
    auto layout = RowLayout::create(*def);
    if (!layout) return faults.refuse(s, "table '" + def->name + "': " + layout.status().message());
    drop_table(m->table_id, c);  // an install replaces the table
    install_table(std::move(def).value(), std::move(layout).value());
  }
  const SignalOut out = encode(SchemaInstallConf{m->install_id});
  c.send(s.sender_address(), out.number, out.data(), out.section_list());
}

// A table decode_installed_table() accepted, with its row layout.
void LdmBlock::Impl::install_table(TableDef def, RowLayout layout) {
  FJORD_ASSERT(def.partitions >= 1);
  FJORD_ASSERT(def.partitions <= kMaxPartitions);
  const uint32_t id = def.table_id;
  auto t = std::make_unique<LdmTable>(std::move(def), std::move(layout));
  for (uint32_t p = o.instance; p < t->def.partitions; p += o.ldm_instances)
    t->partitions.push_back(std::make_unique<Partition>(*this, *t, pool, p));
  if (slot_buffer.size() < t->slot_bytes) slot_buffer.resize(t->slot_bytes);
  if (changed.size() < t->ordered.size()) changed.resize(t->ordered.size());
  if (!t->writable)
    FJORD_LOG_WARN(
        "LDM(%u): table '%s': its unique-index columns are too wide to report in one signal; "
        "writes will be refused",
        o.instance, t->def.name.c_str());
  FJORD_LOG_DEBUG("LDM(%u): table '%s' id %u version %u: %zu of %u partitions here, %u-byte slots", o.instance,
                  t->def.name.c_str(), id, t->def.version, t->partitions.size(), t->def.partitions, t->slot_bytes);
  if (id >= tables.size()) tables.resize(id + 1);
  tables[id] = std::move(t);
}

// Drops a table: its lock records go (their holds stay with their
// transactions, detached, until commit or abort), its memory returns to the
// pool, and requests waiting on its rows run again and are refused.
// Scans on it are refused at their next round.
void LdmBlock::Impl::drop_table(uint32_t id, BlockContext& c) {
  if (table_of(id) == nullptr) return;
  uint32_t waiting_first = kNoRecord, waiting_last = kNoRecord;
  for (uint32_t i = 0; i < locks.capacity(); ++i) {
    const uint32_t ref = locks.ref_at(i);
    if (ref == kNoRecord || locks[ref].table_id != id) continue;
    RowLock& lock = locks[ref];
    if (lock.queue_head != kNoRecord) {
      if (waiting_last == kNoRecord)
        waiting_first = lock.queue_head;
      else
        parked[waiting_last].next = lock.queue_head;
      waiting_last = lock.queue_tail;
    }
    for (uint32_t h = lock.first_holder; h != kNoRecord; h = holds[h].next_in_lock) holds[h].lock = kNoRecord;
    locks.release(ref);
    bump(counters.lock_records_in_use, -1);
  }
  for (const auto& p : tables[id]->partitions) bump(counters.committed_rows, -static_cast<int64_t>(p->committed_rows));
  tables[id].reset();
  FJORD_LOG_DEBUG("LDM(%u): dropped table %u", o.instance, id);
  resume(waiting_first, c);
}

}  // namespace fjord::engine
