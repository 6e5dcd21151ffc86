// The tables LDM tests use, and a Db fixture: a Harness with one table
// installed and a Client for it.
#pragma once

#include <optional>
#include <string>

#include "ldm_harness.h"

namespace fjord::engine::ldm_test {

// items: id UINT64 (primary key), qty INT32 NOT NULL, name VARCHAR(40)
// NULL, code UINT32 NULL. Ordered indexes on qty and on name (longer than
// the 32 bytes a B+tree entry keeps, so equal prefixes make the tree read
// keys through the LDM's KeySource), a unique index on code.
inline constexpr uint16_t kId = 0, kQty = 1, kName = 2, kCode = 3;
inline constexpr uint32_t kByQty = 21, kByName = 22, kByCode = 23;

inline TableDef items_table(uint32_t partitions = 4, uint32_t table_id = 7) {
  TableDef t;
  t.name = "items";
  t.table_id = table_id;
  t.version = 3;
  t.partitions = partitions;
  t.columns = {column("id", ColumnType::kUint64), column("qty", ColumnType::kInt32),
               column("name", ColumnType::kVarChar, 40, true), column("code", ColumnType::kUint32, 0, true)};
  t.primary_key = {kId};
  t.indexes = {IndexDef{"by_qty", IndexKind::kOrdered, {kQty}, kByQty},
               IndexDef{"by_name", IndexKind::kOrdered, {kName}, kByName},
               IndexDef{"by_code", IndexKind::kUnique, {kCode}, kByCode}};
  EXPECT_TRUE(validate_table(t)) << validate_table(t).message();
  return t;
}

// A name sharing a 33-byte prefix with every other, so the ordered index
// must compare beyond its inline prefix.
inline std::string long_name(uint64_t n) { return "a-long-shared-prefix-for-names--" + std::to_string(n); }

inline Values item_key(uint64_t id) { return Values().u64(kId, id); }

struct Item {
  int32_t qty = 0;
  std::optional<std::string> name;
  std::optional<uint32_t> code;
  friend bool operator==(const Item&, const Item&) = default;
};

inline Values item_values(uint64_t id, const Item& item) {
  Values v;
  v.u64(kId, id).i32(kQty, item.qty);
  item.name ? v.str(kName, *item.name) : v.null(kName);
  item.code ? v.u32(kCode, *item.code) : v.null(kCode);
  return v;
}

inline Item item_of(const RowValues& row) {
  Item item;
  item.qty = int_of<int32_t>(row.at(kQty));
  if (row.at(kName)) item.name = str_of(row.at(kName));
  if (row.at(kCode)) item.code = int_of<uint32_t>(row.at(kCode));
  return item;
}

struct Db {
  explicit Db(const HarnessOptions& options = {}, TableDef t = items_table())
      : h(options), table(std::move(t)), client(h, table) {
    install(h, table);
  }

  KeyOutcome insert(TxId tx, uint64_t id, const Item& item) {
    return client.run({OpType::kInsert, LockMode::kExclusive, tx, item_key(id), item_values(id, item)});
  }
  KeyOutcome write(TxId tx, uint64_t id, const Item& item) {
    return client.run({OpType::kWrite, LockMode::kExclusive, tx, item_key(id), item_values(id, item)});
  }
  KeyOutcome update(TxId tx, uint64_t id, const Values& changes) {
    return client.run({OpType::kUpdate, LockMode::kExclusive, tx, item_key(id), changes});
  }
  KeyOutcome remove(TxId tx, uint64_t id) {
    return client.run({OpType::kDelete, LockMode::kExclusive, tx, item_key(id), {}});
  }
  KeyOutcome read(TxId tx, uint64_t id, LockMode lock = LockMode::kCommitted) {
    return client.run({OpType::kRead, lock, tx, item_key(id), {}});
  }
  // Inserts and commits in a transaction of its own.
  void put(uint64_t id, const Item& item) {
    const TxId tx = tx_id(next_tx++);
    ASSERT_TRUE(insert(tx, id, item).ok);
    client.commit(tx);
  }
  std::optional<Item> committed(uint64_t id) {
    const KeyOutcome r = read(tx_id(next_tx++), id);
    if (!r.ok) {
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
      return std::nullopt;
    }
    return item_of(r.values);
  }
  TxId fresh_tx() { return tx_id(next_tx++); }

  Harness h;
  TableDef table;
  Client client;
  uint32_t next_tx = 1;
};

}  // namespace fjord::engine::ldm_test
