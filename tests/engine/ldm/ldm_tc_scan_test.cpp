// Scans coordinated by TC over both LDM instances: a close that comes while
// a round runs.
#include <gtest/gtest.h>

#include <set>

#include "ldm_tc_harness.h"

namespace fjord::engine::ldm_test {
namespace {

// A close that comes while a round runs (the API gave the round up at its
// request timeout: the node was slow) is remembered: once the round's
// answers are in, TC closes the partitions still open and ends the scan,
// counting the round's rows and messages so that the API knows what is still
// on its way, and every record (TC's, the LDMs') is free again. Ignored,
// such a close would leave the records until the API disconnected, and
// after MaxNoOfConcurrentScans of them no scan would open.
TEST(LdmWithTcTest, AScanClosedWhileItsRoundRunsEndsWhenTheRoundIsInAndFreesItsRecords) {
  constexpr uint32_t kMaxScans = 2;
  BlockCluster cluster(Layout::kSeparate, 1000, 32768, 0, kMaxScans);  // a quiet TC timer: see signals_on
  Api api(cluster);
  const TableDef t = cluster.create(plain_items());
  for (uint64_t id = 0; id < 80; ++id)
    ASSERT_TRUE(api.run(t, OpType::kInsert, item_key(id), item_values(id, Item{1, long_name(id), std::nullopt})).ok);
  for (uint32_t i = 0; i < 2 * kMaxScans + 1; ++i) {
    SCOPED_TRACE("scan " + std::to_string(i));
    const ScanReq r = api.start_scan(t, 0, {}, 1);
    const Api::ScanRound first = api.take_round(r);
    ASSERT_EQ(first.error, ErrorCode::kNone) << error_text(first.error);
    ASSERT_FALSE(first.conf.finished);
    // The next round waits at LDM 0 (the even partitions) while the close
    // reaches TC; LDM 1 answers its part meanwhile.
    cluster.stall_ldm0();
    api.scan_message(gsn::kScanNextReq, r);
    api.scan_message(gsn::kScanCloseReq, r);
    (void)cluster.signals_on("tc 0");  // quiet: TC has had both and LDM 1's answers
    cluster.resume_ldm0();
    const Api::ScanRound closed = api.take_round(r);
    ASSERT_EQ(closed.error, ErrorCode::kNone) << error_text(closed.error);
    EXPECT_TRUE(closed.conf.finished) << "the close was not remembered: TC answered the round";
    EXPECT_EQ(closed.conf.rows, 8u) << "one row from each partition in the round given up";
  }
  // The records came back: kMaxScans scans open at once, and read to the end.
  std::vector<ScanReq> open;
  for (uint32_t i = 0; i < kMaxScans; ++i) open.push_back(api.start_scan(t, 0, {}, 40));
  for (const ScanReq& r : open) {
    std::set<uint64_t> ids;
    for (Api::ScanRound round;; api.scan_message(gsn::kScanNextReq, r)) {
      round = api.take_round(r);
      ASSERT_EQ(round.error, ErrorCode::kNone) << error_text(round.error);
      for (const RowValues& row : round.rows) ids.insert(int_of<uint64_t>(row.at(kId)));
      if (round.conf.finished) break;
    }
    EXPECT_EQ(ids.size(), 80u);
  }
  (void)cluster.signals_on("ldm 0");
  EXPECT_EQ(cluster.ldm(0).stats().scans_open + cluster.ldm(1).stats().scans_open, 0u);
  EXPECT_EQ(cluster.inbox().size(), 0u) << "a signal nobody expected";
}

}  // namespace
}  // namespace fjord::engine::ldm_test
