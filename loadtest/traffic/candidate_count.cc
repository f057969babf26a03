#include "loadtest/traffic/candidate_count.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rankd::loadtest {
namespace {

constexpr int kMaxCandidates = 1 << 20;

absl::Status Bad(absl::string_view flag, absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": ", why, " (got \"", spec,
      "\"; want N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX with 1 <= N <= ", kMaxCandidates,
      ")"));
}

bool ParseCount(absl::string_view text, int* out) {
  return absl::SimpleAtoi(text, out) && *out >= 1 && *out <= kMaxCandidates;
}

}  // namespace

CandidateCount CandidateCount::Fixed(int n) {
  CandidateCount c;
  c.lo_ = c.hi_ = n;
  return c;
}

absl::StatusOr<CandidateCount> CandidateCount::Parse(absl::string_view spec,
                                                     absl::string_view flag) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  CandidateCount c;
  if (parts.size() == 1) {
    int n = 0;
    if (!ParseCount(parts[0], &n)) return Bad(flag, spec, "not a count");
    return Fixed(n);
  }
  if (parts[0] == "uniform") {
    if (parts.size() != 3) return Bad(flag, spec, "uniform takes LO:HI");
    c.kind_ = Kind::kUniform;
    if (!ParseCount(parts[1], &c.lo_) || !ParseCount(parts[2], &c.hi_) || c.lo_ > c.hi_) {
      return Bad(flag, spec, "need 1 <= LO <= HI");
    }
    return c;
  }
  if (parts[0] == "lognormal") {
    if (parts.size() != 4) return Bad(flag, spec, "lognormal takes MEDIAN:SIGMA:MAX");
    c.kind_ = Kind::kLogNormal;
    if (!absl::SimpleAtod(parts[1], &c.median_) || !(c.median_ >= 1) ||
        !std::isfinite(c.median_)) {
      return Bad(flag, spec, "MEDIAN must be >= 1");
    }
    if (!absl::SimpleAtod(parts[2], &c.sigma_) || !(c.sigma_ >= 0) || c.sigma_ > 10) {
      return Bad(flag, spec, "SIGMA must be in [0, 10]");
    }
    if (!ParseCount(parts[3], &c.hi_)) return Bad(flag, spec, "MAX must be a count");
    c.lo_ = 1;
    return c;
  }
  return Bad(flag, spec, absl::StrCat("unknown distribution \"", parts[0], "\""));
}

int CandidateCount::Sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed:
      return lo_;
    case Kind::kUniform:
      return std::uniform_int_distribution<int>(lo_, hi_)(rng);
    case Kind::kLogNormal: {
      const double z = std::normal_distribution<double>(0.0, 1.0)(rng);
      const double v = std::round(median_ * std::exp(sigma_ * z));
      return static_cast<int>(std::clamp(v, 1.0, static_cast<double>(hi_)));
    }
  }
  return lo_;
}

int CandidateCount::max() const { return hi_; }

std::string CandidateCount::ToString() const {
  switch (kind_) {
    case Kind::kFixed:
      return absl::StrCat(lo_);
    case Kind::kUniform:
      return absl::StrCat("uniform:", lo_, ":", hi_);
    case Kind::kLogNormal:
      return absl::StrCat("lognormal:", median_, ":", sigma_, ":", hi_);
  }
  return "";
}

}  // namespace rankd::loadtest
