// The record layout: sizes, get/set round trips against a model, NULLs,
// values that do not fit, and key encoding straight from a record.
#include "fjord/engine/row_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace fjord::engine {
namespace {

TableDef mixed_table() {
  TableDef t;
  t.name = "rows";
  t.columns = {{"id", ColumnType::kUint64, 0, false}, {"a", ColumnType::kInt32, 0, true},
               {"b", ColumnType::kVarChar, 10, true}, {"c", ColumnType::kBinary, 4, false},
               {"d", ColumnType::kInt64, 8, false},   {"e", ColumnType::kVarBinary, 300, false},
               {"f", ColumnType::kChar, 2, true},     {"g", ColumnType::kUint32, 0, true}};
  t.primary_key = {0, 3};
  return t;
}

TEST(RowLayoutTest, RecordSizeIsBitmapPlusSlots) {
  const RowLayout layout = RowLayout::create(mixed_table()).value();
  // 4 nullable columns -> 1 bitmap byte; slots 8 + 4 + (2+10) + 4 + 8 + (2+300) + 2 + 4
  EXPECT_EQ(layout.record_bytes(), 1u + 8 + 4 + 12 + 4 + 8 + 302 + 2 + 4);
  EXPECT_EQ(layout.column_count(), 8u);
  EXPECT_EQ(layout.column(5).name, "e");
}

TEST(RowLayoutTest, CreateRejectsAnInvalidTable) {
  TableDef t = mixed_table();
  t.primary_key = {1};
  Result<RowLayout> r = RowLayout::create(t);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "table 'rows': primary key column 'a' is nullable");
}

TEST(RowLayoutTest, InitRecordMakesNullableColumnsNull) {
  const RowLayout layout = RowLayout::create(mixed_table()).value();
  std::vector<std::byte> record(layout.record_bytes(), std::byte{0xAB});
  layout.init_record(record);
  for (uint32_t c = 0; c < layout.column_count(); ++c) {
    const ValueRef v = layout.get(record, c);
    EXPECT_EQ(v.is_null, layout.column(c).nullable) << c;
  }
  EXPECT_EQ(layout.get(record, 0).as_uint64(), 0u);
  EXPECT_EQ(layout.get(record, 5).bytes.size(), 0u);
  EXPECT_EQ(layout.get(record, 3).bytes.size(), 4u);
}

struct Model {
  bool is_null = false;
  std::vector<std::byte> bytes;
};

Model random_value(std::mt19937_64& rng, const ColumnDef& column) {
  Model m;
  if (column.nullable && rng() % 4 == 0) {
    m.is_null = true;
    return m;
  }
  std::size_t size = integer_width(column.type);
  if (size == 0) size = is_variable_length(column.type) ? rng() % (column.length + 1) : column.length;
  for (std::size_t i = 0; i < size; ++i) m.bytes.push_back(static_cast<std::byte>(rng()));
  return m;
}

TEST(RowLayoutTest, SetThenGetMatchesAModelUnderRandomWrites) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const RowLayout layout = RowLayout::create(mixed_table()).value();
  std::vector<std::byte> record(layout.record_bytes());
  layout.init_record(record);
  std::vector<Model> model(layout.column_count());
  for (uint32_t c = 0; c < layout.column_count(); ++c) {
    model[c].is_null = layout.column(c).nullable;
    if (!model[c].is_null) model[c].bytes = std::vector<std::byte>(layout.get(record, c).bytes.size());
  }
  for (int step = 0; step < 20000; ++step) {
    const uint32_t c = static_cast<uint32_t>(rng() % layout.column_count());
    const Model value = random_value(rng, layout.column(c));
    const ValueRef ref = value.is_null ? ValueRef::null() : ValueRef::of_bytes(value.bytes);
    ASSERT_TRUE(layout.set(record, c, ref).is_ok());
    model[c] = value;
    const uint32_t check = static_cast<uint32_t>(rng() % layout.column_count());
    const ValueRef got = layout.get(record, check);
    const Model& want = model[check];
    ASSERT_TRUE(same_value(got, want.is_null ? ValueRef::null() : ValueRef::of_bytes(want.bytes))) << check;
  }
}

TEST(RowLayoutTest, UnfittingValuesAreErrorsAndLeaveTheRecordAlone) {
  const RowLayout layout = RowLayout::create(mixed_table()).value();
  std::vector<std::byte> record(layout.record_bytes());
  layout.init_record(record);
  ASSERT_TRUE(layout.set(record, 2, ValueRef::of_string("hello")).is_ok());
  const std::vector<std::byte> before = record;
  const uint32_t small = 1;
  const std::pair<uint32_t, ValueRef> bad[] = {{0, ValueRef::null()},
                                               {0, ValueRef::of(small)},
                                               {2, ValueRef::of_string("12345678901")},
                                               {3, ValueRef::of_string("abc")},
                                               {6, ValueRef::of_string("abc")}};
  const char* messages[] = {"table 'rows': column 'id' (UINT64) is not nullable, got NULL",
                            "table 'rows': column 'id' (UINT64) needs 8 bytes, got 4",
                            "table 'rows': column 'b' (VARCHAR(10)) takes at most 10 bytes, got 11",
                            "table 'rows': column 'c' (BINARY(4)) needs exactly 4 bytes, got 3",
                            "table 'rows': column 'f' (CHAR(2)) needs exactly 2 bytes, got 3"};
  for (std::size_t i = 0; i < std::size(bad); ++i) {
    const Status s = layout.set(record, bad[i].first, bad[i].second);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), messages[i]);
    EXPECT_EQ(record, before);
  }
  EXPECT_EQ(layout.get(record, 2).as_string(), "hello");
}

TEST(RowLayoutTest, FullLengthVarValuesAndNullsDoNotTouchNeighbours) {
  const RowLayout layout = RowLayout::create(mixed_table()).value();
  std::vector<std::byte> record(layout.record_bytes());
  layout.init_record(record);
  const std::string longest(300, 'z');
  const int64_t d = -7;
  ASSERT_TRUE(layout.set(record, 4, ValueRef::of(d)).is_ok());
  ASSERT_TRUE(layout.set(record, 5, ValueRef::of_string(longest)).is_ok());
  ASSERT_TRUE(layout.set(record, 6, ValueRef::of_string("xy")).is_ok());
  EXPECT_EQ(layout.get(record, 5).as_string(), longest);
  EXPECT_EQ(layout.get(record, 4).as_int64(), -7);
  EXPECT_EQ(layout.get(record, 6).as_string(), "xy");
  ASSERT_TRUE(layout.set(record, 6, ValueRef::null()).is_ok());
  EXPECT_TRUE(layout.get(record, 6).is_null);
  EXPECT_EQ(layout.get(record, 5).as_string(), longest);
  ASSERT_TRUE(layout.set(record, 5, ValueRef::of_string("")).is_ok());
  EXPECT_EQ(layout.get(record, 5).as_string(), "");
}

TEST(RowLayoutTest, EncodeRecordEqualsEncodingTheValues) {
  const TableDef table = mixed_table();
  const RowLayout layout = RowLayout::create(table).value();
  const KeyCodec pk = KeyCodec::for_primary_key(table);
  std::vector<std::byte> record(layout.record_bytes());
  layout.init_record(record);
  const uint64_t id = 0x1122334455667788ULL;
  ASSERT_TRUE(layout.set(record, 0, ValueRef::of(id)).is_ok());
  ASSERT_TRUE(layout.set(record, 3, ValueRef::of_string("wxyz")).is_ok());
  std::vector<std::byte> from_record(pk.max_encoded_bytes());
  from_record.resize(pk.encode_record(layout, record, from_record));
  const ValueRef values[] = {ValueRef::of(id), ValueRef::of_string("wxyz")};
  std::vector<std::byte> from_values(pk.max_encoded_bytes());
  from_values.resize(pk.encode(values, from_values).value());
  EXPECT_EQ(from_record, from_values);
  EXPECT_EQ(from_record.size(), 12u);
}

}  // namespace
}  // namespace fjord::engine
