// A log-linear latency histogram (HdrHistogram-style).
//
// Values are unsigned integers (we record nanoseconds). Values below
// 2^kSubBucketBits are exact; above, each power-of-two range is split into
// 2^(kSubBucketBits-1) linear buckets, so a recorded value is off by at most
// 1/2^(kSubBucketBits-1) (0.8%). All memory is allocated in the constructor;
// record() is O(1), allocation-free and meant for the hot path. One thread
// records; merge() combines histograms from several threads afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fjord {

class Histogram {
 public:
  static constexpr int kSubBucketBits = 8;  // 256 sub-buckets: <0.8% error
  static constexpr int kMaxMagnitude = 48;  // values up to 2^48 ns (~3 days)

  Histogram();

  void record(uint64_t value) noexcept;
  void record_n(uint64_t value, uint64_t count) noexcept;
  void merge(const Histogram& other) noexcept;
  void reset() noexcept;

  uint64_t count() const noexcept { return count_; }
  uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  uint64_t max() const noexcept { return max_; }
  double mean() const noexcept;
  // The smallest recorded bucket value v such that at least q*count values
  // are <= v (q in [0,1]). Returns the bucket's upper edge, clamped to max().
  uint64_t percentile(double q) const noexcept;

 private:
  static std::size_t bucket_index(uint64_t value) noexcept;
  static uint64_t bucket_upper(std::size_t index) noexcept;

  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  long double sum_ = 0;
};

}  // namespace fjord
