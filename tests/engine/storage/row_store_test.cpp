// RowStore against a std::unordered_map model, resumable scans under inserts
// and erases between batches, and DataMemory exhaustion.
#include "fjord/engine/storage/row_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "storage_test_util.h"

namespace fjord::engine::storage {
namespace {

using testing::make_pool;
using testing::test_seed;

constexpr uint32_t kRecordBytes = 100;

std::vector<std::byte> record_for(uint64_t value) {
  std::vector<std::byte> r(kRecordBytes);
  for (uint32_t i = 0; i < kRecordBytes; ++i) r[i] = static_cast<std::byte>((value * 131 + i) & 0xFF);
  std::memcpy(r.data(), &value, sizeof value);
  return r;
}

std::set<RowId> scan_all(const RowStore& store, std::size_t batch) {
  std::set<RowId> seen;
  RowScanCursor cursor;
  std::vector<RowId> out(batch);
  while (!cursor.done()) {
    const std::size_t n = store.scan_batch(cursor, out);
    for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(seen.insert(out[i]).second) << "row returned twice";
    if (n < batch) {
      EXPECT_TRUE(cursor.done());
    }
  }
  return seen;
}

TEST(RowStoreTest, MatchesAModelUnderRandomOperations) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pool = make_pool(64 << 20);
  RowStore store(*pool, kRecordBytes);
  std::unordered_map<RowId, uint64_t> model;
  std::vector<RowId> live;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t op = rng() % 100;
    // Phases: mostly grow, then mostly shrink, so pages fill and empty.
    const bool growing = (step / 40000) % 2 == 0;
    if (live.empty() || op < (growing ? 60u : 35u)) {
      const uint64_t value = rng();
      const RowId row = store.insert(record_for(value)).value();
      ASSERT_TRUE(model.emplace(row, value).second) << "RowId " << row << " handed out twice";
      live.push_back(row);
    } else if (op < 80) {
      const std::size_t i = rng() % live.size();
      store.erase(live[i]);
      model.erase(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      const RowId row = live[rng() % live.size()];
      ASSERT_TRUE(store.contains(row));
      const std::vector<std::byte> want = record_for(model[row]);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), store.get(row).begin()));
    }
    ASSERT_EQ(store.row_count(), model.size());
    if (step % 20000 == 0) {
      const std::set<RowId> seen = scan_all(store, 1 + rng() % 100);
      ASSERT_EQ(seen.size(), model.size());
      for (RowId row : seen) ASSERT_TRUE(model.count(row)) << row;
    }
  }
  for (RowId row : live) store.erase(row);
  EXPECT_EQ(store.row_count(), 0u);
  // Back to the pool: all but one page with room and, as the store grew past
  // PageDirectory::kInlinePages pages, the directory's root and leaf page.
  EXPECT_EQ(store.memory_bytes(), uint64_t{pool->pages_in_use()} * PagePool::kPageBytes);
  EXPECT_LE(store.memory_bytes(), 3u * PagePool::kPageBytes);
}

TEST(RowStoreTest, ScanResumedAfterChangesReturnsStableRowsExactlyOnce) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pool = make_pool(64 << 20);
  RowStore store(*pool, kRecordBytes);
  std::vector<RowId> live;
  for (int i = 0; i < 20000; ++i) live.push_back(store.insert(record_for(i)).value());
  for (int round = 0; round < 5; ++round) {
    const std::set<RowId> at_start(live.begin(), live.end());
    std::set<RowId> erased_during;
    std::multiset<RowId> returned;
    RowScanCursor cursor;
    std::vector<RowId> out(1 + rng() % 300);
    while (!cursor.done()) {
      const std::size_t n = store.scan_batch(cursor, out);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(store.contains(out[i]));  // only live rows come back
        returned.insert(out[i]);
      }
      // Between batches: erase some rows (old and new) and insert others.
      for (int k = 0; k < 40 && !live.empty(); ++k) {
        const std::size_t i = rng() % live.size();
        erased_during.insert(live[i]);
        store.erase(live[i]);
        live[i] = live.back();
        live.pop_back();
      }
      for (int k = 0; k < 40; ++k) live.push_back(store.insert(record_for(rng())).value());
    }
    for (RowId row : returned) ASSERT_EQ(returned.count(row), 1u) << "row " << row << " returned twice";
    for (RowId row : at_start) {
      if (erased_during.count(row) == 0) {
        ASSERT_EQ(returned.count(row), 1u) << "stable row " << row << " missed";
      }
    }
  }
}

// A full batch that takes the last row ends the scan (done()), so that the
// caller needs no further, empty, batch to learn it; rows erased at the end
// are no rows. One short of the last, the scan goes on.
TEST(RowStoreTest, AFullBatchThatTakesTheLastRowEndsTheScan) {
  auto pool = make_pool(16 << 20);
  RowStore store(*pool, kRecordBytes);
  std::vector<RowId> rows;
  for (int i = 0; i < 300; ++i) rows.push_back(store.insert(record_for(i)).value());
  for (int i = 250; i < 300; ++i) store.erase(rows[i]);
  std::vector<RowId> out(250);
  RowScanCursor whole;
  EXPECT_EQ(store.scan_batch(whole, out), 250u);
  EXPECT_TRUE(whole.done());
  RowScanCursor halves;
  out.resize(125);
  EXPECT_EQ(store.scan_batch(halves, out), 125u);
  EXPECT_FALSE(halves.done());
  EXPECT_EQ(store.scan_batch(halves, out), 125u);
  EXPECT_EQ(out.back(), rows[249]);
  EXPECT_TRUE(halves.done());
  RowScanCursor short_of_it;
  out.resize(249);
  EXPECT_EQ(store.scan_batch(short_of_it, out), 249u);
  EXPECT_FALSE(short_of_it.done());
  EXPECT_EQ(store.scan_batch(short_of_it, out), 1u);
  EXPECT_TRUE(short_of_it.done());
}

TEST(RowStoreTest, ExhaustionIsAClearErrorAndExistingRowsSurvive) {
  auto pool = make_pool(8 * PagePool::kPageBytes);
  RowStore store(*pool, kRecordBytes);
  std::vector<RowId> rows;
  Status last;
  for (uint64_t i = 0;; ++i) {
    Result<RowId> row = store.insert(record_for(i));
    if (!row.is_ok()) {
      last = row.status();
      break;
    }
    rows.push_back(row.value());
  }
  EXPECT_EQ(last.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(last.message(), "DataMemory full: 8 of 8 pages in use (DataMemory=256K)");
  EXPECT_EQ(rows.size(), 8u * store.rows_per_page());
  for (uint64_t i = 0; i < rows.size(); ++i) {
    const std::vector<std::byte> want = record_for(i);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), store.get(rows[i]).begin())) << i;
  }
  store.erase(rows[5]);
  EXPECT_TRUE(store.insert(record_for(99)).is_ok());
  EXPECT_FALSE(store.insert(record_for(100)).is_ok());
}

TEST(RowStoreTest, PagesHoldAsManyRowsAsFitAndMemoryIsCounted) {
  auto pool = make_pool(16 << 20);
  RowStore store(*pool, kRecordBytes);
  // A 72-byte page header (24 + a 6-word bitmap) and 326 * 100 = 32600 bytes of rows.
  EXPECT_EQ(store.rows_per_page(), 326u);
  for (uint32_t i = 0; i < 3 * store.rows_per_page(); ++i) ASSERT_TRUE(store.insert(record_for(i)).is_ok());
  EXPECT_EQ(store.memory_bytes(), 3u * PagePool::kPageBytes);
  EXPECT_EQ(pool->pages_in_use(), 3u);
  ASSERT_TRUE(store.insert(record_for(0)).is_ok());
  EXPECT_EQ(store.memory_bytes(), 4u * PagePool::kPageBytes);
}

TEST(RowStoreTest, TinyAndHugeRecords) {
  auto pool = make_pool(16 << 20);
  RowStore tiny(*pool, 1);
  RowStore huge(*pool, kMaxRecordBytes);
  const std::byte one[] = {std::byte{7}};
  const RowId t = tiny.insert(one).value();
  EXPECT_EQ(tiny.get(t)[0], std::byte{7});
  EXPECT_EQ(huge.rows_per_page(), 1u);
  std::vector<std::byte> big(kMaxRecordBytes, std::byte{3});
  const RowId a = huge.insert(big).value();
  const RowId b = huge.insert(big).value();
  EXPECT_NE(a, b);
  EXPECT_EQ(huge.get(b)[kMaxRecordBytes - 1], std::byte{3});
  EXPECT_EQ(scan_all(huge, 1).size(), 2u);
}

}  // namespace
}  // namespace fjord::engine::storage
