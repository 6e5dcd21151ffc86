// Schema vocabulary: type facts, validate_table's messages, hash_key quality.
#include "fjord/engine/schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace fjord::engine {
namespace {

TableDef valid_table() {
  TableDef t;
  t.name = "t1";
  t.columns = {{"id", ColumnType::kUint64, 0, false},
               {"name", ColumnType::kVarChar, 40, true},
               {"code", ColumnType::kChar, 3, false},
               {"score", ColumnType::kInt32, 4, true}};
  t.primary_key = {0};
  t.indexes = {{"by_name", IndexKind::kOrdered, {1, 3}, 0}, {"by_code", IndexKind::kUnique, {2}, 0}};
  return t;
}

std::string error_of(const TableDef& t) {
  const Status s = validate_table(t);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(SchemaTest, TypeFacts) {
  EXPECT_STREQ(column_type_name(ColumnType::kInt32), "INT32");
  EXPECT_STREQ(column_type_name(ColumnType::kUint64), "UINT64");
  EXPECT_STREQ(column_type_name(ColumnType::kVarChar), "VARCHAR");
  EXPECT_STREQ(column_type_name(static_cast<ColumnType>(99)), "UNKNOWN");
  EXPECT_EQ(integer_width(ColumnType::kInt32), 4u);
  EXPECT_EQ(integer_width(ColumnType::kUint32), 4u);
  EXPECT_EQ(integer_width(ColumnType::kInt64), 8u);
  EXPECT_EQ(integer_width(ColumnType::kUint64), 8u);
  EXPECT_EQ(integer_width(ColumnType::kBinary), 0u);
  EXPECT_EQ(integer_width(ColumnType::kVarChar), 0u);
  EXPECT_TRUE(is_variable_length(ColumnType::kVarBinary));
  EXPECT_TRUE(is_variable_length(ColumnType::kVarChar));
  EXPECT_FALSE(is_variable_length(ColumnType::kChar));
  EXPECT_FALSE(is_variable_length(ColumnType::kInt64));
}

TEST(SchemaTest, ColumnIndexFindsByName) {
  const TableDef t = valid_table();
  EXPECT_EQ(t.column_index("id"), 0);
  EXPECT_EQ(t.column_index("score"), 3);
  EXPECT_EQ(t.column_index("nope"), -1);
  EXPECT_EQ(t.column_index(""), -1);
}

TEST(SchemaTest, ValidTablePasses) { EXPECT_TRUE(validate_table(valid_table()).is_ok()); }

TEST(SchemaTest, TableAndColumnErrorsNameTheCulprit) {
  TableDef t = valid_table();
  t.name = "";
  EXPECT_EQ(error_of(t), "table name is empty");
  t = valid_table();
  t.columns.clear();
  EXPECT_EQ(error_of(t), "table 't1': has no columns");
  t = valid_table();
  t.columns.resize(kMaxColumns + 1, ColumnDef{"x", ColumnType::kUint32, 0, false});
  EXPECT_EQ(error_of(t), "table 't1': has 129 columns, at most 128");
  t = valid_table();
  t.columns[2].name = "";
  EXPECT_EQ(error_of(t), "table 't1': column 2 has an empty name");
  t = valid_table();
  t.columns[3].name = "name";
  EXPECT_EQ(error_of(t), "table 't1': column 'name' is defined twice");
  t = valid_table();
  t.columns[2].type = static_cast<ColumnType>(42);
  EXPECT_EQ(error_of(t), "table 't1': column 'code' has unknown type 42");
  t = valid_table();
  t.columns[1].length = 0;
  EXPECT_EQ(error_of(t), "table 't1': column 'name' (VARCHAR) has length 0, outside 1..8000");
  t.columns[1].length = 8001;
  EXPECT_EQ(error_of(t), "table 't1': column 'name' (VARCHAR) has length 8001, outside 1..8000");
  t = valid_table();
  t.columns[3].length = 8;
  EXPECT_EQ(error_of(t), "table 't1': column 'score' (INT32) has length 8; an integer column takes 0 or 4");
}

TEST(SchemaTest, PrimaryKeyErrors) {
  TableDef t = valid_table();
  t.primary_key.clear();
  EXPECT_EQ(error_of(t), "table 't1': primary key has no columns");
  t.primary_key = {0, 7};
  EXPECT_EQ(error_of(t), "table 't1': primary key names column position 7 but the table has 4 columns");
  t.primary_key = {0, 0};
  EXPECT_EQ(error_of(t), "table 't1': primary key lists column 'id' twice");
  t.primary_key = {3};
  EXPECT_EQ(error_of(t), "table 't1': primary key column 'score' is nullable");
  t.primary_key.assign(kMaxKeyColumns + 1, 0);
  EXPECT_EQ(error_of(t), "table 't1': primary key has 17 columns, at most 16");
  t = valid_table();
  t.columns[1] = {"long", ColumnType::kVarBinary, 600, false};
  t.primary_key = {1};
  EXPECT_EQ(error_of(t), "table 't1': primary key can encode to 1202 bytes, at most 1024");
}

TEST(SchemaTest, IndexErrors) {
  TableDef t = valid_table();
  t.indexes[1].name = "";
  EXPECT_EQ(error_of(t), "table 't1': index 1 has an empty name");
  t = valid_table();
  t.indexes[1].name = "by_name";
  EXPECT_EQ(error_of(t), "table 't1': index 'by_name' is defined twice");
  t = valid_table();
  t.indexes[0].kind = static_cast<IndexKind>(9);
  EXPECT_EQ(error_of(t), "table 't1': index 'by_name' has unknown kind 9");
  t = valid_table();
  t.indexes[0].columns.clear();
  EXPECT_EQ(error_of(t), "table 't1': index 'by_name' has no columns");
  t.indexes[0].columns = {1, 1};
  EXPECT_EQ(error_of(t), "table 't1': index 'by_name' lists column 'name' twice");
  t.indexes[0].columns = {4};
  EXPECT_EQ(error_of(t), "table 't1': index 'by_name' names column position 4 but the table has 4 columns");
}

TEST(SchemaTest, NamesAndTheIndexCountHaveLimitsThatTheMessageNames) {
  TableDef t = valid_table();
  t.name = std::string(kMaxNameBytes + 1, 't');
  EXPECT_EQ(error_of(t), "table name has 129 bytes, at most 128");
  t = valid_table();
  t.columns[1].name = std::string(kMaxNameBytes + 1, 'c');
  EXPECT_EQ(error_of(t), "table 't1': column 1's name has 129 bytes, at most 128");
  t = valid_table();
  t.indexes[0].name = std::string(kMaxNameBytes + 1, 'i');
  EXPECT_EQ(error_of(t), "table 't1': index 0's name has 129 bytes, at most 128");
  t = valid_table();
  t.indexes.clear();
  for (uint32_t i = 0; i <= kMaxIndexes; ++i)
    t.indexes.push_back({"i" + std::to_string(i), IndexKind::kOrdered, {1}, 0});
  EXPECT_EQ(error_of(t), "table 't1': has 65 indexes, at most 64");
  t.indexes.pop_back();
  t.name = std::string(kMaxNameBytes, 't');
  t.columns[1].name = std::string(kMaxNameBytes, 'c');
  EXPECT_TRUE(validate_table(t).is_ok());
}

TEST(SchemaTest, PartitionAndRowSizeLimits) {
  TableDef t = valid_table();
  t.partitions = kMaxPartitions + 1;
  EXPECT_EQ(error_of(t), "table 't1': has 1025 partitions, at most 1024");
  t = valid_table();
  // 1 bitmap byte + 8 + (2 + 40) + 3 + 4 + 4 * 8000
  for (int i = 0; i < 4; ++i) t.columns.push_back({"blob" + std::to_string(i), ColumnType::kBinary, 8000, false});
  EXPECT_EQ(error_of(t), "table 't1': a row takes 32058 bytes, at most 30000");
}

uint64_t hash_of(std::string_view text) { return hash_key(text.data(), text.size()); }

TEST(SchemaTest, HashIsStableAcrossBuilds) {
  // Pinned outputs: rows are placed in partitions by them, so a change here
  // would move data between partitions and nodes.
  EXPECT_EQ(hash_of(""), 0xfebc69596841b1aeULL);
  EXPECT_EQ(hash_of("a"), 0x16b02ece13feddebULL);
  EXPECT_EQ(hash_of("ab"), 0xfe59de4f0dde1466ULL);
  EXPECT_EQ(hash_of(std::string_view("ab\0", 3)), 0x1be6a1d3673c567fULL);
  EXPECT_EQ(hash_of("the quick brown fox jumps over"), 0x39e811d1b21e083cULL);
  const uint64_t word = 0x0123456789abcdefULL;
  EXPECT_EQ(hash_key(&word, sizeof word), 0xd9fecf362e33660eULL);
}

TEST(SchemaTest, HashSeesLengthAndEveryByte) {
  std::vector<uint64_t> seen;
  const std::string zeros(64, '\0');
  for (std::size_t n = 0; n <= zeros.size(); ++n) seen.push_back(hash_key(zeros.data(), n));
  for (int b = 0; b < 256; ++b) {
    std::string s = "0123456789abcdef";
    s[b % 16] = static_cast<char>(b);
    if (s != "0123456789abcdef") seen.push_back(hash_of(s));
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

TEST(SchemaTest, HashAvalanche) {
  // Flipping any one input bit flips each output bit about half the time.
  std::mt19937_64 rng(12345);
  constexpr int kTrials = 400;
  std::vector<int> flips_per_output_bit(64, 0);
  int total_inputs = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    unsigned char key[12];
    for (auto& b : key) b = static_cast<unsigned char>(rng());
    const uint64_t base = hash_key(key, sizeof key);
    for (int bit = 0; bit < 8 * static_cast<int>(sizeof key); ++bit) {
      key[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      const uint64_t diff = base ^ hash_key(key, sizeof key);
      key[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      for (int out = 0; out < 64; ++out) flips_per_output_bit[out] += static_cast<int>((diff >> out) & 1);
      ++total_inputs;
    }
  }
  for (int out = 0; out < 64; ++out) {
    const double rate = static_cast<double>(flips_per_output_bit[out]) / total_inputs;
    EXPECT_NEAR(rate, 0.5, 0.02) << "output bit " << out;
  }
}

TEST(SchemaTest, SequentialKeysSpreadOverBucketsAndPartitions) {
  constexpr uint32_t kBuckets = 1024;
  constexpr uint32_t kPartitions = 12;
  constexpr uint64_t kKeys = 1 << 20;
  std::vector<uint32_t> low(kBuckets, 0), partition(kPartitions, 0);
  for (uint64_t k = 0; k < kKeys; ++k) {
    const uint64_t h = hash_key(&k, sizeof k);
    ++low[h % kBuckets];
    ++partition[partition_of(h, kPartitions)];
  }
  // Chi-square of a uniform spread is about (cells - 1) +- sqrt(2 (cells - 1));
  // allow five standard deviations, and no cell six deviations out.
  const auto check = [](const std::vector<uint32_t>& counts, const char* what) {
    const double expected = static_cast<double>(kKeys) / static_cast<double>(counts.size());
    double chi_square = 0;
    for (uint32_t c : counts) {
      chi_square += (c - expected) * (c - expected) / expected;
      EXPECT_NEAR(c, expected, 6 * std::sqrt(expected)) << what;
    }
    const double dof = static_cast<double>(counts.size() - 1);
    EXPECT_LT(chi_square, dof + 5 * std::sqrt(2 * dof)) << what;
  };
  check(low, "low bits");
  check(partition, "partition_of");
}

}  // namespace
}  // namespace fjord::engine
