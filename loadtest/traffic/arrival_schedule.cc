#include "loadtest/traffic/arrival_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace rankd::loadtest {

absl::StatusOr<Arrival> ParseArrival(absl::string_view text) {
  if (text == "constant") return Arrival::kConstant;
  if (text == "poisson") return Arrival::kPoisson;
  return absl::InvalidArgumentError(
      absl::StrCat("--arrival: must be constant or poisson, got \"", text, "\""));
}

const char* ArrivalName(Arrival arrival) {
  return arrival == Arrival::kPoisson ? "poisson" : "constant";
}

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::Create(const Options& options) {
  if (!(options.rate_per_s > 0) || !std::isfinite(options.rate_per_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate_per_s: must be > 0 and finite, got ", options.rate_per_s));
  }
  if (options.phase_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat("phase_ns: must be >= 0, got ", options.phase_ns));
  }
  return ArrivalSchedule(options);
}

ArrivalSchedule::ArrivalSchedule(const Options& options)
    : options_(options), rng_(options.seed), gap_(options.rate_per_s) {}

int64_t ArrivalSchedule::Next() {
  if (options_.arrival == Arrival::kConstant) {
    const double t_ns = static_cast<double>(index_++) * 1e9 / options_.rate_per_s;
    return options_.phase_ns + static_cast<int64_t>(std::llround(t_ns));
  }
  poisson_t_s_ += gap_(rng_);
  return static_cast<int64_t>(std::llround(poisson_t_s_ * 1e9));
}

}  // namespace rankd::loadtest
