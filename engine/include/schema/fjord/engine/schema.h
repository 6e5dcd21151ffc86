// Table schema: the vocabulary shared by the API library, the TC and LDM
// blocks and the storage structures.
//
// A table has typed columns, a primary key (a list of columns), and any
// number of indexes: unique (a hidden table mapping the unique key to the
// primary key, kept in step by TC) and ordered (a tree per partition, for
// range and equality-bound scans). Rows are partitioned by a hash of the
// primary key over `partitions` partitions; the partition count is a table
// property, independent of the number of LDM threads (partition p lives on
// LDM instance p % ldm_count).
//
// Values travel as bytes: integers little-endian of their width; binary and
// char columns as raw bytes (fixed types exactly `length` bytes, var types up
// to `length`). NULL is a separate flag, allowed only for nullable columns.
//
// Slow path (definitions); any thread once built (immutable).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/status.h"

namespace fjord::engine {

enum class ColumnType : uint8_t {
  kInt32 = 1,
  kUint32,
  kInt64,
  kUint64,
  kBinary,     // fixed `length` bytes
  kVarBinary,  // 0..`length` bytes
  kChar,       // fixed `length` bytes of text (compared bytewise)
  kVarChar,    // 0..`length` bytes of text
};

const char* column_type_name(ColumnType type) noexcept;
// Bytes of a fixed-width integer type; 0 for the byte-string types.
uint32_t integer_width(ColumnType type) noexcept;
bool is_variable_length(ColumnType type) noexcept;

inline constexpr uint32_t kMaxColumnBytes = 8000;  // one value must fit a frame section
inline constexpr uint32_t kMaxColumns = 128;
inline constexpr uint32_t kMaxKeyColumns = 16;
inline constexpr uint32_t kMaxKeyBytes = 1024;  // encoded key (primary, unique or ordered)
inline constexpr uint32_t kMaxPartitions = 1024;
// Table ids (base tables and the hidden tables of unique indexes, which
// share the range, as do ordered indexes' ids) run from 1 to kMaxTableId
// (NDB's largest MaxNoOfTables): DICT assigns none above it, and TC and
// LDM, which keep their tables in arrays by id, install none outside it.
inline constexpr uint32_t kMaxTableId = 20320;
// Table, column and index names travel as length-prefixed strings of at most
// this many bytes; a table has at most kMaxIndexes indexes.
inline constexpr uint32_t kMaxNameBytes = 128;
inline constexpr uint32_t kMaxIndexes = 64;

struct ColumnDef {
  std::string name;
  ColumnType type = ColumnType::kUint32;
  uint32_t length = 0;  // for binary/char types: the (maximum) length in bytes
  bool nullable = false;
};
// The most bytes a value of `column` has (integers: their width).
uint32_t max_value_bytes(const ColumnDef& column) noexcept;

enum class IndexKind : uint8_t { kUnique = 1, kOrdered };

struct IndexDef {
  std::string name;
  IndexKind kind = IndexKind::kOrdered;
  std::vector<uint16_t> columns;  // positions in TableDef::columns, in key order
  uint32_t index_id = 0;          // assigned by the data node
};

struct TableDef {
  std::string name;
  uint32_t table_id = 0;  // assigned by the data node at create time
  uint32_t version = 0;   // bumped on drop/create, checked by operations
  std::vector<ColumnDef> columns;
  std::vector<uint16_t> primary_key;  // positions in columns
  std::vector<IndexDef> indexes;
  uint32_t partitions = 0;  // 0 = the data node's default

  int column_index(std::string_view column_name) const;  // -1 if absent
};

// The hidden table behind unique index `index` of `base` (ids not
// assigned): "base$index", the index's columns (NOT NULL) as its primary key,
// then the primary key's columns renamed "$pk$column".
TableDef hidden_unique_table(const TableDef& base, const IndexDef& index);

// Checks names (non-empty, at most kMaxNameBytes), types, lengths, key columns (not nullable, at most
// kMaxKeyColumns, encoded width within kMaxKeyBytes) and index definitions.
// Each unique index's hidden table must be valid too.
// The message names the table, column or index at fault.
Status validate_table(const TableDef& table);

// The partition a primary key hashes to (the same function in the API, for
// "hinted" transactions, and in TC). `key_hash` is hash_key() of the
// encoded primary key.
inline uint32_t partition_of(uint64_t key_hash, uint32_t partitions) noexcept {
  return static_cast<uint32_t>((key_hash >> 32) % partitions);
}

// A 64-bit hash of encoded key bytes (stable across processes and builds).
uint64_t hash_key(const void* bytes, std::size_t length) noexcept;

}  // namespace fjord::engine
