// TableDef <-> bytes, for schema signals. The decoder bounds-checks every
// field and then runs validate_table(), so a peer cannot install a table
// that the rest of the engine would choke on.
//
// Layout (little-endian): u32 magic "FJTB", u16 version 1, u16 zero,
// u32 table_id, u32 version, u32 partitions, string name, u16 column count,
// columns {string name, u8 type, u8 nullable, u32 length}, u16 key column
// count, u16 positions, u16 index count, indexes {string name, u8 kind,
// u8 zero, u32 index_id, u16 column count, u16 positions}. A string is u16
// length then bytes.
#include <cstring>

#include "fjord/base/byte_io.h"
#include "fjord/engine/protocol.h"

namespace fjord::engine::protocol {
namespace {

constexpr uint32_t kMagic = 0x4254'4A46;  // "FJTB"
constexpr uint16_t kVersion = 1;

Status malformed(const std::string& what) { return Status(StatusCode::kProtocolError, "table definition: " + what); }

bool read_positions(ByteReader& r, std::vector<uint16_t>& out, std::size_t max) {
  uint16_t n;
  if (!r.u16(n) || n > max) return false;
  out.resize(n);
  for (uint16_t& p : out)
    if (!r.u16(p)) return false;
  return true;
}

}  // namespace

std::vector<std::byte> encode_table(const TableDef& t) {
  ByteWriter w;
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(0);
  w.u32(t.table_id);
  w.u32(t.version);
  w.u32(t.partitions);
  w.str16(t.name);
  w.u16(static_cast<uint16_t>(t.columns.size()));
  for (const ColumnDef& c : t.columns) {
    w.str16(c.name);
    w.u8(static_cast<uint8_t>(c.type));
    w.u8(c.nullable ? 1 : 0);
    w.u32(c.length);
  }
  w.u16(static_cast<uint16_t>(t.primary_key.size()));
  for (uint16_t p : t.primary_key) w.u16(p);
  w.u16(static_cast<uint16_t>(t.indexes.size()));
  for (const IndexDef& i : t.indexes) {
    w.str16(i.name);
    w.u8(static_cast<uint8_t>(i.kind));
    w.u8(0);
    w.u32(i.index_id);
    w.u16(static_cast<uint16_t>(i.columns.size()));
    for (uint16_t p : i.columns) w.u16(p);
  }
  return w.take();
}

Result<TableDef> decode_table(std::span<const std::byte> bytes) {
  ByteReader r(bytes);
  uint32_t magic = 0;
  uint16_t version = 0, zero = 0, count = 0;
  if (!r.u32(magic) || magic != kMagic) return malformed("bad magic");
  if (!r.u16(version) || version != kVersion) return malformed("unsupported version " + std::to_string(version));
  if (!r.u16(zero) || zero != 0) return malformed("reserved bits set");
  TableDef t;
  if (!r.u32(t.table_id) || !r.u32(t.version) || !r.u32(t.partitions) || !r.str16(t.name, kMaxNameBytes))
    return malformed("truncated header");
  if (!r.u16(count) || count > kMaxColumns) return malformed("column count");
  t.columns.resize(count);
  for (ColumnDef& c : t.columns) {
    uint8_t type = 0, nullable = 0;
    if (!r.str16(c.name, kMaxNameBytes) || !r.u8(type) || !r.u8(nullable) || !r.u32(c.length))
      return malformed("truncated column");
    if (type < static_cast<uint8_t>(ColumnType::kInt32) || type > static_cast<uint8_t>(ColumnType::kVarChar))
      return malformed("column type " + std::to_string(type));
    if (nullable > 1) return malformed("nullable flag " + std::to_string(nullable));
    c.type = static_cast<ColumnType>(type);
    c.nullable = nullable == 1;
  }
  if (!read_positions(r, t.primary_key, kMaxKeyColumns)) return malformed("primary key");
  if (!r.u16(count) || count > kMaxIndexes) return malformed("index count");
  t.indexes.resize(count);
  for (IndexDef& i : t.indexes) {
    uint8_t kind = 0, pad = 0;
    if (!r.str16(i.name, kMaxNameBytes) || !r.u8(kind) || !r.u8(pad) || !r.u32(i.index_id))
      return malformed("truncated index");
    if ((kind != static_cast<uint8_t>(IndexKind::kUnique) && kind != static_cast<uint8_t>(IndexKind::kOrdered)) || pad)
      return malformed("index kind " + std::to_string(kind));
    i.kind = static_cast<IndexKind>(kind);
    if (!read_positions(r, i.columns, kMaxKeyColumns)) return malformed("index columns");
  }
  if (!r.at_end()) return malformed("trailing bytes");
  if (Status s = validate_table(t); !s) return s;
  if (Status s = check_table_fits_signals(t); !s) return s;
  return t;
}

std::size_t unique_report_bytes(const TableDef& table) {
  std::vector<bool> reported(table.columns.size(), false);
  bool has_unique = false;
  for (const IndexDef& index : table.indexes)
    if (index.kind == IndexKind::kUnique) {
      has_unique = true;
      for (uint16_t p : index.columns) reported[p] = true;
    }
  if (!has_unique) return 0;
  for (uint16_t p : table.primary_key) reported[p] = true;
  std::size_t n = 0;
  for (std::size_t c = 0; c < table.columns.size(); ++c)
    if (reported[c]) n += value_entry_bytes(max_value_bytes(table.columns[c]));
  return n;
}

Status check_table_fits_signals(const TableDef& table) {
  const std::size_t n = unique_report_bytes(table);
  if (n <= kMaxUniqueReportBytes) return Status::ok();
  return Status(StatusCode::kInvalidArgument,
                "table '" + table.name + "': its unique index columns and primary key take " + std::to_string(n) +
                    " bytes in a signal, at most " + std::to_string(kMaxUniqueReportBytes));
}

}  // namespace fjord::engine::protocol
