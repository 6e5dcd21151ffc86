// The key section codec: a request's key values (value entries) into the
// key's order-preserving encoding.
#include "fjord/engine/protocol/key_section_codec.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "fjord/engine/protocol/value_entries.h"

namespace fjord::engine::protocol {

namespace {
// Room for a key's values, left uninitialised: ValueRef's member initialisers
// would make a plain array zero 384 bytes for every key encoded, and TC and
// LDM each encode the key of every key operation. Each slot is assigned
// before it is read (`seen`).
union KeyValues {
  KeyValues() {}  // leaves the slots uninitialised
  ValueRef slot[kMaxKeyColumns];
};
static_assert(std::is_trivially_copy_assignable_v<ValueRef>);
static_assert(std::is_trivially_destructible_v<ValueRef>);
}  // namespace

// encode_key_section() for a key of non-nullable integer columns (most
// keys): each entry goes straight to its column's place in `out`. False on
// anything unusual (a malformed or NULL entry, a column that is not a key
// column or comes twice or not at all, a wrong width), which the general
// path then names.
bool encode_integer_key_section(const KeyCodec& codec, std::span<const std::byte> section, std::span<std::byte> out) {
  const std::span<const KeyCodec::IntegerColumn> columns = codec.integer_columns();
  // An entry's header: u16 column, u16 flags, u32 length.
  uint16_t column;
  uint16_t flags;
  uint32_t length;
  const auto read_header = [&](const std::byte* at) {
    std::memcpy(&column, at, 2);
    std::memcpy(&flags, at + 2, 2);
    std::memcpy(&length, at + 4, 4);
  };
  if (columns.size() == 1) {  // the commonest key: its one entry's header and value checked at once
    const KeyCodec::IntegerColumn& c = columns[0];
    if (section.size() != std::size_t{8} + c.width) return false;
    read_header(section.data());
    if (column != c.position || flags != 0 || length != c.width) return false;
    KeyCodec::put_integer(c, section.data() + 8, out.data());
    return true;
  }
  static_assert(kMaxKeyColumns <= 32, "one bit per key column");
  uint32_t seen = 0;
  const std::byte* p = section.data();
  std::size_t rest = section.size();
  while (rest != 0) {
    if (rest < 8) return false;
    read_header(p);
    uint32_t slot = 0;
    while (slot < columns.size() && columns[slot].position != column) ++slot;
    if (slot == columns.size() || flags != 0 || (seen >> slot & 1) != 0) return false;
    if (length != columns[slot].width || rest < 8 + length) return false;
    KeyCodec::put_integer(columns[slot], p + 8, out.data());
    seen |= 1u << slot;
    p += 8 + length;  // 4 or 8 value bytes: no padding
    rest -= 8 + length;
  }
  return seen == (columns.size() == 32 ? UINT32_MAX : (1u << columns.size()) - 1);
}

Result<uint32_t> encode_key_section(const KeyCodec& codec, std::span<const std::byte> section,
                                    std::span<std::byte> out) {
  if (encode_integer_key_fast(codec, section, out)) return codec.max_encoded_bytes();
  return encode_key_section_general(codec, section, out);
}

Result<uint32_t> encode_key_section_general(const KeyCodec& codec, std::span<const std::byte> section,
                                            std::span<std::byte> out) {
  KeyValues values;
  bool seen[kMaxKeyColumns] = {};
  const uint32_t n = codec.column_count();
  ValueCursor cursor(section);
  ValueEntry e;
  uint32_t given = 0;
  while (cursor.next(e)) {
    uint32_t slot = n;
    for (uint32_t i = 0; i < n; ++i)
      if (codec.column(i).position == e.column) slot = i;
    if (slot == n)
      return Status(StatusCode::kInvalidArgument,
                    codec.owner() + ": column " + std::to_string(e.column) + " is not a key column");
    if (seen[slot])
      return Status(StatusCode::kInvalidArgument,
                    codec.owner() + ": column '" + codec.column(slot).def.name + "' given twice");
    seen[slot] = true;
    values.slot[slot] = e.is_null ? ValueRef::null() : ValueRef::of_bytes(e.bytes);
    ++given;
  }
  if (!cursor.error().is_ok()) return cursor.error();
  if (given != n) {
    for (uint32_t i = 0; i < n; ++i)
      if (!seen[i])
        return Status(StatusCode::kInvalidArgument,
                      codec.owner() + ": no value for key column '" + codec.column(i).def.name + "'");
  }
  return codec.encode({values.slot, n}, out);
}

}  // namespace fjord::engine::protocol
