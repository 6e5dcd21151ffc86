// KeySource: how an index reads the full encoded key of a row it points to.
//
// The hash index stores only (hash, RowId) per row and the ordered index
// stores at most a fixed prefix of each key, as NDB's DBACC and DBTUX compare
// keys by reading the row (DBACC through the tuple's key, DBTUX through its
// attributes). When a hash matches, the hash index asks the KeySource whether
// the row has the key (key_equals); when two prefixes tie, the ordered index
// asks it for the row's key (encoded_key). RowKeySource is the usual one: it encodes the
// key columns straight from the RowStore record.
//
// Contract with the LDM block: for every RowId in an index, encoded_key()
// returns the key the row was indexed with. So insert into the indexes after
// the row is written, erase from them before the row is erased or its key
// columns change.
//
// Thread: the LDM thread that owns the partition. Hot path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fjord/engine/key_codec.h"
#include "fjord/engine/row_layout.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::storage {

class KeySource {
 public:
  virtual ~KeySource() = default;
  // Writes the encoded key of `row` to `out` (kMaxKeyBytes long); returns its length.
  virtual uint32_t encoded_key(RowId row, std::span<std::byte> out) const = 0;
  // True when the encoded key of `row` is `key`. This default encodes the
  // row's key and compares the bytes; a source that can compare in place
  // (KeyCodec::record_matches) overrides it.
  virtual bool key_equals(RowId row, std::span<const std::byte> key) const {
    std::array<std::byte, kMaxKeyBytes> stored;
    const uint32_t length = encoded_key(row, stored);
    return length == key.size() && std::memcmp(stored.data(), key.data(), length) == 0;
  }
};

// Encodes `codec`'s columns from the rows of `rows` laid out by `layout`.
// Holds references: all three must outlive it.
class RowKeySource final : public KeySource {
 public:
  RowKeySource(const RowStore& rows, const RowLayout& layout, const KeyCodec& codec)
      : rows_(rows), layout_(layout), codec_(codec) {}
  uint32_t encoded_key(RowId row, std::span<std::byte> out) const override {
    return codec_.encode_record(layout_, rows_.get(row), out);
  }
  bool key_equals(RowId row, std::span<const std::byte> key) const override {
    return codec_.record_matches(layout_, rows_.get(row), key);
  }

 private:
  const RowStore& rows_;
  const RowLayout& layout_;
  const KeyCodec& codec_;
};

}  // namespace fjord::engine::storage
