// Clock: where the serving path reads the time. Injected (never
// absl::Now() directly) so batcher tests run on a FakeClock, without sleeps.
#ifndef RANKD_ENGINE_SERVING_CLOCK_H_
#define RANKD_ENGINE_SERVING_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rankd::engine {

// Implementations are thread-safe: Now() is called from request threads and
// worker threads at once.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Stateless; Get() returns a process-wide instance that is never
// destroyed (safe to use from threads that outlive main's locals).
class RealClock final : public Clock {
 public:
  static RealClock* Get();
  absl::Time Now() const override { return absl::Now(); }
};

// A clock that moves only when told to. Starts at an arbitrary fixed instant
// (not the epoch, so "zero" times stand out in failures).
//
// Nothing waits on a FakeClock: a thread blocked in DynamicBatcher::NextBatch
// sleeps for the (real) duration the fake time asked for and then re-reads
// Now(). Tests that need exact control call DynamicBatcher::TryCutBatch(now).
class FakeClock final : public Clock {
 public:
  FakeClock() = default;
  explicit FakeClock(absl::Time start) : now_(start) {}

  absl::Time Now() const override;
  void Set(absl::Time t);
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'700'000'000);
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_SERVING_CLOCK_H_
