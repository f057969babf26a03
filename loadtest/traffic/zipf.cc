#include "loadtest/traffic/zipf.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace rankd::loadtest {
namespace {

// log1p(z) / z, continuous at 0.
double Log1pOverX(double z) {
  return std::abs(z) > 1e-8 ? std::log1p(z) / z : 1.0 - z / 2.0 + z * z / 3.0;
}

// expm1(y) / y, continuous at 0.
double Expm1OverX(double y) {
  return std::abs(y) > 1e-8 ? std::expm1(y) / y : 1.0 + y / 2.0 + y * y / 6.0;
}

}  // namespace

absl::StatusOr<ZipfSampler> ZipfSampler::Create(int64_t n, double alpha) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("zipf: n must be >= 1, got ", n));
  if (!(alpha >= 0) || !std::isfinite(alpha)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zipf: alpha must be >= 0 and finite, got ", alpha));
  }
  return ZipfSampler(n, alpha);
}

ZipfSampler::ZipfSampler(int64_t n, double alpha) : n_(n), alpha_(alpha) {
  if (alpha_ == 0) return;
  // Ranks are 1-based in the method: k in [1, n], hat area over [k - 1/2, k + 1/2].
  h_integral_x1_ = H(1.5) - 1.0;
  h_integral_n_ = H(static_cast<double>(n_) + 0.5);
  s_ = 2.0 - HInv(H(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const { return std::exp(-alpha_ * std::log(x)); }

// (x^(1-alpha) - 1) / (1 - alpha), or log(x) at alpha = 1, without cancellation.
double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1.0 - alpha_) * log_x) * log_x;
}

double ZipfSampler::HInv(double y) const {
  double t = y * (1.0 - alpha_);
  t = std::max(t, -1.0);  // rounding at the far end of the range
  return std::exp(Log1pOverX(t) * y);
}

int64_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  if (n_ == 1) return 0;
  if (alpha_ == 0) return std::uniform_int_distribution<int64_t>(0, n_ - 1)(rng);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (;;) {
    const double u = h_integral_n_ + unit(rng) * (h_integral_x1_ - h_integral_n_);
    const double x = HInv(u);
    int64_t k = static_cast<int64_t>(x + 0.5);
    k = std::clamp<int64_t>(k, 1, n_);
    if (static_cast<double>(k) - x <= s_ ||
        u >= H(static_cast<double>(k) + 0.5) - h(static_cast<double>(k))) {
      return k - 1;
    }
  }
}

IdScatter::IdScatter(int64_t rows) : rows_(std::max<int64_t>(rows, 1)) {
  if (rows_ < 3) return;
  // A multiplier near rows / golden ratio, coprime with rows: a bijection.
  mult_ = static_cast<int64_t>(static_cast<double>(rows_) * 0.6180339887498949) | 1;
  while (std::gcd(mult_, rows_) != 1) mult_ += 2;
  mult_ %= rows_;
  if (mult_ == 0) mult_ = 1;
  offset_ = rows_ / 3;
}

int64_t IdScatter::operator()(int64_t rank) const {
  const __int128 r = static_cast<__int128>(rank % rows_) * mult_ + offset_;
  return static_cast<int64_t>(r % rows_);
}

}  // namespace rankd::loadtest
