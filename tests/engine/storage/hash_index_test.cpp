// HashIndex against a std::unordered_map model, with keys compared through
// real rows (RowKeySource), growth by linear hashing, forced collisions and
// DataMemory exhaustion.
#include "fjord/engine/storage/hash_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "storage_test_util.h"

namespace fjord::engine::storage {
namespace {

using testing::make_pool;
using testing::test_seed;
using testing::TestTable;

uint64_t hash_of(const std::vector<std::byte>& key) { return hash_key(key.data(), key.size()); }

TEST(HashIndexTest, MatchesAModelUnderRandomOperations) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pool = make_pool(128 << 20);
  TestTable table(*pool, 16, 8);
  HashIndex index(*pool, table.pk_keys);
  std::unordered_map<uint64_t, RowId> model;  // id -> row
  std::vector<uint64_t> ids;
  for (int step = 0; step < 300000; ++step) {
    const uint64_t op = rng() % 100;
    const bool growing = (step / 50000) % 2 == 0;
    if (ids.empty() || op < (growing ? 50u : 25u)) {
      const uint64_t id = rng() % 1000000;
      const std::vector<std::byte> key = table.pk_key(id);
      if (model.count(id)) {
        const Status s = index.insert(hash_of(key), key, model[id]);
        ASSERT_EQ(s.code(), StatusCode::kAlreadyExists);
        EXPECT_EQ(s.message(), "the key is already in the hash index");
        continue;
      }
      const RowId row = table.rows.insert(table.record(id, "n")).value();
      ASSERT_TRUE(index.insert(hash_of(key), key, row).is_ok());
      model[id] = row;
      ids.push_back(id);
    } else if (op < 70) {
      const std::size_t i = rng() % ids.size();
      const std::vector<std::byte> key = table.pk_key(ids[i]);
      const RowId row = model[ids[i]];
      ASSERT_TRUE(index.erase(hash_of(key), row).is_ok());  // index first, then the row
      table.rows.erase(row);
      model.erase(ids[i]);
      ids[i] = ids.back();
      ids.pop_back();
    } else {
      const uint64_t id = op < 85 && !ids.empty() ? ids[rng() % ids.size()] : rng() % 1000000;
      const std::vector<std::byte> key = table.pk_key(id);
      const auto it = model.find(id);
      ASSERT_EQ(index.find(hash_of(key), key), it == model.end() ? kNoRow : it->second) << "id " << id;
    }
    ASSERT_EQ(index.entry_count(), model.size());
    if (step % 25000 == 0) {
      ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
    }
  }
  ASSERT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
}

TEST(HashIndexTest, GrowsOneBucketAtATime) {
  auto pool = make_pool(64 << 20);
  TestTable table(*pool, 8, 4);
  HashIndex index(*pool, table.pk_keys);
  uint32_t previous_buckets = 0;
  for (uint64_t id = 0; id < 50000; ++id) {
    const std::vector<std::byte> key = table.pk_key(id);
    const RowId row = table.rows.insert(table.record(id, "x")).value();
    ASSERT_TRUE(index.insert(hash_of(key), key, row).is_ok());
    // Linear hashing: never more than one split per insert.
    ASSERT_LE(index.bucket_count(), previous_buckets + 1);
    previous_buckets = index.bucket_count();
    ASSERT_LE(index.entry_count(), uint64_t{HashIndex::kSplitLoad} * index.bucket_count() + 1);
  }
  EXPECT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  EXPECT_GT(index.bucket_count(), 50000u / HashIndex::kSplitLoad - 2);
  // Bucket pages plus overflow: about 64 / kSplitLoad bytes per entry.
  const double per_entry = static_cast<double>(index.memory_bytes()) / 50000;
  std::printf("hash index: %u buckets, %llu overflow blocks, %.1f bytes per entry\n", index.bucket_count(),
              static_cast<unsigned long long>(index.overflow_blocks()), per_entry);
  EXPECT_LT(per_entry, 20.0);
  for (uint64_t id = 0; id < 50000; ++id) {
    const std::vector<std::byte> key = table.pk_key(id);
    ASSERT_NE(index.find(hash_of(key), key), kNoRow) << id;
  }
}

TEST(HashIndexTest, EqualHashesChainAndStillFindByKey) {
  // Every key gets the same hash: one long chain of overflow blocks, and each
  // lookup must fall back to comparing keys through the rows.
  auto pool = make_pool(16 << 20);
  TestTable table(*pool, 8, 4);
  HashIndex index(*pool, table.pk_keys);
  constexpr uint64_t kSameHash = 0x1234;
  std::vector<RowId> rows;
  for (uint64_t id = 0; id < 300; ++id) {
    rows.push_back(table.rows.insert(table.record(id, "c")).value());
    ASSERT_TRUE(index.insert(kSameHash, table.pk_key(id), rows.back()).is_ok());
  }
  EXPECT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  EXPECT_GT(index.overflow_blocks(), 300u / HashIndex::kEntriesPerBucket - 2);
  for (uint64_t id = 0; id < 300; ++id) ASSERT_EQ(index.find(kSameHash, table.pk_key(id)), rows[id]);
  EXPECT_EQ(index.find(kSameHash, table.pk_key(300)), kNoRow);
  for (uint64_t id = 0; id < 300; id += 2) ASSERT_TRUE(index.erase(kSameHash, rows[id]).is_ok());
  EXPECT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  for (uint64_t id = 0; id < 300; ++id) {
    ASSERT_EQ(index.find(kSameHash, table.pk_key(id)), id % 2 == 0 ? kNoRow : rows[id]);
  }
  const Status missing = index.erase(kSameHash, rows[0]);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "row " + std::to_string(rows[0]) + " is not in the hash index");
}

TEST(HashIndexTest, CandidatesAreTheBucketsRowsWithTheSameHashBits) {
  auto pool = make_pool(16 << 20);
  TestTable table(*pool, 8, 4);
  HashIndex index(*pool, table.pk_keys);
  RowId out[4];
  EXPECT_EQ(index.prefetch_bucket(7), nullptr);  // an empty index has no bucket: nothing happens
  EXPECT_EQ(index.candidates(7, out, 4), 0u);
  // 2000 keys: every one's row is among its candidates unless the key sits
  // in an overflow block (candidates looks at the bucket itself only).
  std::vector<RowId> rows;
  uint32_t found = 0, looked_further = 0, found_further = 0;
  for (uint64_t id = 0; id < 2000; ++id) {
    rows.push_back(table.rows.insert(table.record(id, "c")).value());
    ASSERT_TRUE(index.insert(hash_of(table.pk_key(id)), table.pk_key(id), rows.back()).is_ok());
  }
  std::unordered_map<RowId, uint32_t> hash_of_row;
  for (uint64_t id = 0; id < 2000; ++id) hash_of_row[rows[id]] = static_cast<uint32_t>(hash_of(table.pk_key(id)));
  for (uint64_t id = 0; id < 2000; ++id) {
    const auto hash = static_cast<uint32_t>(hash_of(table.pk_key(id)));
    const void* bucket = index.prefetch_bucket(hash);
    ASSERT_NE(bucket, nullptr);
    const uint32_t n = index.candidates(hash, out, 4);
    ASSERT_LE(n, 4u);
    // Given back the bucket prefetch_bucket found, the same rows.
    RowId again[4];
    ASSERT_EQ(index.candidates(hash, again, 4, bucket), n);
    EXPECT_TRUE(std::equal(out, out + n, again));
    bool here = false;
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(hash_of_row.at(out[i]), hash) << "a candidate with other hash bits";
      here = here || out[i] == rows[id];
    }
    found += here ? 1 : 0;
    // Asked for more: the next block of the chain when the bucket listed
    // nothing and chains on, whose own candidates are then the key's.
    const void* more = bucket;
    ASSERT_EQ(index.candidates(hash, again, 4, bucket, &more), n);
    if (n > 0) {
      EXPECT_EQ(more, nullptr) << "the bucket listed a candidate: nothing more to look at";
      continue;
    }
    ASSERT_NE(more, nullptr) << "key " << id << " is in no bucket and no chain";
    ++looked_further;
    const void* deeper = nullptr;
    const uint32_t m = index.candidates(hash, out, 4, more, &deeper);
    for (uint32_t i = 0; i < m; ++i) ASSERT_EQ(hash_of_row.at(out[i]), hash);
    if (std::find(out, out + m, rows[id]) != out + m)
      ++found_further;
    else
      EXPECT_NE(deeper, nullptr) << "key " << id << " is not in the first overflow block: the chain goes on";
  }
  // At this load (5 entries per 7-entry bucket on average) about 90 % of
  // the keys sit in the bucket itself, the rest in overflow blocks, almost
  // all in the first.
  EXPECT_GT(found, 1600u) << "most keys live in their bucket itself";
  EXPECT_GT(looked_further, 50u) << "some keys sit in overflow blocks";
  EXPECT_EQ(found + looked_further, 2000u);
  EXPECT_GT(found_further, looked_further * 9 / 10);
  // Equal hash bits: at most `max`, all of them rows with that hash.
  HashIndex same(*pool, table.pk_keys);
  for (uint64_t id = 0; id < 5; ++id) ASSERT_TRUE(same.insert(0x1234, table.pk_key(id), rows[id]).is_ok());
  EXPECT_EQ(same.candidates(0x1234, out, 4), 4u);
  for (RowId r : std::span(out, 4)) EXPECT_NE(std::find(rows.begin(), rows.begin() + 5, r), rows.begin() + 5);
  EXPECT_EQ(same.candidates(0x1235, out, 4), 0u);
  // An erased entry stays in the bucket's line past its count (erase moves
  // the last entry into the hole; the last one's own slot is left as it
  // was): it is no candidate and find() does not return it, though its row
  // (still in the table here) has the key.
  ASSERT_TRUE(same.erase(0x1234, rows[4]).is_ok());
  ASSERT_TRUE(same.erase(0x1234, rows[1]).is_ok());
  EXPECT_EQ(same.find(0x1234, table.pk_key(4)), kNoRow);
  EXPECT_EQ(same.find(0x1234, table.pk_key(1)), kNoRow);
  EXPECT_EQ(same.find(0x1234, table.pk_key(3)), rows[3]);
  ASSERT_EQ(same.candidates(0x1234, out, 4), 3u);
  std::sort(out, out + 3);
  const RowId left[3] = {rows[0], rows[2], rows[3]};
  EXPECT_TRUE(std::equal(out, out + 3, left));
}

// A KeySource that only encodes (KeySource's default key_equals: encode the
// row's key, compare bytes), as a source without an in-place compare works.
class EncodingOnlyKeySource final : public KeySource {
 public:
  explicit EncodingOnlyKeySource(const KeySource& inner) : inner_(inner) {}
  uint32_t encoded_key(RowId row, std::span<std::byte> out) const override { return inner_.encoded_key(row, out); }

 private:
  const KeySource& inner_;
};

TEST(HashIndexTest, InPlaceAndEncodingKeyComparesAgreeUnderCollisions) {
  // Every key in 4 hash values: chains of overflow blocks where most hash
  // matches are other keys. Both compares must find exactly the same rows.
  auto pool = make_pool(16 << 20);
  TestTable table(*pool, 8, 4);
  const EncodingOnlyKeySource encoding(table.pk_keys);
  HashIndex in_place(*pool, table.pk_keys);
  HashIndex encoded(*pool, encoding);
  std::vector<RowId> rows;
  for (uint64_t id = 0; id < 400; ++id) {
    rows.push_back(table.rows.insert(table.record(id, "k")).value());
    ASSERT_TRUE(in_place.insert(id % 4, table.pk_key(id), rows.back()).is_ok());
    ASSERT_TRUE(encoded.insert(id % 4, table.pk_key(id), rows.back()).is_ok());
  }
  ASSERT_EQ(in_place.insert(5 % 4, table.pk_key(5), rows[7]).code(), StatusCode::kAlreadyExists);
  for (uint64_t id = 0; id < 400; id += 3) {
    ASSERT_TRUE(in_place.erase(id % 4, rows[id]).is_ok());
    ASSERT_TRUE(encoded.erase(id % 4, rows[id]).is_ok());
  }
  for (uint64_t id = 0; id < 420; ++id) {
    const RowId expected = id >= 400 || id % 3 == 0 ? kNoRow : rows[id];
    for (uint64_t hash = 0; hash < 4; ++hash) {
      const RowId want = hash == id % 4 ? expected : kNoRow;
      ASSERT_EQ(in_place.find(hash, table.pk_key(id)), want) << "id " << id << " hash " << hash;
      ASSERT_EQ(encoded.find(hash, table.pk_key(id)), want) << "id " << id << " hash " << hash;
    }
  }
  EXPECT_TRUE(in_place.check_invariants().is_ok()) << in_place.check_invariants().message();
}

TEST(HashIndexTest, VarcharKeysWithSharedPrefixes) {
  auto pool = make_pool(16 << 20);
  TableDef def;
  def.name = "v";
  def.columns = {{"k", ColumnType::kVarChar, 64, false}};
  def.primary_key = {0};
  const RowLayout layout = RowLayout::create(def).value();
  const KeyCodec pk = KeyCodec::for_primary_key(def);
  RowStore rows(*pool, layout.record_bytes());
  RowKeySource keys(rows, layout, pk);
  HashIndex index(*pool, keys);
  std::vector<std::string> names;
  for (int i = 0; i < 2000; ++i)
    names.push_back(std::string(static_cast<std::size_t>(i % 50), 'a') + std::to_string(i));
  names.push_back("");
  names.push_back(std::string("\0", 1));
  std::vector<RowId> ids;
  for (const std::string& name : names) {
    std::vector<std::byte> record(layout.record_bytes());
    layout.init_record(record);
    ASSERT_TRUE(layout.set(record, 0, ValueRef::of_string(name)).is_ok());
    ids.push_back(rows.insert(record).value());
    std::vector<std::byte> key(pk.max_encoded_bytes());
    const ValueRef v[] = {ValueRef::of_string(name)};
    key.resize(pk.encode(v, key).value());
    ASSERT_TRUE(index.insert(hash_key(key.data(), key.size()), key, ids.back()).is_ok()) << name;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::vector<std::byte> key(pk.max_encoded_bytes());
    const ValueRef v[] = {ValueRef::of_string(names[i])};
    key.resize(pk.encode(v, key).value());
    ASSERT_EQ(index.find(hash_key(key.data(), key.size()), key), ids[i]) << names[i];
  }
}

TEST(HashIndexTest, ExhaustionLeavesTheIndexUsable) {
  auto pool = make_pool(24 * PagePool::kPageBytes);
  TestTable table(*pool, 8, 4);
  HashIndex index(*pool, table.pk_keys);
  std::vector<std::pair<uint64_t, RowId>> inserted;
  Status failure;
  for (uint64_t id = 0; failure.is_ok(); ++id) {
    Result<RowId> row = table.rows.insert(table.record(id, "e"));
    if (!row.is_ok()) {
      failure = row.status();
      break;
    }
    const std::vector<std::byte> key = table.pk_key(id);
    failure = index.insert(hash_of(key), key, row.value());
    if (failure.is_ok()) {
      inserted.emplace_back(id, row.value());
    } else {
      table.rows.erase(row.value());
    }
  }
  EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(failure.message(), "DataMemory full: 24 of 24 pages in use (DataMemory=768K)");
  EXPECT_TRUE(index.check_invariants().is_ok()) << index.check_invariants().message();
  ASSERT_EQ(index.entry_count(), inserted.size());
  for (const auto& [id, row] : inserted) {
    const std::vector<std::byte> key = table.pk_key(id);
    ASSERT_EQ(index.find(hash_of(key), key), row) << id;
  }
}

}  // namespace
}  // namespace fjord::engine::storage
