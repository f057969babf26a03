// Thread-safe collection of one step's measurements: every send (sender
// threads) and every completion (gRPC callback threads) of a load step.
//
// Sharded: each thread writes to one of kShards shards (picked once per
// thread), each behind its own mutex, so recording costs an uncontended lock
// and a few increments. Whole-window histograms stay in the shards until
// Totals(); the live interval's histogram is swapped out by TakeInterval()
// (the reporter thread, once per interval), so memory does not grow with the
// run's length.
//
// Times are nanoseconds from the step's start. A request belongs to the
// measured window when its scheduled send time is in [window_start,
// window_end); `latency` is measured from that scheduled time (coordinated
// omission corrected), `service` from the actual send.
#ifndef RANKD_LOADTEST_DRIVER_RECORDER_H_
#define RANKD_LOADTEST_DRIVER_RECORDER_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "loadtest/report/latency_histogram.h"

namespace rankd::loadtest {

inline constexpr int kNumCodes = 17;  // absl::StatusCode 0 .. 16
inline constexpr int64_t kLateSendNs = 1'000'000;  // a send more than 1 ms late is "late"

class Recorder {
 public:
  Recorder(int64_t window_start_ns, int64_t window_end_ns);

  // A request went out at `sent_ns`, scheduled for `scheduled_ns`.
  void RecordSend(int64_t scheduled_ns, int64_t sent_ns, int candidates);
  // Its answer arrived at `done_ns` with `code`.
  void RecordCompletion(int64_t scheduled_ns, int64_t sent_ns, int64_t done_ns,
                        absl::StatusCode code, int candidates);

  struct Interval {
    LatencyHistogram latency;  // of every completion since the last call
    int64_t completed = 0;
    int64_t errors = 0;
  };
  // What completed since the previous call (or the start).
  Interval TakeInterval();

  struct Totals {
    LatencyHistogram latency;   // window requests, from the scheduled time
    LatencyHistogram service;   // window requests, from the send
    LatencyHistogram send_lag;  // window sends: sent - scheduled
    int64_t sent = 0;           // window
    int64_t sent_candidates = 0;
    int64_t late_sends = 0;     // window sends more than kLateSendNs late
    int64_t completed = 0;      // window requests answered
    int64_t ok = 0;
    int64_t ok_candidates = 0;
    int64_t arrived_in_window = 0;  // answers (any request) arriving within the window
    std::array<int64_t, kNumCodes> window_codes{};
    std::array<int64_t, kNumCodes> total_codes{};  // every request of the step
  };
  // Merges every shard (call after the last completion).
  Totals GetTotals() const;

 private:
  static constexpr int kShards = 8;
  struct Shard {
    mutable absl::Mutex mu;
    Interval interval ABSL_GUARDED_BY(mu);
    Totals totals ABSL_GUARDED_BY(mu);
  };
  Shard& MyShard();
  bool InWindow(int64_t t) const { return t >= window_start_ns_ && t < window_end_ns_; }

  const int64_t window_start_ns_;
  const int64_t window_end_ns_;
  std::array<Shard, kShards> shards_;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_RECORDER_H_
