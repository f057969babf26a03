// The SLO search: the highest request rate at which a latency percentile stays
// under a bound with errors under a bound, found by short open-loop runs.
//
// Method (each probe is one open-loop step at a target rate):
//  1. Grow: start at `start_rps`, multiply by `growth` while probes pass (up to
//     `max_rps`, when set).
//  2. If the very first probe fails, shrink instead: divide by `growth` until
//     a probe passes (or the rate drops below `min_rps`: not found).
//  3. Bisect between the highest passing rate `lo` and the lowest failing rate
//     `hi` until (hi - lo) / lo <= `precision`.
// The answer is the highest passing rate probed. `max_steps` bounds the number
// of probes (the answer is then the best so far, and the stop reason says so).
//
// Rechecks: a tail percentile measured over a few seconds is noisy in one
// direction only: a stall of the machine (a thread woken milliseconds late)
// can fail a probe that the server would pass, while nothing makes an
// overloaded server pass. So a failing probe is re-run up to `recheck` more
// times at the same rate and the majority of the 1 + `recheck` probes decides
// (stopping as soon as it is known: with recheck 2, fail-fail decides after
// two probes, fail-pass-pass and fail-pass-fail after three). A passing first
// probe is taken as is. recheck 0: every probe decides alone.
// Latency rises steeply near saturation, so growth finds the knee in a few
// probes and bisection needs about log2(1 / precision) more.
//
// A pure state machine, no I/O: the caller runs the probes.
//   SloSearch search = *SloSearch::Create(options);
//   while (auto rate = search.NextRate()) search.Report(*rate, RunProbe(*rate));
#ifndef RANKD_LOADTEST_SLO_SLO_SEARCH_H_
#define RANKD_LOADTEST_SLO_SLO_SEARCH_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace rankd::loadtest {

class SloSearch {
 public:
  struct Options {
    double start_rps = 100;  // > 0
    double growth = 2;       // > 1
    double precision = 0.05; // > 0: stop when (hi - lo) / lo <= precision
    double max_rps = 0;      // 0 = no cap; else >= start_rps
    double min_rps = 1;      // > 0: the shrink phase gives up below it
    int max_steps = 30;      // >= 1
    int recheck = 0;         // [0, 10]: re-runs of a failing probe (see above)
  };

  static absl::StatusOr<SloSearch> Create(const Options& options);

  // The next rate to probe, or nullopt when the search is over.
  std::optional<double> NextRate() const;
  // The outcome of the probe at the rate NextRate() returned.
  void Report(double rate, bool pass);
  // Probes that were re-runs of a failing probe (see Rechecks above), and the
  // rates whose first probe failed but whose majority passed.
  int rechecks() const { return rechecks_; }
  int overturned() const { return overturned_; }

  bool found() const { return lo_ > 0; }
  double best_rps() const { return lo_; }
  // Lowest failing rate probed (0 = none failed).
  double lowest_failing_rps() const { return hi_; }
  int steps() const { return steps_; }
  // Why the search ended (or "running").
  const std::string& stop_reason() const { return reason_; }

 private:
  explicit SloSearch(const Options& options);
  enum class Phase { kGrow, kShrink, kBisect, kDone };
  void Finish(std::string reason);
  // The search's own step, once the rate's outcome is decided.
  void Decide(double rate, bool pass);

  Options options_;
  Phase phase_ = Phase::kGrow;
  double next_ = 0;
  double lo_ = 0;  // highest passing rate
  double hi_ = 0;  // lowest failing rate
  int steps_ = 0;
  // Votes at the rate being rechecked (vote_rate_ 0: none).
  double vote_rate_ = 0;
  int vote_pass_ = 0;
  int vote_fail_ = 0;
  int rechecks_ = 0;
  int overturned_ = 0;
  std::string reason_ = "running";
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_SLO_SLO_SEARCH_H_
