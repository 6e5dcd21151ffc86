// The schema vocabulary: type facts, table validation and the key hash.
#include "fjord/engine/schema.h"

#include <cstring>
#include <string>
#include <unordered_set>

#include "fjord/engine/key_codec.h"
#include "fjord/engine/row_layout.h"

namespace fjord::engine {

const char* column_type_name(ColumnType type) noexcept {
  switch (type) {
    case ColumnType::kInt32: return "INT32";
    case ColumnType::kUint32: return "UINT32";
    case ColumnType::kInt64: return "INT64";
    case ColumnType::kUint64: return "UINT64";
    case ColumnType::kBinary: return "BINARY";
    case ColumnType::kVarBinary: return "VARBINARY";
    case ColumnType::kChar: return "CHAR";
    case ColumnType::kVarChar: return "VARCHAR";
  }
  return "UNKNOWN";
}

uint32_t max_value_bytes(const ColumnDef& column) noexcept {
  const uint32_t width = integer_width(column.type);
  return width != 0 ? width : column.length;
}

uint32_t integer_width(ColumnType type) noexcept {
  switch (type) {
    case ColumnType::kInt32:
    case ColumnType::kUint32: return 4;
    case ColumnType::kInt64:
    case ColumnType::kUint64: return 8;
    default: return 0;
  }
}

bool is_variable_length(ColumnType type) noexcept {
  return type == ColumnType::kVarBinary || type == ColumnType::kVarChar;
}

int TableDef::column_index(std::string_view column_name) const {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == column_name) return static_cast<int>(i);
  }
  return -1;
}

TableDef hidden_unique_table(const TableDef& base, const IndexDef& index) {
  TableDef t;
  t.name = base.name + "$" + index.name;
  t.partitions = base.partitions;
  for (uint16_t p : index.columns) {
    ColumnDef c = base.columns[p];
    c.nullable = false;  // rows with a NULL in the unique key are not indexed
    t.columns.push_back(c);
    t.primary_key.push_back(static_cast<uint16_t>(t.columns.size() - 1));
  }
  for (uint16_t p : base.primary_key) {
    ColumnDef c = base.columns[p];
    c.name = "$pk$" + c.name;  // cannot clash with a unique key column's name, unless one starts "$pk$"
    t.columns.push_back(c);
  }
  return t;
}

namespace {

bool known_type(ColumnType type) { return type >= ColumnType::kInt32 && type <= ColumnType::kVarChar; }

std::string quoted(const std::string& name) { return "'" + name + "'"; }

Status invalid(const TableDef& table, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "table " + quoted(table.name) + ": " + what);
}

// `whose` is "column 3's", "index 0's": the name is not quoted, it may be huge.
Status check_name_length(const TableDef& table, const std::string& whose, const std::string& name) {
  if (name.size() <= kMaxNameBytes) return Status::ok();
  return invalid(
      table, whose + " name has " + std::to_string(name.size()) + " bytes, at most " + std::to_string(kMaxNameBytes));
}

Status check_column(const TableDef& table, std::size_t position, const ColumnDef& column) {
  if (column.name.empty()) return invalid(table, "column " + std::to_string(position) + " has an empty name");
  if (Status s = check_name_length(table, "column " + std::to_string(position) + "'s", column.name); !s) return s;
  const std::string name = "column " + quoted(column.name);
  if (!known_type(column.type)) {
    return invalid(table, name + " has unknown type " + std::to_string(static_cast<int>(column.type)));
  }
  const uint32_t width = integer_width(column.type);
  if (width != 0) {
    if (column.length != 0 && column.length != width) {
      return invalid(table, name + " (" + column_type_name(column.type) + ") has length " +
                                std::to_string(column.length) + "; an integer column takes 0 or " +
                                std::to_string(width));
    }
    return Status::ok();
  }
  if (column.length == 0 || column.length > kMaxColumnBytes) {
    return invalid(table, name + " (" + column_type_name(column.type) + ") has length " +
                              std::to_string(column.length) + ", outside 1.." + std::to_string(kMaxColumnBytes));
  }
  return Status::ok();
}

Status check_columns(const TableDef& table) {
  if (table.columns.empty()) return invalid(table, "has no columns");
  if (table.columns.size() > kMaxColumns) {
    return invalid(table,
                   "has " + std::to_string(table.columns.size()) + " columns, at most " + std::to_string(kMaxColumns));
  }
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    if (Status s = check_column(table, i, table.columns[i]); !s) return s;
    if (!names.insert(table.columns[i].name).second) {
      return invalid(table, "column " + quoted(table.columns[i].name) + " is defined twice");
    }
  }
  return Status::ok();
}

// `what` is "primary key" or "index 'ix'"; nullable columns are allowed in
// indexes but not in the primary key.
Status check_key_columns(const TableDef& table, const std::string& what, const std::vector<uint16_t>& key,
                         bool allow_nullable) {
  if (key.empty()) return invalid(table, what + " has no columns");
  if (key.size() > kMaxKeyColumns) {
    return invalid(table,
                   what + " has " + std::to_string(key.size()) + " columns, at most " + std::to_string(kMaxKeyColumns));
  }
  uint64_t encoded_bytes = 0;
  std::vector<bool> seen(table.columns.size(), false);
  for (uint16_t position : key) {
    if (position >= table.columns.size()) {
      return invalid(table, what + " names column position " + std::to_string(position) + " but the table has " +
                                std::to_string(table.columns.size()) + " columns");
    }
    const ColumnDef& column = table.columns[position];
    if (seen[position]) return invalid(table, what + " lists column " + quoted(column.name) + " twice");
    seen[position] = true;
    if (column.nullable && !allow_nullable) {
      return invalid(table, what + " column " + quoted(column.name) + " is nullable");
    }
    encoded_bytes += max_encoded_column_bytes(column);
  }
  if (encoded_bytes > kMaxKeyBytes) {
    return invalid(table, what + " can encode to " + std::to_string(encoded_bytes) + " bytes, at most " +
                              std::to_string(kMaxKeyBytes));
  }
  return Status::ok();
}

Status check_indexes(const TableDef& table) {
  if (table.indexes.size() > kMaxIndexes) {
    return invalid(table,
                   "has " + std::to_string(table.indexes.size()) + " indexes, at most " + std::to_string(kMaxIndexes));
  }
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < table.indexes.size(); ++i) {
    const IndexDef& index = table.indexes[i];
    if (index.name.empty()) return invalid(table, "index " + std::to_string(i) + " has an empty name");
    if (Status s = check_name_length(table, "index " + std::to_string(i) + "'s", index.name); !s) return s;
    const std::string what = "index " + quoted(index.name);
    if (!names.insert(index.name).second) return invalid(table, what + " is defined twice");
    if (index.kind != IndexKind::kUnique && index.kind != IndexKind::kOrdered) {
      return invalid(table, what + " has unknown kind " + std::to_string(static_cast<int>(index.kind)));
    }
    if (Status s = check_key_columns(table, what, index.columns, true); !s) return s;
  }
  return Status::ok();
}

}  // namespace

Status validate_table(const TableDef& table) {
  if (table.name.empty()) return Status(StatusCode::kInvalidArgument, "table name is empty");
  if (table.name.size() > kMaxNameBytes)  // not quoted: it may be huge
    return Status(StatusCode::kInvalidArgument, "table name has " + std::to_string(table.name.size()) +
                                                    " bytes, at most " + std::to_string(kMaxNameBytes));
  if (Status s = check_columns(table); !s) return s;
  if (Status s = check_key_columns(table, "primary key", table.primary_key, false); !s) return s;
  if (Status s = check_indexes(table); !s) return s;
  if (table.partitions > kMaxPartitions) {
    return invalid(
        table, "has " + std::to_string(table.partitions) + " partitions, at most " + std::to_string(kMaxPartitions));
  }
  const uint64_t record_bytes = RowLayout::record_bytes_for(table);
  if (record_bytes > kMaxRecordBytes) {
    return invalid(
        table, "a row takes " + std::to_string(record_bytes) + " bytes, at most " + std::to_string(kMaxRecordBytes));
  }
  // DICT installs the hidden table in every TC and LDM, which cannot refuse
  // it: its name, its "$pk$" column names and their uniqueness must hold
  // here. (The columns and keys are checked above; a hidden table has no
  // indexes, so this goes one level deep.)
  for (const IndexDef& index : table.indexes) {
    if (index.kind != IndexKind::kUnique) continue;
    if (Status s = validate_table(hidden_unique_table(table, index)); !s)
      return invalid(table,
                     "unique index " + quoted(index.name) + " needs a hidden table that is not valid: " + s.message());
  }
  return Status::ok();
}

// ---- hash_key ---------------------------------------------------------------
//
// Eight bytes at a time (read little-endian, so the value is the same on any
// host), each word multiplied by an odd constant before it is folded into the
// state, which is rotated and multiplied again; the last partial word carries
// the length so "ab" and "ab\0" differ. A final xor-shift-multiply round
// spreads every input bit over all 64 output bits: the hash index uses the low
// bits and partition_of() the high ones.

namespace {

constexpr uint64_t kOddA = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio
constexpr uint64_t kOddB = 0xD1B54A32D192ED03ULL;
constexpr uint64_t kOddC = 0xAEF17502108EF2D9ULL;

inline uint64_t rotate_left(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

inline uint64_t load_le64(const unsigned char* p, std::size_t n) {
  uint64_t word = 0;
  for (std::size_t i = 0; i < n; ++i) word |= static_cast<uint64_t>(p[i]) << (8 * i);
  return word;
}

inline uint64_t absorb(uint64_t state, uint64_t word) { return rotate_left(state ^ (word * kOddB), 31) * kOddA; }

inline uint64_t finish(uint64_t x) {
  x ^= x >> 32;
  x *= kOddC;
  x ^= x >> 29;
  x *= kOddB;
  x ^= x >> 32;
  return x;
}

}  // namespace

uint64_t hash_key(const void* bytes, std::size_t length) noexcept {
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint64_t state = kOddC ^ (static_cast<uint64_t>(length) * kOddA);
  std::size_t left = length;
  while (left >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian host (checked in key_codec.cpp)
    state = absorb(state, word);
    p += 8;
    left -= 8;
  }
  state = absorb(state, load_le64(p, left) ^ (static_cast<uint64_t>(left) << 59));
  return finish(state);
}

}  // namespace fjord::engine
