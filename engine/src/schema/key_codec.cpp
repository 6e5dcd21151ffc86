// Values and the order-preserving key encoding (see key_codec.h for the format).
#include "fjord/engine/key_codec.h"

#include <array>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include "fjord/base/assert.h"
#include "fjord/engine/row_layout.h"

namespace fjord::engine {

static_assert(std::endian::native == std::endian::little,
              "values travel little-endian and ValueRef::of borrows an integer's own bytes");

namespace {

constexpr std::byte kNullMarker{0x00};
constexpr std::byte kValueMarker{0x01};
constexpr std::byte kEscape{0x00};
constexpr std::byte kEscapedZero{0xFF};
constexpr std::byte kTerminator{0x00};

template <typename T>
T read_le(std::span<const std::byte> bytes) {
  FJORD_ASSERT(bytes.size() == sizeof(T));
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// Big-endian of the value's width; signed types with the sign bit flipped so
// that negative numbers sort before positive ones.
uint32_t encode_integer(ColumnType type, std::span<const std::byte> value, std::byte* out) {
  const uint32_t width = integer_width(type);
  FJORD_ASSERT(value.size() == width);
  const bool is_signed = type == ColumnType::kInt32 || type == ColumnType::kInt64;
  KeyCodec::put_integer({0, static_cast<uint8_t>(width), is_signed, 0}, value.data(), out);
  return width;
}

void decode_integer(ColumnType type, const std::byte* in, std::byte* out) {
  const uint32_t width = integer_width(type);
  const bool is_signed = type == ColumnType::kInt32 || type == ColumnType::kInt64;
  for (uint32_t i = 0; i < width; ++i) out[i] = in[width - 1 - i];
  if (is_signed) out[width - 1] ^= std::byte{0x80};
}

uint32_t encode_var(std::span<const std::byte> value, std::byte* out) {
  uint32_t n = 0;
  for (std::byte b : value) {
    out[n++] = b;
    if (b == kEscape) out[n++] = kEscapedZero;
  }
  out[n++] = kEscape;
  out[n++] = kTerminator;
  return n;
}

// The encoded size of a valid value, without writing it.
uint32_t encoded_size(const ColumnDef& column, const ValueRef& value) {
  uint32_t n = column.nullable ? 1 : 0;
  if (value.is_null) return n;
  if (!is_variable_length(column.type)) return n + static_cast<uint32_t>(value.bytes.size());
  n += static_cast<uint32_t>(value.bytes.size()) + 2;
  for (std::byte b : value.bytes) n += b == kEscape ? 1 : 0;
  return n;
}

// Writes one checked value; returns the bytes written.
uint32_t encode_value(const ColumnDef& column, const ValueRef& value, std::byte* out) {
  uint32_t n = 0;
  if (column.nullable) out[n++] = value.is_null ? kNullMarker : kValueMarker;
  if (value.is_null) return n;
  if (integer_width(column.type) != 0) return n + encode_integer(column.type, value.bytes, out + n);
  if (is_variable_length(column.type)) return n + encode_var(value.bytes, out + n);
  std::memcpy(out + n, value.bytes.data(), value.bytes.size());
  return n + static_cast<uint32_t>(value.bytes.size());
}

// Unescapes one var value starting at key[in]; advances `in` past its
// terminator and `out` past the bytes written. Returns what is wrong, or null.
const char* decode_var(std::span<const std::byte> key, std::size_t& in, std::span<std::byte> scratch,
                       std::size_t& out) {
  for (;;) {
    if (in >= key.size()) return "ends without a terminator";
    const std::byte b = key[in++];
    if (b != kEscape) {
      scratch[out++] = b;
      continue;
    }
    if (in >= key.size()) return "ends inside an escape";
    const std::byte next = key[in++];
    if (next == kTerminator) return nullptr;
    if (next != kEscapedZero) return "has a bad escape";
    scratch[out++] = std::byte{0x00};
  }
}

}  // namespace

// ---- ValueRef ---------------------------------------------------------------

int32_t ValueRef::as_int32() const {
  FJORD_ASSERT(!is_null);
  return read_le<int32_t>(bytes);
}
uint32_t ValueRef::as_uint32() const {
  FJORD_ASSERT(!is_null);
  return read_le<uint32_t>(bytes);
}
int64_t ValueRef::as_int64() const {
  FJORD_ASSERT(!is_null);
  return read_le<int64_t>(bytes);
}
uint64_t ValueRef::as_uint64() const {
  FJORD_ASSERT(!is_null);
  return read_le<uint64_t>(bytes);
}
std::string_view ValueRef::as_string() const {
  FJORD_ASSERT(!is_null);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

bool same_value(const ValueRef& a, const ValueRef& b) noexcept {
  if (a.is_null || b.is_null) return a.is_null == b.is_null;
  return a.bytes.size() == b.bytes.size() &&
         (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

std::string column_type_display(const ColumnDef& column) {
  std::string text = column_type_name(column.type);
  if (integer_width(column.type) == 0) text += "(" + std::to_string(column.length) + ")";
  return text;
}

Status check_value(const ColumnDef& column, const ValueRef& value, std::string_view owner) {
  const auto fail = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(owner) + ": column '" + column.name + "' (" + column_type_display(column) + ") " + what);
  };
  if (value.is_null) return column.nullable ? Status::ok() : fail("is not nullable, got NULL");
  const std::size_t got = value.bytes.size();
  if (const uint32_t width = integer_width(column.type); width != 0) {
    if (got != width) return fail("needs " + std::to_string(width) + " bytes, got " + std::to_string(got));
  } else if (is_variable_length(column.type)) {
    if (got > column.length) {
      return fail("takes at most " + std::to_string(column.length) + " bytes, got " + std::to_string(got));
    }
  } else if (got != column.length) {
    return fail("needs exactly " + std::to_string(column.length) + " bytes, got " + std::to_string(got));
  }
  return Status::ok();
}

uint32_t max_encoded_column_bytes(const ColumnDef& column) noexcept {
  const uint32_t null_byte = column.nullable ? 1 : 0;
  if (const uint32_t width = integer_width(column.type); width != 0) return null_byte + width;
  if (is_variable_length(column.type)) return null_byte + 2 * column.length + 2;
  return null_byte + column.length;
}

// ---- KeyCodec -----------------------------------------------------------------

KeyCodec KeyCodec::for_primary_key(const TableDef& table) {
  std::vector<Column> columns;
  for (uint16_t position : table.primary_key) columns.push_back(Column{table.columns.at(position), position});
  return KeyCodec("primary key of table '" + table.name + "'", std::move(columns));
}

KeyCodec KeyCodec::for_index(const TableDef& table, const IndexDef& index) {
  std::vector<Column> columns;
  for (uint16_t position : index.columns) columns.push_back(Column{table.columns.at(position), position});
  return KeyCodec("index '" + index.name + "' of table '" + table.name + "'", std::move(columns));
}

KeyCodec::KeyCodec(std::string owner, std::vector<Column> columns)
    : owner_(std::move(owner)), columns_(std::move(columns)) {
  FJORD_ASSERT(!columns_.empty());
  FJORD_ASSERT(columns_.size() <= kMaxKeyColumns);
  bool integer_key = true;
  for (const Column& column : columns_) {
    const ColumnType type = column.def.type;
    const auto width = static_cast<uint8_t>(integer_width(type));
    integer_columns_.push_back(
        {column.position, width, type == ColumnType::kInt32 || type == ColumnType::kInt64, max_encoded_bytes_});
    max_encoded_bytes_ += max_encoded_column_bytes(column.def);
    if (column.def.nullable || is_variable_length(type)) fixed_width_ = false;
    if (column.def.nullable || width == 0) integer_key = false;
  }
  if (!integer_key) integer_columns_.clear();
  FJORD_ASSERT(max_encoded_bytes_ <= kMaxKeyBytes);
}

const KeyCodec::Column& KeyCodec::column(uint32_t i) const {
  FJORD_ASSERT(i < columns_.size());
  return columns_[i];
}

Result<uint32_t> KeyCodec::encode(std::span<const ValueRef> values, std::span<std::byte> out) const {
  if (values.size() > columns_.size()) {
    return Status(StatusCode::kInvalidArgument, owner_ + ": " + std::to_string(values.size()) +
                                                    " values for a key of " + std::to_string(columns_.size()) +
                                                    " columns");
  }
  uint32_t needed = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (Status s = check_value(columns_[i].def, values[i], owner_); !s) return s;
    needed += encoded_size(columns_[i].def, values[i]);
  }
  if (needed > out.size()) {
    return Status(StatusCode::kInvalidArgument, owner_ + ": the key needs " + std::to_string(needed) +
                                                    " bytes but the buffer has " + std::to_string(out.size()));
  }
  uint32_t n = 0;
  for (std::size_t i = 0; i < values.size(); ++i) n += encode_value(columns_[i].def, values[i], out.data() + n);
  FJORD_ASSERT(n == needed);
  return n;
}

uint32_t KeyCodec::encode_record(const RowLayout& layout, std::span<const std::byte> record,
                                 std::span<std::byte> out) const {
  FJORD_ASSERT(out.size() >= max_encoded_bytes_);
  uint32_t n = 0;
  for (const Column& column : columns_) n += encode_value(column.def, layout.get(record, column.position), &out[n]);
  return n;
}

void KeyCodec::locate(const RowLayout& layout) {
  if (integer_columns_.empty()) return;
  std::vector<uint32_t> offsets;
  for (const IntegerColumn& c : integer_columns_) {
    uint32_t offset = 0, length = 0;
    if (!layout.fixed_slot(c.position, offset, length) || length != c.width) return;  // not this table's layout
    offsets.push_back(offset);
  }
  for (std::size_t i = 0; i < offsets.size(); ++i) integer_columns_[i].record_offset = offsets[i];
  located_record_bytes_ = layout.record_bytes();
  located_ = true;
}

bool KeyCodec::record_matches_in(const RowLayout& layout, std::span<const std::byte> record,
                                 std::span<const std::byte> key) const {
  if (integer_key()) {
    // Each column's encoding is at its fixed offset: encode it there in a
    // scratch key and compare those bytes.
    if (key.size() != max_encoded_bytes_) return false;
    std::array<std::byte, kMaxKeyColumns * 8> scratch;
    for (const IntegerColumn& c : integer_columns_) {
      put_integer(c, layout.get(record, c.position).bytes.data(), scratch.data());
      const std::byte* mine = scratch.data() + c.offset;
      const std::byte* theirs = key.data() + c.offset;
      // Fixed sizes: two loads and a compare, not a call.
      if (c.width == 8 ? std::memcmp(mine, theirs, 8) != 0 : std::memcmp(mine, theirs, 4) != 0) return false;
    }
    return true;
  }
  std::size_t at = 0;
  for (const Column& column : columns_) {
    const ValueRef value = layout.get(record, column.position);
    if (column.def.nullable) {
      if (at == key.size() || key[at++] != (value.is_null ? kNullMarker : kValueMarker)) return false;
      if (value.is_null) continue;
    }
    if (is_variable_length(column.def.type)) {
      // Each value byte, 0x00 escaped, then the terminator pair.
      for (const std::byte b : value.bytes) {
        if (at == key.size() || key[at++] != b) return false;
        if (b == kEscape && (at == key.size() || key[at++] != kEscapedZero)) return false;
      }
      if (key.size() - at < 2 || key[at] != kEscape || key[at + 1] != kTerminator) return false;
      at += 2;
      continue;
    }
    std::array<std::byte, 8> integer{};
    std::span<const std::byte> expected = value.bytes;
    if (integer_width(column.def.type) != 0) {
      expected = std::span(integer).first(encode_integer(column.def.type, value.bytes, integer.data()));
    }
    if (key.size() - at < expected.size() || std::memcmp(&key[at], expected.data(), expected.size()) != 0) return false;
    at += expected.size();
  }
  return at == key.size();
}

Status KeyCodec::decode_error(uint32_t column, const char* what) const {
  return Status(StatusCode::kInvalidArgument,
                owner_ + ": encoded key " + what + " in column '" + columns_[column].def.name + "'");
}

Result<uint32_t> KeyCodec::decode(std::span<const std::byte> key, std::span<std::byte> scratch,
                                  std::span<ValueRef> values) const {
  FJORD_ASSERT(scratch.size() >= key.size());
  FJORD_ASSERT(values.size() >= columns_.size());
  std::size_t in = 0;
  std::size_t out = 0;
  uint32_t decoded = 0;
  for (; decoded < columns_.size() && in < key.size(); ++decoded) {
    const ColumnDef& def = columns_[decoded].def;
    if (def.nullable) {
      const std::byte marker = key[in++];
      if (marker == kNullMarker) {
        values[decoded] = ValueRef::null();
        continue;
      }
      if (marker != kValueMarker) return decode_error(decoded, "has a bad NULL marker");
    }
    const std::size_t start = out;
    if (is_variable_length(def.type)) {
      const char* problem = decode_var(key, in, scratch, out);
      if (problem != nullptr) return decode_error(decoded, problem);
      if (out - start > def.length) return decode_error(decoded, "is longer than the column");
    } else {
      const uint32_t width = integer_width(def.type) != 0 ? integer_width(def.type) : def.length;
      if (in + width > key.size()) return decode_error(decoded, "ends early");
      if (integer_width(def.type) != 0) {
        decode_integer(def.type, &key[in], &scratch[out]);
      } else {
        std::memcpy(&scratch[out], &key[in], width);
      }
      in += width;
      out += width;
    }
    values[decoded] = ValueRef::of_bytes(scratch.subspan(start, out - start));
  }
  if (in != key.size()) {
    return Status(StatusCode::kInvalidArgument,
                  owner_ + ": " + std::to_string(key.size() - in) + " bytes follow the last key column");
  }
  return decoded;
}

}  // namespace fjord::engine
