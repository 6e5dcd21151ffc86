#include "fjord/base/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace fjord {
namespace {
constexpr uint64_t kSubBuckets = uint64_t{1} << Histogram::kSubBucketBits;
constexpr uint64_t kHalf = kSubBuckets / 2;
// Magnitude 0 covers [0, kSubBuckets) exactly; each further magnitude m covers
// [kSubBuckets << (m-1), kSubBuckets << m) in kHalf buckets.
constexpr std::size_t kBucketCount = kSubBuckets + kHalf * (Histogram::kMaxMagnitude - Histogram::kSubBucketBits + 1);
}  // namespace

Histogram::Histogram() : counts_(kBucketCount, 0) {}

std::size_t Histogram::bucket_index(uint64_t value) noexcept {
  if (value < kSubBuckets) return static_cast<std::size_t>(value);
  const int top = 63 - std::countl_zero(value);    // >= kSubBucketBits
  const int magnitude = top - kSubBucketBits + 1;  // >= 1
  if (magnitude > kMaxMagnitude - kSubBucketBits + 1) return kBucketCount - 1;
  const uint64_t sub = (value >> magnitude) - kHalf;  // in [0, kHalf)
  return static_cast<std::size_t>(kSubBuckets + kHalf * static_cast<uint64_t>(magnitude - 1) + sub);
}

uint64_t Histogram::bucket_upper(std::size_t index) noexcept {
  if (index < kSubBuckets) return index;
  const uint64_t rel = index - kSubBuckets;
  const uint64_t magnitude = rel / kHalf + 1;
  const uint64_t sub = rel % kHalf + kHalf;
  return ((sub + 1) << magnitude) - 1;
}

void Histogram::record(uint64_t value) noexcept { record_n(value, 1); }

void Histogram::record_n(uint64_t value, uint64_t count) noexcept {
  if (count == 0) return;
  counts_[bucket_index(value)] += count;
  count_ += count;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<long double>(value) * count;
}

void Histogram::merge(const Histogram& other) noexcept {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void Histogram::reset() noexcept {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = 0;
}

double Histogram::mean() const noexcept { return count_ == 0 ? 0.0 : static_cast<double>(sum_ / count_); }

uint64_t Histogram::percentile(double q) const noexcept {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(std::llround(q * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(bucket_upper(i), min_, max_);
  }
  return max_;
}

}  // namespace fjord
