// Waiting for the server to go idle between load steps.
//
// An overloaded step leaves work behind: requests queued in rankd's batcher,
// and more in gRPC's buffers that rankd has not even parsed yet (each costs
// parsing before the batcher can drop it as expired). A step started on top
// of that backlog measures the backlog, not its own rate, and so does every
// step after it. rankload therefore waits, after a step that failed its SLO or
// had errors, until the server's counters say it is idle: rankd_requests_total
// (over every model and code) unchanged across one poll interval and
// rankd_queue_requests at 0, for at most `max_wait`.
//
// Pure logic over an injected probe and sleep (unit-tested with fakes); the
// caller passes a probe that scrapes --metrics_url.
#ifndef RANKD_LOADTEST_SERVER_DRAIN_H_
#define RANKD_LOADTEST_SERVER_DRAIN_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadtest/prometheus_text.h"

namespace rankd::loadtest {

// What the server says about its load at one moment.
struct ServerLoad {
  double finished = 0;  // Score RPCs finished so far (any model, any code)
  double queued = 0;    // requests waiting in the batchers now
};

// ServerLoad from a rankd /metrics snapshot.
ServerLoad LoadFromMetrics(const PromSnapshot& metrics);

struct DrainOptions {
  absl::Duration max_wait = absl::Seconds(10);  // give up after this long
  absl::Duration poll = absl::Milliseconds(250);  // between two reads (> 0)
};

struct DrainResult {
  bool idle = false;           // false: max_wait passed, or the probe failed
  absl::Duration waited;       // total time slept
  double finished_while_waiting = 0;  // requests the server finished meanwhile
  absl::Status probe_status;   // the probe's error, when it failed
};

// Polls `probe` every `poll` until two reads in a row show the same finished
// count and nothing queued, or `max_wait` has been slept. `sleep` is
// absl::SleepFor outside tests.
DrainResult WaitForIdle(const std::function<absl::StatusOr<ServerLoad>()>& probe,
                        const DrainOptions& options,
                        const std::function<void(absl::Duration)>& sleep = absl::SleepFor);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_SERVER_DRAIN_H_
