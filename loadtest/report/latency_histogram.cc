#include "loadtest/report/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace rankd::loadtest {
namespace {

constexpr int kSub = 1 << LatencyHistogram::kSubBucketBits;  // 128
constexpr int kExact = 2 * kSub;                              // 0 .. 255 exact

}  // namespace

int LatencyHistogram::BucketOf(int64_t value) {
  if (value < kExact) return static_cast<int>(std::max<int64_t>(value, 0));
  const int msb = 63 - __builtin_clzll(static_cast<uint64_t>(value));
  const int shift = msb - kSubBucketBits;  // >= 1
  const int mantissa = static_cast<int>(value >> shift);  // [128, 255]
  return kExact + (shift - 1) * kSub + (mantissa - kSub);
}

int64_t LatencyHistogram::BucketLower(int bucket) {
  if (bucket < kExact) return bucket;
  const int shift = (bucket - kExact) / kSub + 1;
  const int64_t mantissa = kSub + (bucket - kExact) % kSub;
  return mantissa << shift;
}

int64_t LatencyHistogram::BucketUpper(int bucket) {
  if (bucket < kExact) return bucket;
  const int shift = (bucket - kExact) / kSub + 1;
  return BucketLower(bucket) + (int64_t{1} << shift) - 1;
}

int LatencyHistogram::NumBuckets() { return BucketOf(kMaxValue) + 1; }

LatencyHistogram::LatencyHistogram() : counts_(NumBuckets(), 0) {}

void LatencyHistogram::RecordN(int64_t value, int64_t n) {
  if (n <= 0) return;
  value = std::clamp<int64_t>(value, 0, kMaxValue);
  counts_[BucketOf(value)] += n;
  if (count_ == 0 || value < min_) min_ = value;
  if (count_ == 0 || value > max_) max_ = value;
  count_ += n;
  sum_ += value * n;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LatencyHistogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = min_ = max_ = sum_ = 0;
}

int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 100.0);
  // Nearest rank, 1-based; the epsilon keeps 7.000000000000001 from becoming 8.
  int64_t rank = static_cast<int64_t>(std::ceil(q / 100.0 * static_cast<double>(count_) - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, count_);
  if (rank == 1) return min_;
  if (rank == count_) return max_;
  int64_t seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      const int64_t lo = BucketLower(static_cast<int>(b));
      const int64_t hi = BucketUpper(static_cast<int>(b));
      return std::clamp(lo + (hi - lo) / 2, min_, max_);
    }
  }
  return max_;
}

}  // namespace rankd::loadtest
