// The latency histogram: exact small values, bounded relative error, merge.
#include "fjord/base/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace fjord {
namespace {

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 0; v < 200; ++v) h.record(v);
  EXPECT_EQ(h.count(), 200u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 199u);
  EXPECT_EQ(h.percentile(0.5), 99u);
  EXPECT_EQ(h.percentile(1.0), 199u);
  EXPECT_DOUBLE_EQ(h.mean(), 99.5);
}

TEST(HistogramTest, PercentilesWithinOnePercentOfTheTruth) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(8.0, 1.5);
  std::vector<uint64_t> values;
  Histogram h;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const auto truth = static_cast<double>(values[static_cast<std::size_t>(q * values.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(h.percentile(q)), truth, truth * 0.01 + 1) << q;
  }
  EXPECT_EQ(h.max(), values.back());
}

TEST(HistogramTest, MergeAndHugeValues) {
  Histogram a, b;
  a.record(10);
  b.record_n(1'000'000'000'000ULL, 3);
  a.merge(b);
  EXPECT_EQ(a.count(), 4u);
  EXPECT_EQ(a.max(), 1'000'000'000'000ULL);
  EXPECT_EQ(a.percentile(0.25), 10u);
  EXPECT_NEAR(static_cast<double>(a.percentile(0.9)), 1e12, 1e10);
  a.reset();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.percentile(0.5), 0u);
}

}  // namespace
}  // namespace fjord
