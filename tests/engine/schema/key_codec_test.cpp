// The key encoding: memcmp order equals tuple order (NULLs, signs, prefixes of
// var strings), prefixes of the columns bound their extensions, decode
// inverts encode, comparing a key with a record in place agrees with
// encoding the record, and bad values or bytes get messages naming the column.
#include "fjord/engine/key_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fjord/engine/row_layout.h"

namespace fjord::engine {
namespace {

// One column of every type; some nullable.
TableDef every_type_table() {
  TableDef t;
  t.name = "t";
  t.columns = {{"i32", ColumnType::kInt32, 0, true},   {"u32", ColumnType::kUint32, 0, false},
               {"i64", ColumnType::kInt64, 0, true},   {"u64", ColumnType::kUint64, 0, false},
               {"bin", ColumnType::kBinary, 3, false}, {"vbin", ColumnType::kVarBinary, 6, true},
               {"chr", ColumnType::kChar, 2, true},    {"vchr", ColumnType::kVarChar, 5, false}};
  t.primary_key = {1};
  t.indexes = {{"ix", IndexKind::kOrdered, {0, 1, 2, 3, 4, 5, 6, 7}, 0}};
  return t;
}

// A value the test owns (ValueRef only borrows).
struct Value {
  bool is_null = false;
  std::vector<std::byte> bytes;  // little-endian for integers
  ValueRef ref() const { return is_null ? ValueRef::null() : ValueRef::of_bytes(bytes); }
};
using Tuple = std::vector<Value>;

int sign(int v) { return (v > 0) - (v < 0); }

// The model: NULL first, integers by number, byte strings lexicographically
// (unsigned bytes, a proper prefix first).
int compare_value(const ColumnDef& column, const Value& a, const Value& b) {
  if (a.is_null || b.is_null) return static_cast<int>(b.is_null) - static_cast<int>(a.is_null);
  switch (column.type) {
    case ColumnType::kInt32: {
      const int32_t x = ValueRef::of_bytes(a.bytes).as_int32(), y = ValueRef::of_bytes(b.bytes).as_int32();
      return (x > y) - (x < y);
    }
    case ColumnType::kUint32: {
      const uint32_t x = ValueRef::of_bytes(a.bytes).as_uint32(), y = ValueRef::of_bytes(b.bytes).as_uint32();
      return (x > y) - (x < y);
    }
    case ColumnType::kInt64: {
      const int64_t x = ValueRef::of_bytes(a.bytes).as_int64(), y = ValueRef::of_bytes(b.bytes).as_int64();
      return (x > y) - (x < y);
    }
    case ColumnType::kUint64: {
      const uint64_t x = ValueRef::of_bytes(a.bytes).as_uint64(), y = ValueRef::of_bytes(b.bytes).as_uint64();
      return (x > y) - (x < y);
    }
    default: {
      const auto less = [](std::byte x, std::byte y) { return std::to_integer<int>(x) < std::to_integer<int>(y); };
      if (std::lexicographical_compare(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end(), less)) {
        return -1;
      }
      return std::lexicographical_compare(b.bytes.begin(), b.bytes.end(), a.bytes.begin(), a.bytes.end(), less) ? 1 : 0;
    }
  }
}

int compare_tuple(const KeyCodec& codec, const Tuple& a, const Tuple& b, std::size_t columns) {
  for (std::size_t i = 0; i < columns; ++i) {
    if (int c = compare_value(codec.column(static_cast<uint32_t>(i)).def, a[i], b[i]); c != 0) return c;
  }
  return 0;
}

int compare_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n != 0) {
    if (int c = std::memcmp(a.data(), b.data(), n); c != 0) return sign(c);
  }
  return (a.size() > b.size()) - (a.size() < b.size());
}

class TupleMaker {
 public:
  explicit TupleMaker(uint64_t seed) : rng_(seed) {}

  Tuple make(const KeyCodec& codec) {
    Tuple t;
    for (uint32_t i = 0; i < codec.column_count(); ++i) t.push_back(make_value(codec.column(i).def));
    return t;
  }

 private:
  Value make_value(const ColumnDef& column) {
    Value v;
    if (column.nullable && pick(5) == 0) {
      v.is_null = true;
      return v;
    }
    if (const uint32_t width = integer_width(column.type); width != 0) {
      // Few distinct numbers so ties push the comparison to later columns.
      const int64_t choices[] = {INT64_MIN, INT32_MIN, -256, -1, 0, 1, 255, 256, INT32_MAX, INT64_MAX};
      int64_t n = choices[pick(10)];
      if (pick(4) == 0) n = static_cast<int64_t>(rng_());
      v.bytes.resize(width);
      std::memcpy(v.bytes.data(), &n, width);  // low bytes: wraps into the type's range
      return v;
    }
    const std::size_t length = is_variable_length(column.type) ? pick(column.length + 1) : column.length;
    // A tiny alphabet with 0x00 and 0xFF: many values are prefixes of others.
    const unsigned char alphabet[] = {0x00, 0x01, 0x61, 0xFE, 0xFF};
    for (std::size_t i = 0; i < length; ++i) v.bytes.push_back(std::byte{alphabet[pick(5)]});
    return v;
  }
  std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

  std::mt19937_64 rng_;
};

std::vector<std::byte> encode(const KeyCodec& codec, const Tuple& t, std::size_t columns) {
  std::vector<ValueRef> refs;
  for (std::size_t i = 0; i < columns; ++i) refs.push_back(t[i].ref());
  std::vector<std::byte> out(codec.max_encoded_bytes());
  Result<uint32_t> n = codec.encode(refs, out);
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  out.resize(n.is_ok() ? n.value() : 0);
  return out;
}

class KeyCodecTest : public ::testing::Test {
 protected:
  TableDef table_ = every_type_table();
  KeyCodec codec_ = KeyCodec::for_index(table_, table_.indexes[0]);
};

TEST_F(KeyCodecTest, MemcmpOrderIsTupleOrderOnRandomTuples) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TupleMaker maker(seed);
  std::vector<Tuple> tuples;
  std::vector<std::vector<std::byte>> keys;
  for (int i = 0; i < 3000; ++i) {
    tuples.push_back(maker.make(codec_));
    keys.push_back(encode(codec_, tuples.back(), codec_.column_count()));
  }
  std::mt19937_64 rng(seed);
  int equal_pairs = 0;
  for (int n = 0; n < 300000; ++n) {
    const std::size_t a = rng() % tuples.size(), b = rng() % tuples.size();
    const int model = compare_tuple(codec_, tuples[a], tuples[b], codec_.column_count());
    ASSERT_EQ(compare_bytes(keys[a], keys[b]), model) << "tuples " << a << " and " << b;
    equal_pairs += model == 0 ? 1 : 0;
  }
  EXPECT_GT(equal_pairs, 0);  // the pairs include equal keys (at least a == b)
}

TEST_F(KeyCodecTest, VarStringsThatArePrefixesOfEachOtherSortShortestFirst) {
  TableDef t;
  t.name = "v";
  t.columns = {{"s", ColumnType::kVarBinary, 8, false}, {"n", ColumnType::kUint32, 0, false}};
  t.primary_key = {0, 1};
  const KeyCodec codec = KeyCodec::for_primary_key(t);
  // Sorted by the model; "a" < "a\0" < "a\0\0" < "a\x01" < "ab"; the second column must not leak in.
  const std::vector<std::string> strings = {
      "", std::string("\0", 1), "a", std::string("a\0", 2), std::string("a\0\0", 3), "a\x01", "ab", "b"};
  std::vector<std::vector<std::byte>> keys;
  for (const std::string& s : strings) {
    const uint32_t big = 0xFFFFFFFF;
    const ValueRef values[] = {ValueRef::of_string(s), ValueRef::of(big)};
    std::vector<std::byte> out(codec.max_encoded_bytes());
    out.resize(codec.encode(values, out).value());
    keys.push_back(out);
  }
  for (std::size_t i = 1; i < keys.size(); ++i) EXPECT_LT(compare_bytes(keys[i - 1], keys[i]), 0) << i;
}

TEST_F(KeyCodecTest, PrefixOfColumnsBoundsEveryExtension) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TupleMaker maker(seed);
  std::mt19937_64 rng(seed + 1);
  for (int n = 0; n < 20000; ++n) {
    const Tuple bound = maker.make(codec_);
    const Tuple key = maker.make(codec_);
    const std::size_t k = rng() % (codec_.column_count() + 1);
    const std::vector<std::byte> prefix = encode(codec_, bound, k);
    const std::vector<std::byte> full_bound = encode(codec_, bound, codec_.column_count());
    ASSERT_TRUE(std::equal(prefix.begin(), prefix.end(), full_bound.begin())) << "prefix of its own full key";
    const std::vector<std::byte> full = encode(codec_, key, codec_.column_count());
    const int model = compare_tuple(codec_, bound, key, k);
    const bool starts_with = full.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), full.begin());
    if (model == 0) {
      ASSERT_TRUE(starts_with) << "k=" << k;
    } else {
      ASSERT_FALSE(starts_with) << "k=" << k;
      ASSERT_EQ(compare_bytes(prefix, full), model) << "k=" << k;
    }
  }
}

TEST_F(KeyCodecTest, DecodeInvertsEncodeForKeysAndPrefixes) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TupleMaker maker(seed);
  for (int n = 0; n < 5000; ++n) {
    const Tuple t = maker.make(codec_);
    const std::size_t k = static_cast<std::size_t>(n) % (codec_.column_count() + 1);
    const std::vector<std::byte> key = encode(codec_, t, k);
    std::vector<std::byte> scratch(key.size());
    std::vector<ValueRef> values(codec_.column_count());
    Result<uint32_t> decoded = codec_.decode(key, scratch, values);
    ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
    ASSERT_EQ(decoded.value(), k);
    for (std::size_t i = 0; i < k; ++i) ASSERT_TRUE(same_value(values[i], t[i].ref())) << "column " << i;
  }
}

TEST_F(KeyCodecTest, IntegerEdgesRoundTrip) {
  const int32_t i32 = INT32_MIN;
  const uint32_t u32 = UINT32_MAX;
  const int64_t i64 = -1;
  const uint64_t u64 = 0;
  const ValueRef values[] = {ValueRef::of(i32),         ValueRef::of(u32),          ValueRef::of(i64),
                             ValueRef::of(u64),         ValueRef::of_string("xyz"), ValueRef::null(),
                             ValueRef::of_string("ab"), ValueRef::of_string("")};
  std::vector<std::byte> key(codec_.max_encoded_bytes());
  key.resize(codec_.encode(values, key).value());
  // 1+4 (nullable INT32) + 4 + 1+8 + 8 + 3 + 1 (NULL) + 1+2 + 2 (empty var) = 35
  EXPECT_EQ(key.size(), 35u);
  std::vector<std::byte> scratch(key.size());
  std::vector<ValueRef> out(codec_.column_count());
  ASSERT_EQ(codec_.decode(key, scratch, out).value(), 8u);
  EXPECT_EQ(out[0].as_int32(), INT32_MIN);
  EXPECT_EQ(out[1].as_uint32(), UINT32_MAX);
  EXPECT_EQ(out[2].as_int64(), -1);
  EXPECT_EQ(out[3].as_uint64(), 0u);
  EXPECT_EQ(out[4].as_string(), "xyz");
  EXPECT_TRUE(out[5].is_null);
  EXPECT_EQ(out[6].as_string(), "ab");
  EXPECT_EQ(out[7].as_string(), "");
}

TEST_F(KeyCodecTest, MaxEncodedBytesIsTheWorstCase) {
  // 5 + 4 + 9 + 8 + 3 + (1 + 2*6 + 2) + (1 + 2) + (2*5 + 2)
  EXPECT_EQ(codec_.max_encoded_bytes(), 59u);
  EXPECT_FALSE(codec_.fixed_width());
  EXPECT_TRUE(KeyCodec::for_primary_key(table_).fixed_width());
  const std::vector<std::byte> zeros(6, std::byte{0});
  const int32_t a = 1;
  const uint32_t b = 2;
  const int64_t c = 3;
  const uint64_t d = 4;
  const ValueRef values[] = {ValueRef::of(a),
                             ValueRef::of(b),
                             ValueRef::of(c),
                             ValueRef::of(d),
                             ValueRef::of_string("bin"),
                             ValueRef::of_bytes(zeros),
                             ValueRef::of_string("cc"),
                             ValueRef::of_bytes(std::span(zeros).first(5))};
  std::vector<std::byte> key(codec_.max_encoded_bytes());
  EXPECT_EQ(codec_.encode(values, key).value(), 59u);
}

// record_matches(record, key) must answer exactly "encode_record(record) ==
// key": against random tuples, and against every truncation, extension and
// one-byte change of a matching key.
void expect_record_matches_agrees(const TableDef& table, const KeyCodec& codec, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  TupleMaker maker(seed);
  const RowLayout layout = RowLayout::create(table).value();
  std::vector<std::vector<std::byte>> records;
  std::vector<std::vector<std::byte>> keys;
  for (int i = 0; i < 400; ++i) {
    const Tuple t = maker.make(codec);
    std::vector<std::byte> record(layout.record_bytes());
    layout.init_record(record);
    for (uint32_t c = 0; c < codec.column_count(); ++c)
      ASSERT_TRUE(layout.set(record, codec.column(c).position, t[c].ref()).is_ok());
    records.push_back(record);
    keys.push_back(encode(codec, t, codec.column_count()));
    std::vector<std::byte> from_record(codec.max_encoded_bytes());
    from_record.resize(codec.encode_record(layout, record, from_record));
    ASSERT_EQ(from_record, keys.back());
  }
  int matches = 0;
  for (std::size_t a = 0; a < records.size(); ++a) {
    for (std::size_t b = 0; b < keys.size(); ++b) {
      const bool same = keys[a] == keys[b];
      ASSERT_EQ(codec.record_matches(layout, records[a], keys[b]), same) << "record " << a << ", key " << b;
      matches += same ? 1 : 0;
    }
    std::vector<std::byte> key = keys[a];
    for (std::size_t n = 0; n < key.size(); ++n)
      ASSERT_FALSE(codec.record_matches(layout, records[a], std::span(key).first(n))) << "prefix " << n;
    for (const std::byte extra : {std::byte{0x00}, std::byte{0x01}, std::byte{0xFF}}) {
      key.push_back(extra);
      ASSERT_FALSE(codec.record_matches(layout, records[a], key)) << "extended by " << static_cast<int>(extra);
      key.pop_back();
    }
    for (std::size_t i = 0; i < key.size(); ++i) {
      key[i] ^= std::byte{0x01};
      ASSERT_FALSE(codec.record_matches(layout, records[a], key)) << "byte " << i << " changed";
      key[i] ^= std::byte{0x01};
    }
  }
  EXPECT_GE(matches, static_cast<int>(records.size()));
}

// Every type: NULLs, var strings of 0x00 and 0xFF that are prefixes of each
// other, integer edges.
TEST_F(KeyCodecTest, RecordMatchesAgreesWithEncodingTheRecord) {
  expect_record_matches_agrees(table_, codec_, std::random_device{}());
}

// A key of non-nullable integers (the common primary key) is compared by
// its own path: signed and unsigned, 4 and 8 bytes, in an order that is not
// the table's, after a column that is not in the key.
TEST(KeyCodecIntegerKeyTest, RecordMatchesAgreesWithEncodingTheRecord) {
  TableDef t;
  t.name = "ints";
  t.columns = {{"pad", ColumnType::kBinary, 3, false},
               {"i32", ColumnType::kInt32, 0, false},
               {"u64", ColumnType::kUint64, 0, false},
               {"i64", ColumnType::kInt64, 0, false},
               {"u32", ColumnType::kUint32, 0, false}};
  t.primary_key = {3, 1, 4, 2};
  const KeyCodec codec = KeyCodec::for_primary_key(t);
  ASSERT_TRUE(codec.integer_key());
  expect_record_matches_agrees(t, codec, std::random_device{}());
  // Located in the table's records (as the LDM's codecs are): the inline
  // compare at fixed offsets agrees too, seed for seed.
  KeyCodec located = KeyCodec::for_primary_key(t);
  located.locate(RowLayout::create(t).value());
  const uint64_t seed = std::random_device{}();
  expect_record_matches_agrees(t, located, seed);
  expect_record_matches_agrees(t, codec, seed);
}

// A key that is not all integers is not located: its compare stays the
// general one, and agrees.
TEST_F(KeyCodecTest, LocatingAKeyOfOtherTypesChangesNothing) {
  KeyCodec located = codec_;
  located.locate(RowLayout::create(table_).value());
  expect_record_matches_agrees(table_, located, std::random_device{}());
}

std::string encode_error(const KeyCodec& codec, const std::vector<ValueRef>& values, std::size_t buffer = 1024) {
  std::vector<std::byte> out(buffer);
  Result<uint32_t> r = codec.encode(values, out);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

TEST_F(KeyCodecTest, EncodeErrorsNameTheColumn) {
  const int32_t i32 = 5;
  const uint64_t u64 = 5;
  const uint32_t u32 = 7;
  EXPECT_EQ(encode_error(codec_, {ValueRef::null(), ValueRef::null()}),
            "index 'ix' of table 't': column 'u32' (UINT32) is not nullable, got NULL");
  EXPECT_EQ(encode_error(codec_, {ValueRef::of(i32), ValueRef::of(u64)}),
            "index 'ix' of table 't': column 'u32' (UINT32) needs 4 bytes, got 8");
  const std::vector<ValueRef> upto_bin = {ValueRef::of(i32), ValueRef::of(u32), ValueRef::null(), ValueRef::of(u64),
                                          ValueRef::of_string("ab")};
  EXPECT_EQ(encode_error(codec_, upto_bin),
            "index 'ix' of table 't': column 'bin' (BINARY(3)) needs exactly 3 bytes, got 2");
  std::vector<ValueRef> upto_vbin = upto_bin;
  upto_vbin[4] = ValueRef::of_string("abc");
  upto_vbin.push_back(ValueRef::of_string("1234567"));
  EXPECT_EQ(encode_error(codec_, upto_vbin),
            "index 'ix' of table 't': column 'vbin' (VARBINARY(6)) takes at most 6 bytes, got 7");
  EXPECT_EQ(encode_error(codec_, std::vector<ValueRef>(9, ValueRef::null())),
            "index 'ix' of table 't': 9 values for a key of 8 columns");
  EXPECT_EQ(encode_error(codec_, {ValueRef::of(i32), ValueRef::of(u32)}, 8),
            "index 'ix' of table 't': the key needs 9 bytes but the buffer has 8");
}

std::string decode_error(const KeyCodec& codec, std::vector<unsigned char> raw) {
  std::vector<std::byte> key(raw.size());
  std::memcpy(key.data(), raw.data(), raw.size());
  std::vector<std::byte> scratch(key.size());
  std::vector<ValueRef> values(codec.column_count());
  Result<uint32_t> r = codec.decode(key, scratch, values);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

TEST_F(KeyCodecTest, DecodeRejectsMalformedBytes) {
  TableDef t;
  t.name = "d";
  t.columns = {{"n", ColumnType::kUint32, 0, true}, {"s", ColumnType::kVarChar, 3, false}};
  t.primary_key = {1};
  t.indexes = {{"ix", IndexKind::kOrdered, {0, 1}, 0}};
  const KeyCodec codec = KeyCodec::for_index(t, t.indexes[0]);
  const std::string p = "index 'ix' of table 'd': ";
  EXPECT_EQ(decode_error(codec, {0x02}), p + "encoded key has a bad NULL marker in column 'n'");
  EXPECT_EQ(decode_error(codec, {0x01, 0, 0}), p + "encoded key ends early in column 'n'");
  EXPECT_EQ(decode_error(codec, {0x00, 'a', 'b'}), p + "encoded key ends without a terminator in column 's'");
  EXPECT_EQ(decode_error(codec, {0x00, 'a', 0x00}), p + "encoded key ends inside an escape in column 's'");
  EXPECT_EQ(decode_error(codec, {0x00, 'a', 0x00, 0x07}), p + "encoded key has a bad escape in column 's'");
  EXPECT_EQ(decode_error(codec, {0x00, 'a', 'b', 'c', 'd', 0x00, 0x00}),
            p + "encoded key is longer than the column in column 's'");
  EXPECT_EQ(decode_error(codec, {0x00, 'a', 0x00, 0x00, 0x09}), p + "1 bytes follow the last key column");
}

TEST(ValueRefTest, HelpersBorrowAndReadBack) {
  const int64_t n = -42;
  const ValueRef v = ValueRef::of(n);
  EXPECT_FALSE(v.is_null);
  EXPECT_EQ(v.bytes.size(), 8u);
  EXPECT_EQ(v.bytes.data(), reinterpret_cast<const std::byte*>(&n));
  EXPECT_EQ(v.as_int64(), -42);
  EXPECT_EQ(ValueRef::of_string("hey").as_string(), "hey");
  EXPECT_TRUE(ValueRef::null().is_null);
  EXPECT_TRUE(same_value(ValueRef::null(), ValueRef::null()));
  EXPECT_FALSE(same_value(ValueRef::null(), ValueRef::of_string("")));
  EXPECT_TRUE(same_value(ValueRef::of_string(""), ValueRef::of_string("")));
  EXPECT_FALSE(same_value(ValueRef::of_string("a"), ValueRef::of_string("b")));
}

}  // namespace
}  // namespace fjord::engine
