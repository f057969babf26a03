// How many candidates each generated request carries (rankload --candidates):
//   "N"                          every request N
//   "uniform:LO:HI"              uniform in [LO, HI]
//   "lognormal:MEDIAN:SIGMA:MAX" round(MEDIAN * exp(SIGMA * z)), z standard
//                                normal, clamped to [1, MAX] (ranking traffic:
//                                most requests small, a long tail of large ones)
// Value type; Sample() is const and takes the caller's generator.
#ifndef RANKD_LOADTEST_TRAFFIC_CANDIDATE_COUNT_H_
#define RANKD_LOADTEST_TRAFFIC_CANDIDATE_COUNT_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rankd::loadtest {

class CandidateCount {
 public:
  enum class Kind { kFixed, kUniform, kLogNormal };

  // Parses a spec (see above); errors name `flag`.
  static absl::StatusOr<CandidateCount> Parse(absl::string_view spec,
                                              absl::string_view flag = "--candidates");
  static CandidateCount Fixed(int n);

  int Sample(std::mt19937_64& rng) const;
  // Largest value Sample() can return.
  int max() const;
  Kind kind() const { return kind_; }
  // The spec in the form Parse() takes.
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kFixed;
  int lo_ = 1;       // fixed value / uniform low
  int hi_ = 1;       // uniform high / lognormal max
  double median_ = 1;
  double sigma_ = 0;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_TRAFFIC_CANDIDATE_COUNT_H_
