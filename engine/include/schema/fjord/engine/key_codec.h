// Column values by reference, and the order-preserving key encoding.
//
// A key (primary, unique or ordered-index key, or a bound that is a prefix of
// one) is encoded column by column so that memcmp order of the encodings is
// the tuple order of the values, with shorter-is-smaller on a common prefix:
//
//   nullable column   one byte first: 0x00 = NULL (nothing follows), 0x01 = a value
//   INT32 / INT64     big-endian with the sign bit flipped (4 / 8 bytes)
//   UINT32 / UINT64   big-endian (4 / 8 bytes)
//   BINARY / CHAR     the `length` bytes as they are
//   VARBINARY/VARCHAR each 0x00 byte written as 0x00 0xFF, then 0x00 0x00
//
// Every column's encoding is self-delimiting, so the encoding of the first k
// columns is a byte prefix of the encoding of any key that starts with those
// values, and no complete key is a proper prefix of another: bounds on a
// prefix of the index columns compare correctly with memcmp.
//
// Thread: any (a KeyCodec is immutable once built). Hot path: encode,
// encode_record, record_matches and decode allocate nothing unless they return an error
// (a Status message allocates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fjord/base/assert.h"
#include "fjord/base/status.h"
#include "fjord/engine/schema.h"

namespace fjord::engine {

class RowLayout;

// A column value borrowed from the caller: NULL, or bytes in the schema's
// value format (integers little-endian of their width, byte strings raw).
struct ValueRef {
  bool is_null = false;
  std::span<const std::byte> bytes;

  static ValueRef null() { return ValueRef{true, {}}; }
  static ValueRef of_bytes(std::span<const std::byte> bytes) { return ValueRef{false, bytes}; }
  static ValueRef of_string(std::string_view text) {
    return ValueRef{false, std::as_bytes(std::span<const char>(text.data(), text.size()))};
  }
  // Integers: refers to the variable's own bytes (this host is little-endian),
  // so the variable must outlive the ValueRef; temporaries do not compile.
  static ValueRef of(const int32_t& value) { return of_object(value); }
  static ValueRef of(const uint32_t& value) { return of_object(value); }
  static ValueRef of(const int64_t& value) { return of_object(value); }
  static ValueRef of(const uint64_t& value) { return of_object(value); }
  static ValueRef of(int32_t&&) = delete;
  static ValueRef of(uint32_t&&) = delete;
  static ValueRef of(int64_t&&) = delete;
  static ValueRef of(uint64_t&&) = delete;

  // Reading a value back; asserts that it is not NULL and has the width.
  int32_t as_int32() const;
  uint32_t as_uint32() const;
  int64_t as_int64() const;
  uint64_t as_uint64() const;
  std::string_view as_string() const;

 private:
  template <typename T>
  static ValueRef of_object(const T& value) {
    return ValueRef{false, std::as_bytes(std::span<const T, 1>(&value, 1))};
  }
};

// Both NULL, or both non-NULL with equal bytes.
bool same_value(const ValueRef& a, const ValueRef& b) noexcept;

// "INT32", "BINARY(8)", "VARCHAR(255)".
std::string column_type_display(const ColumnDef& column);

// Checks that `value` fits `column`: NULL only if nullable, integers of the
// exact width, fixed types exactly `length` bytes, var types at most
// `length`. The message starts with `owner` ("table 't1'") and names the column.
Status check_value(const ColumnDef& column, const ValueRef& value, std::string_view owner);

// The most bytes one column can take in a key encoding (a var column whose
// bytes are all 0x00, plus the NULL byte if nullable).
uint32_t max_encoded_column_bytes(const ColumnDef& column) noexcept;

class KeyCodec {
 public:
  struct Column {
    ColumnDef def;
    uint16_t position = 0;  // in TableDef::columns
  };

  // The key of a table that passed validate_table().
  static KeyCodec for_primary_key(const TableDef& table);
  static KeyCodec for_index(const TableDef& table, const IndexDef& index);
  // `owner` names the key in messages: "primary key of table 't1'".
  KeyCodec(std::string owner, std::vector<Column> columns);

  uint32_t column_count() const { return static_cast<uint32_t>(columns_.size()); }
  const Column& column(uint32_t i) const;
  const std::string& owner() const { return owner_; }
  // The longest encoding of a full key (all columns).
  uint32_t max_encoded_bytes() const { return max_encoded_bytes_; }
  // True when every key has the same encoded length (no var or nullable column).
  bool fixed_width() const { return fixed_width_; }
  // A key whose columns are all non-nullable integers (the common key)
  // encodes as their big-endian values back to back, max_encoded_bytes()
  // in all: integer_columns() says where each goes (empty for other keys).
  struct IntegerColumn {
    uint16_t position = 0;  // in TableDef::columns
    uint8_t width = 0;      // 4 or 8
    bool is_signed = false;
    uint32_t offset = 0;         // of its encoding in the key
    uint32_t record_offset = 0;  // of its value in a record, once located (locate)
  };
  bool integer_key() const { return !integer_columns_.empty(); }
  std::span<const IntegerColumn> integer_columns() const { return integer_columns_; }
  // Writes one integer column's little-endian `value` (exactly c.width
  // bytes, which the caller checked) into its place in a key buffer of at
  // least max_encoded_bytes(): the encode() of that column, inline.
  static void put_integer(const IntegerColumn& c, const std::byte* value, std::byte* key) {
    if (c.width == 8) {
      uint64_t v;
      std::memcpy(&v, value, 8);
      v = __builtin_bswap64(v) ^ (c.is_signed ? 0x80 : 0);  // sign bit flipped: negatives sort first
      std::memcpy(key + c.offset, &v, 8);
    } else {
      uint32_t v;
      std::memcpy(&v, value, 4);
      v = __builtin_bswap32(v) ^ (c.is_signed ? 0x80 : 0);
      std::memcpy(key + c.offset, &v, 4);
    }
  }

  // Encodes values for the first values.size() key columns (all of them for a
  // key, fewer for a bound on a prefix). Returns the encoded length; errors
  // (kInvalidArgument) name the column at fault.
  Result<uint32_t> encode(std::span<const ValueRef> values, std::span<std::byte> out) const;

  // Encodes the key columns of a record of `layout` (the record's values were
  // checked when they were set). `out` holds at least max_encoded_bytes().
  uint32_t encode_record(const RowLayout& layout, std::span<const std::byte> record, std::span<std::byte> out) const;

  // True when `key` is exactly the encoding encode_record() would write for
  // `record`, found by comparing column by column in place: no buffer, and
  // it stops at the first byte that differs (a hash index's key compare).
  // For an integer key located in `layout`'s records (locate), inline: a
  // load, a byte swap and a compare per column.
  bool record_matches(const RowLayout& layout, std::span<const std::byte> record,
                      std::span<const std::byte> key) const {
    if (located_) return located_record_matches(record, key);
    return record_matches_in(layout, record, key);
  }
  // An integer key's columns are fixed-size and NOT NULL, so they lie at the
  // same offsets in every record of a table: records of `layout` (the
  // codec's table's) are compared there from now on, not through
  // RowLayout::get. Nothing changes for other keys.
  void locate(const RowLayout& layout);

  // Decodes a key or key prefix into `values` (at least column_count()).
  // Integers come back little-endian; all bytes are written to `scratch`,
  // which needs key.size() bytes. Returns the number of columns decoded.
  Result<uint32_t> decode(std::span<const std::byte> key, std::span<std::byte> scratch,
                          std::span<ValueRef> values) const;

 private:
  Status decode_error(uint32_t column, const char* what) const;

  std::string owner_;
  std::vector<Column> columns_;
  uint32_t max_encoded_bytes_ = 0;
  bool fixed_width_ = true;
  std::vector<IntegerColumn> integer_columns_;  // one per column for an integer key, else none
  bool located_ = false;
  uint32_t located_record_bytes_ = 0;

  bool record_matches_in(const RowLayout& layout, std::span<const std::byte> record,
                         std::span<const std::byte> key) const;
  bool located_record_matches(std::span<const std::byte> record, std::span<const std::byte> key) const {
    FJORD_ASSERT(record.size() == located_record_bytes_);
    if (key.size() != max_encoded_bytes_) return false;
    for (const IntegerColumn& c : integer_columns_) {
      const std::byte* value = record.data() + c.record_offset;
      const std::byte* theirs = key.data() + c.offset;
      if (c.width == 8) {
        uint64_t mine, k;
        std::memcpy(&mine, value, 8);
        std::memcpy(&k, theirs, 8);
        if ((__builtin_bswap64(mine) ^ (c.is_signed ? 0x80 : 0)) != k) return false;
      } else {
        uint32_t mine, k;
        std::memcpy(&mine, value, 4);
        std::memcpy(&k, theirs, 4);
        if ((__builtin_bswap32(mine) ^ (c.is_signed ? 0x80u : 0u)) != k) return false;
      }
    }
    return true;
  }
};

}  // namespace fjord::engine
