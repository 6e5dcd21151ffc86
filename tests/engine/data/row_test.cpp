// api::Row and api::RowView without a data node: the entries a Row holds
// after any sequence of set/set_null, against a simple model (a list of
// columns where setting one again removes it and appends it); and what a
// RowView finds in entries from outside, corrupted ones included, against
// protocol::ValueCursor.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fjord/api/api.h"

namespace fjord::api {
namespace {

using engine::protocol::put_value;
using engine::protocol::value_entry_bytes;
using engine::protocol::ValueCursor;
using engine::protocol::ValueEntry;

struct ModelEntry {
  uint16_t column = 0;
  bool is_null = false;
  std::string bytes;
};

// The entries the model's list stands for, written with the protocol's encoder.
std::vector<std::byte> encode_model(const std::vector<ModelEntry>& model) {
  std::vector<std::byte> out;
  for (const ModelEntry& e : model) {
    const std::size_t at = out.size();
    out.resize(at + value_entry_bytes(e.is_null ? 0 : e.bytes.size()));
    const auto bytes = std::as_bytes(std::span(e.bytes.data(), e.bytes.size()));
    EXPECT_NE(put_value(std::span(out).subspan(at), e.column, e.is_null, bytes), 0u);
  }
  return out;
}

void model_set(std::vector<ModelEntry>& model, ModelEntry entry) {
  std::erase_if(model, [&](const ModelEntry& e) { return e.column == entry.column; });
  model.push_back(std::move(entry));
}

std::vector<std::byte> entries_of(const Row& row) { return {row.entries().begin(), row.entries().end()}; }

TEST(RowTest, SettingAColumnAgainMovesItToTheEnd) {
  Row row;
  row.set(0, uint64_t{1}).set(1, std::string_view("abc")).set(2, int32_t{-3});
  row.set(0, uint64_t{7});  // same length: moved to the end
  std::vector<ModelEntry> model;
  model_set(model, {1, false, "abc"});
  model_set(model, {2, false, std::string("\xfd\xff\xff\xff", 4)});
  const uint64_t seven = 7;
  model_set(model, {0, false, std::string(reinterpret_cast<const char*>(&seven), 8)});
  EXPECT_EQ(entries_of(row), encode_model(model));
  EXPECT_EQ(row.count(), 3u);
  EXPECT_EQ(RowView(row.entries()).value(0).as_uint64(), 7u);
}

TEST(RowTest, ALastColumnSetAgainIsReplacedInPlace) {
  Row row;
  row.set(5, uint64_t{1});
  const std::byte* before = row.entries().data();
  for (uint64_t id = 2; id < 100; ++id) row.set(5, id);
  EXPECT_EQ(row.entries().data(), before) << "same-length replacement reallocated";
  EXPECT_EQ(row.count(), 1u);
  EXPECT_EQ(RowView(row.entries()).value(5).as_uint64(), 99u);
}

TEST(RowTest, ValuesOfOtherLengthsAndNullsReplaceTheOldEntry) {
  Row row;
  row.set(1, std::string_view("a")).set(2, uint32_t{9});
  row.set(1, std::string_view("a longer value"));  // another padded length
  row.set_null(2);
  row.set(2, std::string_view(""));  // an empty value: as long as NULL, not NULL
  const RowView view(row.entries());
  EXPECT_EQ(view.value(1).as_string(), "a longer value");
  EXPECT_FALSE(view.value(2).is_null);
  EXPECT_TRUE(view.value(2).bytes.empty());
  row.set_null(1);
  EXPECT_TRUE(RowView(row.entries()).value(1).is_null);
  EXPECT_EQ(entries_of(row), encode_model({{2, false, ""}, {1, true, ""}}));
}

// Random sets over a few columns and lengths (seeded), checked after each.
TEST(RowTest, AnySequenceOfSetsMatchesTheModel) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Row row;
    std::vector<ModelEntry> model;
    for (int step = 0; step < 200; ++step) {
      const auto column = static_cast<uint16_t>(rng() % 6);
      const uint32_t kind = rng() % 4;
      if (kind == 0) {
        row.set_null(column);
        model_set(model, {column, true, ""});
      } else {
        std::string bytes(rng() % (kind == 1 ? 3 : 13), 'x');
        for (char& c : bytes) c = static_cast<char>('a' + rng() % 26);
        row.set(column, std::string_view(bytes));
        model_set(model, {column, false, bytes});
      }
      ASSERT_EQ(entries_of(row), encode_model(model)) << "seed " << seed << " step " << step;
    }
    EXPECT_EQ(row.count(), model.size());
  }
}

// What RowView::value should give: the first entry of the column that
// ValueCursor reaches before the end or the first malformed entry.
std::optional<ValueEntry> reference_value(std::span<const std::byte> entries, uint16_t column) {
  ValueCursor cursor(entries);
  ValueEntry e;
  while (cursor.next(e))
    if (e.column == column) return e;
  return std::nullopt;
}

// Valid entries of random columns and lengths, then one random corruption:
// a byte changed (flags, length, column or value), or the end cut off.
std::vector<std::byte> corrupted_entries(std::mt19937& rng) {
  Row row;
  const uint32_t count = 1 + rng() % 5;
  for (uint32_t i = 0; i < count; ++i) {
    const auto column = static_cast<uint16_t>(rng() % 8);
    if (rng() % 4 == 0)
      row.set_null(column);
    else
      row.set(column, std::string(rng() % 11, static_cast<char>('a' + rng() % 26)));
  }
  std::vector<std::byte> bytes = entries_of(row);
  switch (rng() % 4) {
    case 0: bytes[rng() % bytes.size()] = static_cast<std::byte>(rng()); break;
    case 1: bytes[(rng() % count) * 8 % bytes.size() + 2] = static_cast<std::byte>(rng() % 3); break;  // flags
    case 2: bytes[(rng() % bytes.size()) / 4 * 4 % bytes.size()] ^= std::byte{0x40}; break;
    default: bytes.resize(rng() % bytes.size()); break;
  }
  return bytes;
}

TEST(RowViewTest, FindsWhatValueCursorFindsInAnyBytes) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20000; ++round) {
    const std::vector<std::byte> bytes = corrupted_entries(rng);
    const RowView view(bytes);
    for (uint16_t column = 0; column < 8; ++column) {
      const std::optional<ValueEntry> want = reference_value(bytes, column);
      const engine::ValueRef got = view.value(column);
      ASSERT_EQ(view.has(column), want.has_value()) << "round " << round << " column " << column;
      ASSERT_EQ(got.is_null, !want || want->is_null) << "round " << round << " column " << column;
      if (want && !want->is_null) {
        ASSERT_EQ(got.bytes.data(), want->bytes.data()) << "round " << round << " column " << column;
        ASSERT_EQ(got.bytes.size(), want->bytes.size()) << "round " << round << " column " << column;
      }
    }
  }
}

}  // namespace
}  // namespace fjord::api
