// Zipf-distributed ranks for synthetic embedding ids.
//
// ZipfSampler draws ranks r in [0, n) with P(r) proportional to (r + 1)^-alpha,
// for any alpha > 0 (alpha < 1 included) and n up to 2^62, in O(1) time and
// memory per draw: rejection-inversion (W. Hormann, G. Derflinger, "Rejection-
// inversion to generate variates from monotone discrete distributions", ACM
// TOMACS 6(3), 1996). alpha = 0 draws uniformly.
//
// IdScatter maps popularity ranks to table rows through an affine bijection of
// [0, rows), so the hot rows are spread over the table instead of being rows
// 0, 1, 2, ... (what a real id space looks like to caches and hash tables).
//
// Both are cheap value types; a sampler is used by one thread with its own
// random generator.
#ifndef RANKD_LOADTEST_TRAFFIC_ZIPF_H_
#define RANKD_LOADTEST_TRAFFIC_ZIPF_H_

#include <cstdint>
#include <random>

#include "absl/status/statusor.h"

namespace rankd::loadtest {

class ZipfSampler {
 public:
  // n >= 1, alpha >= 0 and finite; INVALID_ARGUMENT otherwise.
  static absl::StatusOr<ZipfSampler> Create(int64_t n, double alpha);

  int64_t operator()(std::mt19937_64& rng) const;

  int64_t n() const { return n_; }
  double alpha() const { return alpha_; }

 private:
  ZipfSampler(int64_t n, double alpha);
  double H(double x) const;     // integral of x^-alpha, up to a constant
  double HInv(double y) const;  // its inverse
  double h(double x) const;     // x^-alpha

  int64_t n_;
  double alpha_;
  double h_integral_x1_ = 0;
  double h_integral_n_ = 0;
  double s_ = 0;
};

class IdScatter {
 public:
  explicit IdScatter(int64_t rows);
  int64_t operator()(int64_t rank) const;

 private:
  int64_t rows_;
  int64_t mult_ = 1;
  int64_t offset_ = 0;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_TRAFFIC_ZIPF_H_
