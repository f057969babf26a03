// When an open-loop load generator sends: the arrival process of one sender.
//
// Constant: arrival i at offset phase + i / rate (computed from i, so no drift
// accumulates). Poisson: exponential gaps of mean 1 / rate from a seeded
// generator (same seed, same times). A load of rate R spread over T senders
// gives each sender rate R / T; constant senders take phases t / R so their
// union is evenly spaced, and the union of independent Poisson processes is a
// Poisson process of the summed rate.
//
// Not thread-safe: one sender thread owns one schedule.
#ifndef RANKD_LOADTEST_TRAFFIC_ARRIVAL_SCHEDULE_H_
#define RANKD_LOADTEST_TRAFFIC_ARRIVAL_SCHEDULE_H_

#include <cstdint>
#include <random>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rankd::loadtest {

enum class Arrival { kConstant, kPoisson };

// "constant" | "poisson"; INVALID_ARGUMENT naming --arrival otherwise.
absl::StatusOr<Arrival> ParseArrival(absl::string_view text);
const char* ArrivalName(Arrival arrival);

class ArrivalSchedule {
 public:
  struct Options {
    Arrival arrival = Arrival::kConstant;
    // Arrivals per second of this schedule; > 0 and finite.
    double rate_per_s = 1000;
    // Offset of the first constant-rate arrival, in ns (>= 0). Poisson ignores it.
    int64_t phase_ns = 0;
    uint64_t seed = 1;  // Poisson only
  };

  static absl::StatusOr<ArrivalSchedule> Create(const Options& options);

  // Offset of the next arrival from the schedule's start, in ns; non-decreasing.
  int64_t Next();

 private:
  explicit ArrivalSchedule(const Options& options);

  Options options_;
  int64_t index_ = 0;
  double poisson_t_s_ = 0;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_TRAFFIC_ARRIVAL_SCHEDULE_H_
