// api::Row and api::RowView without a data node: the entries a Row holds
// after any sequence of set/set_null, against a simple model (a list of
// columns where setting one again removes it and appends it).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fjord/api/api.h"

namespace fjord::api {
namespace {

using engine::protocol::put_value;
using engine::protocol::value_entry_bytes;

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

}  // namespace
}  // namespace fjord::api
