// Memory per row: 1 M rows of 100-byte payload (UINT64 primary key + 92
// bytes), in a row store with the primary-key hash index and an ordered
// index on the primary key (as NDB creates by default), all from one pool.
// Prints the figure docs/storage.md quotes; asserts the deterministic byte
// ratio (not a time).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "fjord/engine/storage/hash_index.h"
#include "fjord/engine/storage/ordered_index.h"
#include "storage_test_util.h"

namespace fjord::engine::storage {
namespace {

TEST(StorageMemoryTest, OneMillionHundredByteRowsTakeUnderTwiceTheirPayload) {
  constexpr uint64_t kRows = 1'000'000;
  constexpr uint64_t kPayloadBytes = 100;
  auto pool = testing::make_pool(256ULL << 20);
  TableDef def;
  def.name = "bench";
  def.columns = {{"id", ColumnType::kUint64, 0, false}, {"payload", ColumnType::kBinary, 92, false}};
  def.primary_key = {0};
  const RowLayout layout = RowLayout::create(def).value();
  ASSERT_EQ(layout.record_bytes(), kPayloadBytes);
  const KeyCodec pk = KeyCodec::for_primary_key(def);
  RowStore rows(*pool, layout.record_bytes());
  RowKeySource keys(rows, layout, pk);
  HashIndex hash(*pool, keys);
  OrderedIndex ordered(*pool, pk.max_encoded_bytes(), nullptr);

  std::vector<std::byte> record(layout.record_bytes());
  layout.init_record(record);
  const std::string payload(92, 'x');
  ASSERT_TRUE(layout.set(record, 1, ValueRef::of_string(payload)).is_ok());
  std::vector<std::byte> key(pk.max_encoded_bytes());
  // Ascending keys: the worst case for the B+tree (leaves split half full).
  for (uint64_t id = 0; id < kRows; ++id) {
    ASSERT_TRUE(layout.set(record, 0, ValueRef::of(id)).is_ok());
    const RowId row = rows.insert(record).value();
    const uint32_t n = pk.encode_record(layout, record, key);
    const std::span<const std::byte> k(key.data(), n);
    ASSERT_TRUE(hash.insert(hash_key(k.data(), k.size()), k, row).is_ok());
    ASSERT_TRUE(ordered.insert(k, row).is_ok());
  }
  const uint64_t total = rows.memory_bytes() + hash.memory_bytes() + ordered.memory_bytes();
  EXPECT_EQ(total, uint64_t{pool->pages_in_use()} * PagePool::kPageBytes) << "every pool page is accounted for";
  const auto per_row = [&](uint64_t bytes) { return static_cast<double>(bytes) / kRows; };
  std::printf(
      "1M rows of %llu bytes: rows %.1f + hash index %.1f + ordered index %.1f = %.1f bytes per row "
      "(%.2fx payload, %llu pool pages)\n",
      static_cast<unsigned long long>(kPayloadBytes), per_row(rows.memory_bytes()), per_row(hash.memory_bytes()),
      per_row(ordered.memory_bytes()), per_row(total), per_row(total) / kPayloadBytes,
      static_cast<unsigned long long>(pool->pages_in_use()));
  EXPECT_LE(per_row(total), 2.0 * kPayloadBytes);
  EXPECT_TRUE(hash.check_invariants().is_ok());
  EXPECT_TRUE(ordered.check_invariants().is_ok());
}

}  // namespace
}  // namespace fjord::engine::storage
