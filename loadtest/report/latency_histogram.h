// A log-bucketed latency histogram in the manner of HdrHistogram: values
// (nanoseconds, or any non-negative integer) go into buckets whose width is at
// most 1/128 of their lower edge, so a percentile read back from it is within
// 1/256 (0.4%) of a recorded value at that rank, whatever the range.
//
// Layout: values 0 .. 255 have a bucket each (exact). Above, every power of two
// [2^e, 2^(e+1)) is split into 128 equal buckets. Values above kMaxValue (about
// 137 s in nanoseconds) are clamped to it; min, max, count and sum are exact.
//
// Percentiles use the nearest-rank definition: Percentile(q) is the value of
// the ceil(q/100 * count)-th smallest recording (the smallest for q = 0),
// reported as the middle of its bucket, clamped to [min, max]. Against exact
// sorted samples the error is therefore at most half a bucket: 0 below 256,
// else <= 1/256 of the true value (tested in latency_histogram_test.cc).
//
// Not thread-safe: one writer at a time (see Recorder for the shared one).
// 32 KB of counters; copyable and mergeable.
#ifndef RANKD_LOADTEST_REPORT_LATENCY_HISTOGRAM_H_
#define RANKD_LOADTEST_REPORT_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace rankd::loadtest {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;  // 128 buckets per power of two
  static constexpr int64_t kMaxValue = (int64_t{1} << 37) - 1;
  // The largest relative error of Percentile() above the exact range.
  static constexpr double kMaxRelativeError = 1.0 / (2 << kSubBucketBits);

  LatencyHistogram();

  // Records `value` (negative values count as 0; values above kMaxValue as kMaxValue).
  void Record(int64_t value) { RecordN(value, 1); }
  void RecordN(int64_t value, int64_t n);
  // Adds every recording of `other`.
  void Merge(const LatencyHistogram& other);
  void Clear();

  int64_t count() const { return count_; }
  // Exact (of the clamped values). 0 when empty.
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }

  // q in [0, 100]; 0 when empty. See the file comment for the definition.
  int64_t Percentile(double q) const;

  // Bucket index of a value and the bucket's [lower, upper] value range; public for tests.
  static int BucketOf(int64_t value);
  static int64_t BucketLower(int bucket);
  static int64_t BucketUpper(int bucket);
  static int NumBuckets();

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  // Sum of clamped values; int64 holds 2^63 ns = 292 years of latency.
  int64_t sum_ = 0;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_REPORT_LATENCY_HISTOGRAM_H_
