#include "loadtest/slo/slo_search.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rankd::loadtest {

absl::StatusOr<SloSearch> SloSearch::Create(const Options& o) {
  if (!(o.start_rps > 0) || !std::isfinite(o.start_rps)) {
    return absl::InvalidArgumentError(absl::StrCat("start_rps: must be > 0, got ", o.start_rps));
  }
  if (!(o.growth > 1) || !std::isfinite(o.growth)) {
    return absl::InvalidArgumentError(absl::StrCat("growth: must be > 1, got ", o.growth));
  }
  if (!(o.precision > 0) || !std::isfinite(o.precision)) {
    return absl::InvalidArgumentError(absl::StrCat("precision: must be > 0, got ", o.precision));
  }
  if (o.max_rps != 0 && !(o.max_rps >= o.start_rps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rps: must be 0 (no cap) or >= start_rps (", o.start_rps, "), got ",
                     o.max_rps));
  }
  if (!(o.min_rps > 0) || o.min_rps > o.start_rps) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_rps: must be in (0, start_rps], got ", o.min_rps));
  }
  if (o.max_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_steps: must be >= 1, got ", o.max_steps));
  }
  if (o.recheck < 0 || o.recheck > 10) {
    return absl::InvalidArgumentError(absl::StrCat("recheck: must be in [0, 10], got ", o.recheck));
  }
  return SloSearch(o);
}

SloSearch::SloSearch(const Options& options) : options_(options), next_(options.start_rps) {}

std::optional<double> SloSearch::NextRate() const {
  if (phase_ == Phase::kDone) return std::nullopt;
  return next_;
}

void SloSearch::Finish(std::string reason) {
  phase_ = Phase::kDone;
  reason_ = std::move(reason);
}

void SloSearch::Report(double rate, bool pass) {
  if (phase_ == Phase::kDone) return;
  ++steps_;
  if (options_.recheck > 0) {
    if (vote_rate_ != rate) {
      vote_rate_ = 0;
      vote_pass_ = vote_fail_ = 0;
    }
    if (vote_rate_ == 0 && pass) return Decide(rate, true);  // a first pass stands
    if (vote_rate_ != 0) ++rechecks_;
    vote_rate_ = rate;
    (pass ? vote_pass_ : vote_fail_) += 1;
    const int majority = (1 + options_.recheck) / 2 + 1;
    if (vote_pass_ < majority && vote_fail_ < majority) {
      // Undecided: probe the same rate again.
      next_ = rate;
      if (steps_ >= options_.max_steps) {
        Finish(absl::StrFormat(
            "stopped after --slo_max_steps=%d probes while rechecking %g req/s (passes at %g, "
            "fails at %g)",
            options_.max_steps, rate, lo_, hi_));
      }
      return;
    }
    const bool decided_pass = vote_pass_ >= majority;
    if (decided_pass) ++overturned_;
    vote_rate_ = 0;
    vote_pass_ = vote_fail_ = 0;
    return Decide(rate, decided_pass);
  }
  Decide(rate, pass);
}

void SloSearch::Decide(double rate, bool pass) {
  if (pass) {
    lo_ = std::max(lo_, rate);
  } else {
    hi_ = hi_ == 0 ? rate : std::min(hi_, rate);
  }
  switch (phase_) {
    case Phase::kGrow:
      if (pass) {
        if (options_.max_rps > 0 && rate >= options_.max_rps) {
          return Finish(absl::StrFormat("passed at the cap --slo_max_rps=%g", options_.max_rps));
        }
        next_ = rate * options_.growth;
        if (options_.max_rps > 0) next_ = std::min(next_, options_.max_rps);
      } else if (lo_ > 0) {
        phase_ = Phase::kBisect;
      } else {
        phase_ = Phase::kShrink;
        next_ = rate / options_.growth;
      }
      break;
    case Phase::kShrink:
      if (pass) {
        phase_ = Phase::kBisect;
      } else {
        next_ = rate / options_.growth;
      }
      break;
    case Phase::kBisect:
    case Phase::kDone:
      break;
  }
  if (phase_ == Phase::kShrink && next_ < options_.min_rps) {
    return Finish(absl::StrFormat("failed at every rate down to %g req/s", rate));
  }
  if (phase_ == Phase::kBisect) {
    if ((hi_ - lo_) / lo_ <= options_.precision) {
      return Finish(absl::StrFormat(
          "bracketed: passes at %g req/s, fails at %g req/s (within %g%%)", lo_, hi_,
          options_.precision * 100));
    }
    next_ = (lo_ + hi_) / 2;
  }
  if (steps_ >= options_.max_steps) {
    Finish(absl::StrFormat("stopped after --slo_max_steps=%d probes (passes at %g, fails at %g)",
                           options_.max_steps, lo_, hi_));
  }
}

}  // namespace rankd::loadtest
