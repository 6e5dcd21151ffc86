// The hot path allocates nothing from the heap: this program replaces the
// global operator new with a counting one (counting_new.h), and counts the allocations made
// while rows and index entries are inserted, read, scanned and erased,
// from empty structures (so page growth is included).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "counting_new.h"
#include "fjord/engine/storage/hash_index.h"
#include "fjord/engine/storage/ordered_index.h"
#include "storage_test_util.h"

using fjord::test::g_allocations;
using fjord::test::g_count_allocations;

namespace fjord::engine::storage {
namespace {

TEST(StorageAllocTest, HotPathMakesNoHeapAllocations) {
  g_count_allocations = true;  // the whole test: the figures are differences
  auto pool = testing::make_pool(64 << 20);
  testing::TestTable table(*pool, 40, 50);
  HashIndex pk_index(*pool, table.pk_keys);
  OrderedIndex name_index(*pool, table.by_name.max_encoded_bytes(), &table.name_keys, 16);
  constexpr uint64_t kRows = 50000;
  // Inputs prepared up front: building them allocates, the storage calls must not.
  std::vector<std::vector<std::byte>> records, pk_keys, name_keys;
  for (uint64_t id = 0; id < kRows; ++id) {
    const std::string name = "customer-with-shared-prefix-" + std::to_string(id % 977);
    records.push_back(table.record(id, name.substr(0, 40)));
    pk_keys.push_back(table.pk_key(id));
    name_keys.push_back(table.name_key(name.substr(0, 40)));
  }
  std::vector<RowId> rows(kRows, kNoRow), batch(64);
  uint64_t failures = 0, found = 0, scanned = 0;

  const uint64_t before = g_allocations.load();
  for (uint64_t i = 0; i < kRows; ++i) {
    Result<RowId> row = table.rows.insert(records[i]);
    failures += row.is_ok() ? 0 : 1;
    rows[i] = row.is_ok() ? row.value() : kNoRow;
    failures += pk_index.insert(hash_key(pk_keys[i].data(), pk_keys[i].size()), pk_keys[i], rows[i]).is_ok() ? 0 : 1;
    failures += name_index.insert(name_keys[i], rows[i]).is_ok() ? 0 : 1;
  }
  for (uint64_t i = 0; i < kRows; ++i) {
    found += pk_index.find(hash_key(pk_keys[i].data(), pk_keys[i].size()), pk_keys[i]) == rows[i] ? 1 : 0;
  }
  RowScanCursor full;
  while (!full.done()) scanned += table.rows.scan_batch(full, batch);
  OrderedScanCursor range;
  range.set_equal(name_keys[5]);
  while (!range.done()) scanned += name_index.scan_batch(range, batch);
  for (uint64_t i = 0; i < kRows; i += 2) {
    failures += name_index.erase(name_keys[i], rows[i]).is_ok() ? 0 : 1;
    failures += pk_index.erase(hash_key(pk_keys[i].data(), pk_keys[i].size()), rows[i]).is_ok() ? 0 : 1;
    table.rows.erase(rows[i]);
  }
  const uint64_t after = g_allocations.load();

  EXPECT_EQ(after - before, 0u) << "heap allocations on the storage hot path";
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(found, kRows);
  uint64_t same_name = 0;
  for (uint64_t id = 0; id < kRows; ++id) same_name += id % 977 == 5 ? 1 : 0;
  EXPECT_EQ(scanned, kRows + same_name);
  // The counter works: a Status message does allocate.
  const Status s(StatusCode::kInternal, std::string(100, 'x'));
  EXPECT_GT(g_allocations.load(), after);
}

}  // namespace
}  // namespace fjord::engine::storage
