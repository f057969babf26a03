#include "engine/serving/clock.h"

namespace rankd::engine {

RealClock* RealClock::Get() {
  // Leaked on purpose: worker threads may read it during static destruction.
  static RealClock* const clock = new RealClock();
  return clock;
}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace rankd::engine
