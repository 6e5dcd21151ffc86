// Helpers shared by the storage suites: a pool, and a table whose rows live
// in a real RowStore with keys read back through a RowKeySource.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fjord/engine/key_codec.h"
#include "fjord/engine/row_layout.h"
#include "fjord/engine/storage/key_source.h"
#include "fjord/engine/storage/page_pool.h"
#include "fjord/engine/storage/row_store.h"

namespace fjord::engine::storage::testing {

inline std::unique_ptr<PagePool> make_pool(uint64_t bytes) {
  Result<std::unique_ptr<PagePool>> pool = PagePool::create(PagePoolConfig{bytes});
  FJORD_ASSERT(pool.is_ok());
  return std::move(pool).value();
}

// The seed of a randomized test: FJORD_SEED if set, else random; printed on
// failure by the SCOPED_TRACE the caller adds.
inline uint64_t test_seed() {
  if (const char* env = std::getenv("FJORD_SEED")) return std::strtoull(env, nullptr, 10);
  return std::random_device{}();
}

inline std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A table (id UINT64, name VARCHAR(name_length), payload BINARY(payload_length))
// with primary key `id` and an index on `name`; its rows, and key sources for both.
struct TestTable {
  TableDef def;
  RowLayout layout;
  KeyCodec pk;
  KeyCodec by_name;
  RowStore rows;
  RowKeySource pk_keys;
  RowKeySource name_keys;

  static TableDef make_def(uint32_t name_length, uint32_t payload_length) {
    TableDef t;
    t.name = "t";
    t.columns = {{"id", ColumnType::kUint64, 0, false},
                 {"name", ColumnType::kVarChar, name_length, false},
                 {"payload", ColumnType::kBinary, payload_length, false}};
    t.primary_key = {0};
    t.indexes = {{"by_name", IndexKind::kOrdered, {1}, 0}};
    return t;
  }

  TestTable(PagePool& pool, uint32_t name_length, uint32_t payload_length)
      : def(make_def(name_length, payload_length)),
        layout(RowLayout::create(def).value()),
        pk(KeyCodec::for_primary_key(def)),
        by_name(KeyCodec::for_index(def, def.indexes[0])),
        rows(pool, layout.record_bytes()),
        pk_keys(rows, layout, pk),
        name_keys(rows, layout, by_name) {}

  std::vector<std::byte> record(uint64_t id, const std::string& name, char fill = 'p') const {
    std::vector<std::byte> r(layout.record_bytes());
    layout.init_record(r);
    EXPECT_TRUE(layout.set(r, 0, ValueRef::of(id)).is_ok());
    EXPECT_TRUE(layout.set(r, 1, ValueRef::of_string(name)).is_ok());
    const std::string payload(layout.column(2).length, fill);
    EXPECT_TRUE(layout.set(r, 2, ValueRef::of_string(payload)).is_ok());
    return r;
  }

  std::vector<std::byte> pk_key(uint64_t id) const {
    std::vector<std::byte> k(pk.max_encoded_bytes());
    const ValueRef v[] = {ValueRef::of(id)};
    k.resize(pk.encode(v, k).value());
    return k;
  }

  std::vector<std::byte> name_key(const std::string& name) const {
    std::vector<std::byte> k(by_name.max_encoded_bytes());
    const ValueRef v[] = {ValueRef::of_string(name)};
    k.resize(by_name.encode(v, k).value());
    return k;
  }
};

}  // namespace fjord::engine::storage::testing
