// The median of a benchmark's repeated measurements (the upper middle one for
// an even count; 0 for none): benchmarks report medians, not means, so one
// slow repeat does not move the figure.
#ifndef RANKD_BENCH_MEDIAN_H_
#define RANKD_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace rankd::bench {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace rankd::bench

#endif  // RANKD_BENCH_MEDIAN_H_
