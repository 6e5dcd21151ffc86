// A randomized model test: transactions of random operations on a small key
// space, each committed or aborted, checked against a std::map after every
// operation (the transaction's own view and the committed one), with scans
// compared to the model now and then. Seeded: FJORD_SEED=<n> replays a run.
#include <gtest/gtest.h>

#include <set>

#include "ldm_test_tables.h"

namespace fjord::engine::ldm_test {
namespace {

using Model = std::map<uint64_t, Item>;

class ModelRun {
 public:
  explicit ModelRun(uint64_t seed) : rng_(seed) {}

  Item random_item() {
    Item item;
    item.qty = static_cast<int32_t>(rng_() % 7) - 3;
    if (rng_() % 4 != 0) item.name = long_name(rng_() % 10);
    if (rng_() % 3 != 0) item.code = static_cast<uint32_t>(rng_() % 1000);
    return item;
  }

  // One operation of transaction `tx`; `view` is its model.
  void step(TxId tx, Model& view, uint32_t& held_ops) {
    const uint64_t id = rng_() % kKeys;
    const bool exists = view.count(id) != 0;
    switch (rng_() % 9) {
      case 0: {
        const Item item = random_item();
        const KeyOutcome r = db_.insert(tx, id, item);
        EXPECT_EQ(r.ok, !exists);
        if (!r.ok) {
          EXPECT_EQ(r.error, ErrorCode::kDuplicateKey);
          return;
        }
        check_unique(r, std::nullopt, item, id);
        view[id] = item;
        ++held_ops;
        return;
      }
      case 1:
      case 2: return update(tx, view, id, held_ops);
      case 3: {
        const Item item = random_item();
        const KeyOutcome r = db_.write(tx, id, item);
        ASSERT_TRUE(r.ok) << error_text(r.error);
        check_unique(r, exists ? std::optional(view[id]) : std::nullopt, item, id);
        view[id] = item;
        ++held_ops;
        return;
      }
      case 4: {
        const KeyOutcome r = db_.remove(tx, id);
        EXPECT_EQ(r.ok, exists);
        if (!r.ok) {
          EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
          return;
        }
        view.erase(id);
        ++held_ops;
        return;
      }
      case 5:
      case 6: {
        const KeyOutcome r = db_.read(tx, id, rng_() % 2 ? LockMode::kShared : LockMode::kExclusive);
        EXPECT_EQ(r.ok, exists) << "id " << id;
        if (r.ok) {
          EXPECT_EQ(item_of(r.values), view[id]) << "id " << id;
          ++held_ops;
        }
        return;
      }
      default: {  // read committed, by this transaction or another: never waits
        const KeyOutcome r = db_.read(rng_() % 2 ? tx : db_.fresh_tx(), id);
        const auto it = committed_.find(id);
        EXPECT_EQ(r.ok, it != committed_.end()) << "id " << id;
        if (r.ok && it != committed_.end()) {
          EXPECT_EQ(item_of(r.values), it->second);
        }
      }
    }
  }

  void update(TxId tx, Model& view, uint64_t id, uint32_t& held_ops) {
    Values changes;
    Item next = view.count(id) ? view[id] : Item{};
    const Item random = random_item();
    if (rng_() % 2) {
      changes.i32(kQty, random.qty);
      next.qty = random.qty;
    }
    if (rng_() % 2) {
      random.name ? changes.str(kName, *random.name) : changes.null(kName);
      next.name = random.name;
    }
    if (rng_() % 2) {
      random.code ? changes.u32(kCode, *random.code) : changes.null(kCode);
      next.code = random.code;
    }
    const KeyOutcome r = db_.update(tx, id, changes);
    EXPECT_EQ(r.ok, view.count(id) != 0);
    if (!r.ok) {
      EXPECT_EQ(r.error, ErrorCode::kNoSuchRow);
      return;
    }
    check_unique(r, view[id], next, id);
    view[id] = next;
    ++held_ops;
  }

  // unique_before/after: the unique column (code) and the key, when the row
  // existed before / exists after.
  static void check_unique(const KeyOutcome& r, const std::optional<Item>& before, const Item& after, uint64_t id) {
    const auto check = [&](const std::vector<std::byte>& section, const Item& item) {
      const RowValues v = decode_values(section);
      ASSERT_EQ(v.size(), 2u);
      EXPECT_EQ(int_of<uint64_t>(v.at(kId)), id);
      EXPECT_EQ(v.at(kCode).has_value(), item.code.has_value());
      if (item.code) {
        EXPECT_EQ(int_of<uint32_t>(v.at(kCode)), *item.code);
      }
    };
    EXPECT_EQ(r.unique_before.empty(), !before.has_value());
    if (before) check(r.unique_before, *before);
    check(r.unique_after, after);
  }

  void check_scans() {
    std::set<uint64_t> all;
    for (const auto& [id, item] : committed_) all.insert(id);
    ScanSpec full;
    full.batch_rows = 1 + static_cast<uint32_t>(rng_() % 20);
    const ScanResult f = scan_table(db_.h, db_.table, full);
    std::set<uint64_t> got;
    for (const RowValues& row : f.rows) {
      const uint64_t id = int_of<uint64_t>(row.at(kId));
      EXPECT_TRUE(got.insert(id).second) << "row " << id << " twice";
      ASSERT_TRUE(committed_.count(id)) << "row " << id << " is not committed";
      EXPECT_EQ(item_of(row), committed_[id]);
    }
    EXPECT_EQ(got, all);
    // by_qty between random bounds, by_name equal to a random name.
    const int32_t lo = static_cast<int32_t>(rng_() % 7) - 3, hi = lo + static_cast<int32_t>(rng_() % 4);
    ScanSpec by_qty;
    by_qty.ordered = true;
    by_qty.index_id = kByQty;
    by_qty.batch_rows = 1 + static_cast<uint32_t>(rng_() % 5);
    by_qty.bounds =
        bounds_section(Bounds{true, true, true, true, 1, 1, {}, {}}, Values().i32(kQty, lo), Values().i32(kQty, hi));
    std::set<uint64_t> want_qty, got_qty;
    for (const auto& [id, item] : committed_)
      if (item.qty >= lo && item.qty <= hi) want_qty.insert(id);
    for (const RowValues& row : scan_table(db_.h, db_.table, by_qty).rows)
      EXPECT_TRUE(got_qty.insert(int_of<uint64_t>(row.at(kId))).second);
    EXPECT_EQ(got_qty, want_qty) << lo << " <= qty <= " << hi;
    const std::string name = long_name(rng_() % 10);
    ScanSpec by_name = by_qty;
    by_name.index_id = kByName;
    by_name.bounds = bounds_section(Bounds{true, true, true, true, 1, 1, {}, {}}, Values().str(kName, name),
                                    Values().str(kName, name));
    std::set<uint64_t> want_name, got_name;
    for (const auto& [id, item] : committed_)
      if (item.name == name) want_name.insert(id);
    for (const RowValues& row : scan_table(db_.h, db_.table, by_name).rows)
      EXPECT_TRUE(got_name.insert(int_of<uint64_t>(row.at(kId))).second);
    EXPECT_EQ(got_name, want_name) << "name = " << name;
  }

  void run(uint32_t transactions) {
    for (uint32_t i = 0; i < transactions && !::testing::Test::HasFailure(); ++i) {
      const TxId tx = db_.fresh_tx();
      Model view = committed_;
      uint32_t held_ops = 0;
      const uint32_t ops = 1 + static_cast<uint32_t>(rng_() % 6);
      for (uint32_t k = 0; k < ops; ++k) step(tx, view, held_ops);
      if (rng_() % 3 == 0) {
        EXPECT_EQ(db_.client.abort(tx), held_ops);
      } else {
        EXPECT_EQ(db_.client.commit(tx), held_ops);
        committed_ = view;
      }
      if (i % 40 == 0) check_scans();
    }
    check_scans();
    const LdmStats s = db_.h.ldm(0).stats();
    EXPECT_GE(s.commits + s.aborts, transactions);
    EXPECT_EQ(s.committed_rows, committed_.size());
    EXPECT_EQ(s.lock_records_in_use, 0u);
    EXPECT_EQ(s.operation_records_in_use, 0u);
    EXPECT_EQ(s.parked_now, 0u);
  }

 private:
  static constexpr uint64_t kKeys = 40;
  std::mt19937_64 rng_;
  Db db_;
  Model committed_;
};

TEST(LdmModelTest, RandomTransactionsAgreeWithAMap) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("FJORD_SEED=" + std::to_string(seed));
  ModelRun(seed).run(3000);
}

}  // namespace
}  // namespace fjord::engine::ldm_test
