// LDM: scans of one partition (ScanFragReq / ScanFragNextReq / close).
//
// A scan reads committed rows only, in rounds: each round sends up to
// batch_rows matching rows to the API in ScanRows signals (each under about
// 30 KB) and then one ScanFragConf to TC. A full scan walks the partition's
// RowStore by RowId; an ordered scan walks an ordered index between its
// bounds. Both cursors keep their position by value, so rows inserted or
// deleted between rounds never break a scan, and a row present throughout is
// returned exactly once (anchors never move; see ldm_impl.h).
//
// Filters (column op constant, ANDed) are evaluated here. A round examines
// at most scan_slice_rows rows per signal, then continues in a signal to
// itself, so a selective filter over a big partition never holds the thread.
#include <algorithm>
#include <cstring>

#include "fjord/base/log.h"
#include "ldm_impl.h"

namespace fjord::engine {

using namespace protocol;
using namespace ldm;

namespace {

constexpr std::size_t kScanRowsSoftBytes = 30 * 1024;  // a ScanRows is sent before it passes this

uint64_t scan_key(NodeId node, uint16_t tc_instance, uint32_t partition, uint32_t tc_scan) {
  return uint64_t{node} << 56 | uint64_t{tc_instance & 0xFFu} << 48 | uint64_t{partition & 0xFFFFu} << 32 | tc_scan;
}

template <typename M>
void send_out(BlockContext& c, Address to, const M& message) {
  const SignalOut out = encode(message);
  c.send(to, out.number, out.data(), out.section_list());
}

// Integers compare as numbers of their type, everything else bytewise
// (a shorter string that is a prefix of a longer one is smaller).
int compare_values(ColumnType type, std::span<const std::byte> a, std::span<const std::byte> b) {
  const auto order = [](auto x, auto y) { return (x > y) - (x < y); };
  const auto as = [](std::span<const std::byte> s, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, s.data(), sizeof v);
    return v;
  };
  switch (type) {
    case ColumnType::kInt32: return order(as(a, int32_t{}), as(b, int32_t{}));
    case ColumnType::kUint32: return order(as(a, uint32_t{}), as(b, uint32_t{}));
    case ColumnType::kInt64: return order(as(a, int64_t{}), as(b, int64_t{}));
    case ColumnType::kUint64: return order(as(a, uint64_t{}), as(b, uint64_t{}));
    default: break;
  }
  const std::size_t n = std::min(a.size(), b.size());
  if (n > 0)
    if (const int r = std::memcmp(a.data(), b.data(), n); r != 0) return r < 0 ? -1 : 1;
  return order(a.size(), b.size());
}

bool predicate_holds(const ColumnDef& column, const ValueRef& value, const Predicate& p) {
  if (p.op == FilterOp::kIsNull) return value.is_null;
  if (p.op == FilterOp::kIsNotNull) return !value.is_null;
  if (value.is_null || p.value.is_null) return false;  // NULL compares false
  const int r = compare_values(column.type, value.bytes, p.value.bytes);
  switch (p.op) {
    case FilterOp::kEq: return r == 0;
    case FilterOp::kNe: return r != 0;
    case FilterOp::kLt: return r < 0;
    case FilterOp::kLe: return r <= 0;
    case FilterOp::kGt: return r > 0;
    case FilterOp::kGe: return r >= 0;
    default: return false;
  }
}

bool matches(const LdmTable& t, std::span<const std::byte> record, std::span<const std::byte> filter) {
  FilterCursor cursor(filter);
  Predicate p;
  while (cursor.next(p))
    if (!predicate_holds(t.layout.column(p.column), t.layout.get(record, p.column), p)) return false;
  return true;
}

// Bytes of one row in a ScanRows: its length word and its value entries.
std::size_t row_bytes(const LdmTable& t, std::span<const std::byte> record, std::span<const std::byte> columns) {
  std::size_t n = 4;
  const auto add = [&](uint16_t column) {
    const ValueRef v = t.layout.get(record, column);
    n += value_entry_bytes(v.is_null ? 0 : v.bytes.size());
  };
  if (columns.empty()) {
    for (uint32_t column = 0; column < t.layout.column_count(); ++column) add(static_cast<uint16_t>(column));
  } else {
    for (std::size_t i = 0; i < columns.size(); i += 2) {
      uint16_t column;
      std::memcpy(&column, columns.data() + i, sizeof column);
      add(column);
    }
  }
  return n;
}

}  // namespace

void LdmBlock::Impl::scan_frag_req(const Signal& s, BlockContext& c) {
  auto decoded = decode_scan_frag_req(s);
  if (!decoded) {
    faults.refuse(s, decoded.status().message());
    using L = layout::ScanFragReq;
    if (s.word_count() > L::kPartition)
      send_out(c, s.sender_address(), ScanFragRef{s.word(L::kTcScan), s.word(L::kPartition), ErrorCode::kBadRequest});
    return;
  }
  const ScanFragReq& r = *decoded;
  const auto refuse = [&](ErrorCode error) {
    send_out(c, s.sender_address(), ScanFragRef{r.tc_scan, r.partition, error});
  };
  // Rows go to an API node's receiver, which a data node has not (unless a
  // test stands one in).
  if (r.api_node == c.self_node() && !c.node_hosts({block_numbers::kApi, 0})) {
    faults.refuse(s, "a ScanFragReq whose rows go to this data node as if it were an API node");
    return refuse(ErrorCode::kBadRequest);
  }
  const LdmTable* t = table_of(r.table_id);
  if (t == nullptr) return refuse(ErrorCode::kNoSuchTable);
  if (t->def.version != r.table_version) return refuse(ErrorCode::kSchemaVersion);
  if (r.partition >= t->def.partitions || !owns(r.partition) || r.lock != LockMode::kCommitted)
    return refuse(ErrorCode::kBadRequest);
  int32_t ordered = -1;
  if (r.flags & kScanFlagOrderedIndex) {
    for (std::size_t i = 0; i < t->ordered.size(); ++i)
      if (t->ordered[i].index_id == r.index_id) ordered = static_cast<int32_t>(i);
    if (ordered < 0) return refuse(ErrorCode::kNoSuchIndex);
  } else if (!r.bounds.empty()) {
    return refuse(ErrorCode::kBadRequest);
  }
  if (!columns_valid(*t, r.columns) || !filter_valid(*t, r.filter)) return refuse(ErrorCode::kBadRequest);
  const uint64_t key = scan_key(s.sender_node, s.sender().instance, r.partition, r.tc_scan);
  uint32_t existing = kNoRecord;
  if (scan_by_key.find(key, existing)) return refuse(ErrorCode::kBadRequest);
  const uint32_t ref = scans.allocate();
  if (ref == kNoRecord) return refuse(ErrorCode::kTooManyScans);  // this instance's share of MaxNoOfLocalScans
  ScanRecord& scan = scans[ref];
  if (ordered >= 0)
    if (const ErrorCode e = set_bounds(t->ordered[ordered], r.bounds, scan.range); e != ErrorCode::kNone) {
      scans.release(ref);
      return refuse(e);
    }
  scan.definition = scan_definitions.store({r.filter, r.columns});
  if (scan.definition == kNoChunk) {
    scans.release(ref);
    return refuse(ErrorCode::kScanError);
  }
  scan.key = key;
  scan.tc = s.sender_address();
  scan.tc_scan = r.tc_scan;
  scan.partition = r.partition;
  scan.table_id = r.table_id;
  scan.table_version = r.table_version;
  scan.ordered = ordered;
  scan.batch_rows = r.batch_rows;
  scan.api_node = r.api_node;
  scan.api_conn = r.api_conn;
  scan.scan_id = r.scan_id;
  scan.filter_bytes = static_cast<uint32_t>(r.filter.size());
  scan.column_bytes = static_cast<uint32_t>(r.columns.size());
  const bool inserted = scan_by_key.insert(key, ref);
  FJORD_ASSERT(inserted);  // sized like the pool
  bump(counters.scans);
  bump(counters.scans_open);
  scan.in_round = true;
  scan_round(ref, c);
}

// Bounds on a prefix of the index columns: each bound's values name the
// first k index columns (by table position, in any order), each once.
ErrorCode LdmBlock::Impl::set_bounds(const OrderedDef& index, std::span<const std::byte> section,
                                     storage::OrderedScanCursor& cursor) {
  Result<Bounds> bounds = decode_bounds(section);
  if (!bounds.is_ok()) return ErrorCode::kBadRequest;
  const KeyCodec& codec = index.codec;
  const auto encode_prefix = [&](std::span<const std::byte> entries, uint32_t count, uint32_t& length) {
    if (count > codec.column_count()) return false;
    ValueRef values[kMaxKeyColumns];
    bool seen[kMaxKeyColumns] = {};
    ValueCursor values_in(entries);
    ValueEntry e;
    while (values_in.next(e)) {
      uint32_t slot = count;
      for (uint32_t i = 0; i < count; ++i)
        if (codec.column(i).position == e.column) slot = i;
      if (slot == count || seen[slot]) return false;
      seen[slot] = true;
      values[slot] = e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes);
    }
    Result<uint32_t> n = codec.encode({values, count}, key_a);
    if (!n.is_ok()) return false;
    length = n.value();
    return true;
  };
  uint32_t length = 0;
  if (bounds->has_lower) {
    if (!encode_prefix(bounds->lower, bounds->lower_count, length)) return ErrorCode::kBadRequest;
    cursor.set_lower(std::span(key_a).first(length), bounds->lower_inclusive);
  }
  if (bounds->has_upper) {
    if (!encode_prefix(bounds->upper, bounds->upper_count, length)) return ErrorCode::kBadRequest;
    cursor.set_upper(std::span(key_a).first(length), bounds->upper_inclusive);
  }
  return ErrorCode::kNone;
}

// Predicates name known columns; integer constants have their column's width.
bool LdmBlock::Impl::filter_valid(const LdmTable& t, std::span<const std::byte> filter) const {
  FilterCursor cursor(filter);
  Predicate p;
  while (cursor.next(p)) {
    if (p.column >= t.layout.column_count()) return false;
    if (p.op == FilterOp::kIsNull || p.op == FilterOp::kIsNotNull || p.value.is_null) continue;
    const uint32_t width = integer_width(t.layout.column(p.column).type);
    if (width != 0 && p.value.bytes.size() != width) return false;
  }
  return cursor.error().is_ok();
}

void LdmBlock::Impl::scan_frag_next(const Signal& s, BlockContext& c) {
  auto m = decode_scan_frag_next(s);
  if (!m) {
    faults.refuse(s, m.status().message());
    return;
  }
  uint32_t ref = kNoRecord;
  const bool found = scan_by_key.find(scan_key(s.sender_node, s.sender().instance, m->partition, m->tc_scan), ref);
  if (s.number() == gsn::kScanFragCloseReq) {
    if (found) close_scan(ref);  // closing a finished or unknown scan is already done
    send_out(c, s.sender_address(), ScanFragConf{m->tc_scan, m->partition, 0, 0, true});
    return;
  }
  if (!found) return send_out(c, s.sender_address(), ScanFragRef{m->tc_scan, m->partition, ErrorCode::kScanError});
  if (scans[ref].in_round) {
    faults.refuse(s, "a scan continued while its round runs");
    return;
  }
  scans[ref].in_round = true;
  scan_round(ref, c);
}

void LdmBlock::Impl::scan_continue(const Signal& s, BlockContext& c) {
  if (s.sender_node != c.self_node() || s.sender().block != self.block || s.sender().instance != self.instance ||
      s.word_count() != 1)
    return;
  const uint32_t ref = s.word(0);
  if (scans.valid(ref) && scans[ref].in_round) scan_round(ref, c);
}

// One slice of a round: examines up to scan_slice_rows rows, sends the
// matching ones, and ends the round (ScanFragConf) or continues it later.
void LdmBlock::Impl::scan_round(uint32_t ref, BlockContext& c) {
  ScanRecord& scan = scans[ref];
  const LdmTable* t = table_of(scan.table_id);
  if (t == nullptr || t->def.version != scan.table_version) {
    send_out(c, scan.tc, ScanFragRef{scan.tc_scan, scan.partition, ErrorCode::kNoSuchTable});
    return close_scan(ref);
  }
  Partition& p = *t->partitions[scan.partition / o.ldm_instances];
  scan_definitions.load(scan.definition, std::size_t{scan.filter_bytes} + scan.column_bytes, definition_buffer);
  const std::span<const std::byte> filter(definition_buffer.data(), scan.filter_bytes);
  const std::span<const std::byte> columns(definition_buffer.data() + scan.filter_bytes, scan.column_bytes);
  std::size_t used = 0;  // bytes of scan_out
  uint32_t message_rows = 0;
  const auto flush = [&] {
    if (message_rows == 0) return;
    send_out(c, {scan.api_node, {block_numbers::kApi, 0}},
             ScanRows{scan.api_conn, scan.scan_id, message_rows, std::span(scan_out).first(used)});
    ++scan.round_messages;
    used = 0;
    message_rows = 0;
  };
  uint32_t examined = 0;
  bool done = false;
  while (scan.round_rows < scan.batch_rows && examined < o.scan_slice_rows && !done) {
    const uint32_t want = std::min({kScanFetchRows, scan.batch_rows - scan.round_rows, o.scan_slice_rows - examined});
    const std::span<RowId> ids(scan_ids.data(), want);
    const std::size_t got =
        scan.ordered < 0 ? p.rows.scan_batch(scan.full, ids) : p.ordered[scan.ordered]->scan_batch(scan.range, ids);
    // Not got < want: a batch that takes the partition's last row says so
    // too, so a round that fills exactly there reports the partition
    // finished instead of costing one more, empty, round.
    done = scan.ordered < 0 ? scan.full.done() : scan.range.done();
    examined += static_cast<uint32_t>(got);
    for (std::size_t k = 0; k < got; ++k) {
      const RowId anchor = scan.ordered < 0 ? ids[k] : untagged(ids[k]);  // full scans meet versions too
      const std::byte* slot = p.slot(anchor);
      if (slot_kind(slot) != RowKind::kCommitted) continue;  // versions and uncommitted inserts
      if (scan.ordered >= 0 && slot_tag(slot, static_cast<uint32_t>(scan.ordered)) != tag_of(ids[k])) continue;
      const std::span<const std::byte> record = p.record(anchor);
      if (!matches(*t, record, filter)) continue;
      const std::size_t n = row_bytes(*t, record, columns);
      if (used + n > kScanRowsSoftBytes) flush();
      const auto length = static_cast<uint32_t>(n - 4);
      std::memcpy(scan_out.data() + used, &length, sizeof length);
      const std::size_t written = put_columns(*t, record, columns, std::span(scan_out).subspan(used + 4));
      FJORD_ASSERT(written == length);
      used += n;
      ++message_rows;
      ++scan.round_rows;
    }
  }
  flush();
  if (!done && scan.round_rows < scan.batch_rows) {  // the slice ended first: go on later
    const uint32_t word = ref;
    c.send({c.self_node(), self}, kScanContinue, {&word, 1});
    return;
  }
  bump(counters.scan_rows, scan.round_rows);
  bump(counters.scan_rounds);
  send_out(c, scan.tc, ScanFragConf{scan.tc_scan, scan.partition, scan.round_rows, scan.round_messages, done});
  scan.in_round = false;
  scan.round_rows = scan.round_messages = 0;
  if (done) close_scan(ref);
}

void LdmBlock::Impl::close_scan(uint32_t ref) {
  ScanRecord& scan = scans[ref];
  scan_by_key.erase(scan.key);
  if (scan.definition != kNoChunk) scan_definitions.free(scan.definition);
  scans.release(ref);
  bump(counters.scans_open, -1);
}

}  // namespace fjord::engine
