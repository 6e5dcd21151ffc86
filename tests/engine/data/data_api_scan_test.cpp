// Scans through the API: full, ordered, bounded and filtered; the checks on
// a ScanSpec; scan records given back however a scan ends; scans beside
// concurrent writes.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "data_api_fixture.h"
#include "fjord/base/clock.h"

namespace fjord::test {
namespace {

using api::ExecType;
using api::Row;

TEST_F(DataApiTest, ScansFullOrderedBoundedAndFiltered) {
  for (uint64_t base = 0; base < 400; base += 50)
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = base; id < base + 50; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id) - 100));
    }));
  auto count = [&](api::ScanSpec spec) {
    spec.table = table_;
    auto scan = conn_->scan(spec);
    EXPECT_TRUE(scan) << scan.status().to_string();
    if (!scan) return uint64_t{0};
    api::RowView row;
    std::set<uint64_t> seen;
    while ((*scan)->next(row)) {
      const uint64_t id = row.value(kId).as_uint64();
      EXPECT_TRUE(seen.insert(id).second) << "row " << id << " returned twice";
    }
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
    return static_cast<uint64_t>(seen.size());
  };
  api::ScanSpec full;
  full.batch_rows = 7;
  EXPECT_EQ(count(full), 400u);
  api::ScanSpec range;
  range.index = &index("by_balance");
  range.has_lower = true;
  range.lower.set(kBalance, int64_t{0});  // balance >= 0: ids 100..399
  range.has_upper = true;
  range.upper_inclusive = false;
  range.upper.set(kBalance, int64_t{100});  // balance < 100: ids 100..199
  EXPECT_EQ(count(range), 100u);
  api::ScanSpec eq;
  eq.index = &index("by_balance");
  eq.has_lower = eq.has_upper = true;
  eq.lower.set(kBalance, int64_t{-50});
  eq.upper.set(kBalance, int64_t{-50});
  EXPECT_EQ(count(eq), 1u);
  api::ScanSpec filtered;
  filtered.filter.push_back({kBalance, engine::protocol::FilterOp::kGe, Row().set(kBalance, int64_t{250})});
  filtered.filter.push_back({kTag, engine::protocol::FilterOp::kIsNull, Row()});
  EXPECT_EQ(count(filtered), 50u);  // ids 350..399
  api::ScanSpec bad;
  bad.index = &table_->indexes[0];  // the unique index is not an ordered index
  bad.table = table_;
  auto refused = conn_->scan(bad);
  EXPECT_FALSE(refused.is_ok() && (*refused)->status().is_ok());
}

// A scan read to its end stays its caller's until close(): were its Scan
// object free before that, the next scan() could hand it out again, and the
// first scan's close() (as every caller does after its loop) would close
// the second one, which would then return no rows and no error.
TEST_F(DataApiTest, AScanReadToItsEndStaysTheCallersUntilClosed) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 20; ++id) tx.insert(*table_, account(id, 1));
  }));
  api::ScanSpec spec;
  spec.table = table_;
  auto first = conn_->scan(spec);
  ASSERT_TRUE(first) << first.status().to_string();
  api::RowView row;
  uint64_t first_rows = 0;
  while ((*first)->next(row)) ++first_rows;
  EXPECT_EQ(first_rows, 20u);
  auto second = conn_->scan(spec);
  ASSERT_TRUE(second) << second.status().to_string();
  EXPECT_NE(*first, *second) << "an open scan was handed out again";
  (*first)->close();
  uint64_t second_rows = 0;
  while ((*second)->next(row)) ++second_rows;
  EXPECT_TRUE((*second)->status()) << (*second)->status().to_string();
  EXPECT_EQ(second_rows, 20u);
  (*second)->close();
  // Closed scans are reused: many scans in turn keep a few objects.
  std::set<api::Scan*> objects;
  for (int i = 0; i < 50; ++i) {
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    objects.insert(*scan);
    (*scan)->close();
  }
  EXPECT_LE(objects.size(), 2u);
}

// batch_rows outside what the node accepts (1..4096) is refused by the API
// with the range, not sent to come back as a bare "4000: Malformed or
// inconsistent request".
TEST_F(DataApiTest, AScanBatchSizeOutOfRangeIsRefusedNamingTheRange) {
  ASSERT_TRUE(run([&](api::Transaction& tx) { tx.insert(*table_, account(1, 1)); }));
  api::ScanSpec spec;
  spec.table = table_;
  for (const uint32_t rows : {0u, engine::protocol::kMaxScanBatchRows + 1, 0xFFFF'FFFFu}) {
    spec.batch_rows = rows;
    auto scan = conn_->scan(spec);
    ASSERT_FALSE(scan) << rows;
    EXPECT_EQ(scan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(scan.status().message(), "ScanSpec.batch_rows is " + std::to_string(rows) + "; accepted 1.." +
                                           std::to_string(engine::protocol::kMaxScanBatchRows));
  }
  for (const uint32_t rows : {1u, engine::protocol::kMaxScanBatchRows}) {
    spec.batch_rows = rows;
    auto scan = conn_->scan(spec);
    ASSERT_TRUE(scan) << scan.status().to_string();
    api::RowView row;
    EXPECT_TRUE((*scan)->next(row));
    EXPECT_FALSE((*scan)->next(row));
    EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
    (*scan)->close();
  }
}

// A ScanSpec the node cannot run is refused naming what is wrong, not with
// a bare "4000: Malformed or inconsistent request"; bounds given without an
// index are refused too, not dropped (the scan would return every row).
TEST_F(DataApiTest, AScanSpecTheNodeCannotRunIsRefusedNamingWhatIsWrong) {
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 10; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  const auto refusal = [&](api::ScanSpec spec) {
    spec.table = table_;
    auto scan = conn_->scan(spec);
    if (scan) {
      (*scan)->close();
      ADD_FAILURE() << "scan accepted";
      return std::string();
    }
    EXPECT_EQ(scan.status().code(), StatusCode::kInvalidArgument);
    return scan.status().message();
  };
  api::ScanSpec spec;
  spec.columns = {kId, 9};
  EXPECT_EQ(refusal(spec), "ScanSpec.columns: table 'accounts' has no column 9 (it has 5)");
  spec = {};
  spec.filter.push_back({9, engine::protocol::FilterOp::kEq, Row().set(9, uint32_t{1})});
  EXPECT_EQ(refusal(spec), "ScanSpec.filter: table 'accounts' has no column 9 (it has 5)");
  spec = {};
  spec.filter.push_back({kBalance, engine::protocol::FilterOp::kGe, Row().set(kBalance, uint32_t{1})});
  EXPECT_EQ(refusal(spec), "ScanSpec.filter: column 'balance' (INT64) takes 8-byte values, not 4");
  spec = {};
  spec.filter.push_back({kName, engine::protocol::FilterOp::kEq, Row().set(kName, std::string(33, 'x'))});
  EXPECT_EQ(refusal(spec), "ScanSpec.filter: column 'name' (VARCHAR) takes at most 32 bytes, not 33");
  spec = {};
  spec.has_lower = true;
  spec.lower.set(kId, uint64_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec has bounds but no ordered index");
  spec = {};
  spec.index = &index("by_balance");
  spec.has_upper = true;
  spec.upper.set(kId, uint64_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec.upper: column 'id' is not among the first 1 columns of index 'by_balance'");
  spec = {};
  spec.index = &index("by_balance");
  spec.has_lower = true;
  spec.lower.set(kBalance, uint32_t{5});
  EXPECT_EQ(refusal(spec), "ScanSpec.lower: column 'balance' (INT64) takes 8-byte values, not 4");
  // A good spec still runs.
  spec = {};
  spec.table = table_;
  spec.index = &index("by_balance");
  spec.has_lower = true;
  spec.lower.set(kBalance, int64_t{5});
  spec.filter.push_back({kBalance, engine::protocol::FilterOp::kLt, Row().set(kBalance, int64_t{8})});
  spec.columns = {kId};
  auto scan = conn_->scan(spec);
  ASSERT_TRUE(scan) << scan.status().to_string();
  std::set<uint64_t> ids;
  api::RowView row;
  while ((*scan)->next(row)) ids.insert(row.value(kId).as_uint64());
  EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
  (*scan)->close();
  EXPECT_EQ(ids, (std::set<uint64_t>{5, 6, 7}));
}

// A scan opens one LDM scan record per partition: the LDMs must have
// MaxNoOfConcurrentScans x PartitionsPerTable of them for the TC's limit to
// be the one a program meets (with only MaxNoOfConcurrentScans of them, 2
// and 8 partitions, not even one full scan could open).
TEST_F(DataApiTest, TheConcurrentScanLimitIsTheTcsAndALocalLimitIsNamedWhenHit) {
  const auto fill = [&] {
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = 0; id < 64; ++id) tx.insert(*table_, account(id, 1));
    }));
  };
  // Opens a full scan and reads its first row, leaving it open; the error
  // when it fails to open or to start.
  const auto open_scan = [&](api::Scan*& out) -> Status {
    api::ScanSpec spec;
    spec.table = table_;
    spec.batch_rows = 1;
    auto scan = conn_->scan(spec);
    if (!scan) return scan.status();
    out = *scan;
    api::RowView row;
    if (!out->next(row)) {
      const Status s = out->status();
      out->close();
      out = nullptr;
      return s.is_ok() ? Status(StatusCode::kInternal, "the scan returned no row") : s;
    }
    return Status::ok();
  };
  const auto drain = [&](api::Scan* scan) {
    uint64_t rows = 1;  // open_scan read the first
    api::RowView row;
    while (scan->next(row)) ++rows;
    EXPECT_TRUE(scan->status()) << scan->status().to_string();
    scan->close();
    return rows;
  };
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  fill();
  api::Scan* a = nullptr;
  api::Scan* b = nullptr;
  api::Scan* c = nullptr;
  ASSERT_TRUE(open_scan(a)) << "the first of two scans allowed";
  ASSERT_TRUE(open_scan(b)) << "the second of two scans allowed";
  const Status third = open_scan(c);
  EXPECT_FALSE(third);
  EXPECT_NE(third.message().find("488: Too many active scans"), std::string::npos) << third.to_string();
  EXPECT_EQ(drain(a), 64u);
  EXPECT_EQ(drain(b), 64u);
  ASSERT_TRUE(open_scan(c)) << "a scan slot is free again";
  EXPECT_EQ(drain(c), 64u);

  // Fewer local scan records than a table's partitions: every scan fails,
  // clearly, and leaves nothing behind.
  options.extra_ndbd = "MaxNoOfLocalScans=4\n";
  start(options);
  fill();
  for (int attempt = 0; attempt < 3; ++attempt) {
    api::Scan* s = nullptr;
    const Status refused = open_scan(s);
    EXPECT_FALSE(refused);
    EXPECT_NE(refused.message().find("MaxNoOfLocalScans"), std::string::npos) << refused.to_string();
  }
  EXPECT_EQ(balance_of(7), 1) << "key operations go on";
}

// Coverage: with room for two scans at a time, scans closed after their
// first row, scans interleaved with each other and with transactions on one
// connection, and scans left open by a connection that goes away all give
// their records back: scans keep opening.
TEST_F(DataApiTest, ScansClosedEarlyInterleavedOrAbandonedLeaveNoScanRecordBehind) {
  ClusterOptions options;
  options.extra_ndbd = "MaxNoOfConcurrentScans=2\n";
  start(options);
  ASSERT_TRUE(run([&](api::Transaction& tx) {
    for (uint64_t id = 0; id < 100; ++id) tx.insert(*table_, account(id, static_cast<int64_t>(id)));
  }));
  api::ScanSpec full;
  full.table = table_;
  full.batch_rows = 2;
  api::ScanSpec ordered = full;
  ordered.index = &index("by_balance");
  api::RowView row;
  for (int i = 0; i < 20; ++i) {
    auto scan = conn_->scan(i % 2 ? ordered : full);
    ASSERT_TRUE(scan) << "scan " << i << ": " << scan.status().to_string();
    ASSERT_TRUE((*scan)->next(row)) << "scan " << i << ": " << (*scan)->status().to_string();
    (*scan)->close();
  }
  for (int i = 0; i < 3; ++i) {
    auto a = conn_->scan(full);
    auto b = conn_->scan(ordered);
    ASSERT_TRUE(a && b);
    std::set<uint64_t> seen_a, seen_b;
    bool more_a = true, more_b = true;
    for (uint64_t step = 0; more_a || more_b; ++step) {
      if (more_a && (more_a = (*a)->next(row))) seen_a.insert(row.value(kId).as_uint64());
      if (more_b && (more_b = (*b)->next(row))) seen_b.insert(row.value(kId).as_uint64());
      if (step % 16 == 0) {
        const uint64_t id = step % 100;
        ASSERT_TRUE(run([&](api::Transaction& tx) { tx.update(*table_, key_of(id), Row().set(kName, "x")); }));
        EXPECT_EQ(balance_of(id), static_cast<int64_t>(id));
      }
    }
    EXPECT_TRUE((*a)->status() && (*b)->status());
    EXPECT_EQ(seen_a.size(), 100u);
    EXPECT_EQ(seen_b.size(), 100u);
    (*a)->close();
    (*b)->close();
  }
  for (int i = 0; i < 4; ++i) {
    {
      auto leaving = cluster_->connect(51);
      ASSERT_TRUE(leaving) << leaving.status().to_string();
      auto t = (*leaving)->get_table("accounts");
      ASSERT_TRUE(t);
      api::ScanSpec spec = full;
      spec.table = *t;
      auto a = (*leaving)->scan(spec);
      auto b = (*leaving)->scan(spec);
      ASSERT_TRUE(a && b && (*a)->next(row) && (*b)->next(row));
    }  // the connection closes with both scans open
    // The node notices the disconnect on its own time: wait for a scan to open.
    const uint64_t until = monotonic_ns() + 10'000'000'000ULL;
    Status opened;
    do {
      auto scan = conn_->scan(full);
      opened = scan ? (*scan)->status() : scan.status();
      if (scan) (*scan)->close();
    } while (!opened && monotonic_ns() < until);
    ASSERT_TRUE(opened) << "after disconnect " << i << ": " << opened.to_string();
  }
}

TEST_F(DataApiTest, ScansWhileRowsAreInsertedAndDeleted) {
  for (uint64_t base = 0; base < 1000; base += 100)
    ASSERT_TRUE(run([&](api::Transaction& tx) {
      for (uint64_t id = base; id < base + 100; ++id) tx.insert(*table_, account(id, 1));
    }));
  // Rows 0..499 stay for the whole scan; another connection deletes 500..999
  // and inserts 1000..1499 while it runs.
  auto writer_conn = cluster_->connect(51);
  ASSERT_TRUE(writer_conn);
  auto writer_table = (*writer_conn)->get_table("accounts");
  ASSERT_TRUE(writer_table);
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    for (uint64_t i = 0; i < 500 && !stop; ++i) {
      api::Transaction& tx = (*writer_conn)->start_transaction();
      tx.remove(**writer_table, key_of(500 + i));
      tx.insert(**writer_table, account(1000 + i, 1));
      if (tx.execute(ExecType::kCommit)) ++writes;
      tx.close();
    }
  });
  api::ScanSpec spec;
  spec.table = table_;
  spec.batch_rows = 5;
  auto scan = conn_->scan(spec);
  ASSERT_TRUE(scan) << scan.status().to_string();
  std::set<uint64_t> seen;
  api::RowView row;
  bool paused = false;
  while ((*scan)->next(row)) {
    const uint64_t id = row.value(kId).as_uint64();
    EXPECT_TRUE(seen.insert(id).second) << "row " << id << " returned twice";
    if (!paused) {
      // Make the interleaving certain: hold the scan after its first rows
      // until the writer has committed changes.
      paused = true;
      const uint64_t until = monotonic_ns() + 30'000'000'000ULL;
      while (writes.load() < 100 && monotonic_ns() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_GE(writes.load(), 100) << "the writer made no progress while the scan was open";
    }
  }
  EXPECT_TRUE((*scan)->status()) << (*scan)->status().to_string();
  stop = true;
  writer.join();
  for (uint64_t id = 0; id < 500; ++id) EXPECT_TRUE(seen.count(id)) << "row " << id << " present throughout was missed";
}

}  // namespace
}  // namespace fjord::test
