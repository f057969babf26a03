// Waiting for the server to go idle between load steps.
//
// An overloaded step leaves work behind: requests queued in rankd's batcher,
// and more in the transport (gRPC's buffers and connections, on both sides)
// that rankd has not even parsed yet. A step started on top of that backlog
// measures the backlog, not its own rate, and so can every step after it.
// rankload therefore waits, after a step that failed its SLO or had errors,
// until the server looks idle from both ends, for at most `max_wait`:
//   * its counters (--metrics_url): rankd_requests_total (every model and
//     code) unchanged across one poll interval and rankd_queue_requests at 0;
//   * the transport: a cheap call (health check) over every connection the
//     load used answers within its short deadline. After a heavy overload
//     the server's counters can look idle while new calls on the same
//     connections still time out for seconds (the transport is still
//     draining what queued in it): the counters alone are not enough.
//
// Pure logic over injected probes and sleep (unit-tested with fakes).
#ifndef RANKD_LOADTEST_DRIVER_SERVER_DRAIN_H_
#define RANKD_LOADTEST_DRIVER_SERVER_DRAIN_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadtest/metrics/prometheus_text.h"

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
  absl::Status probe_status;   // the counters probe's error, when it failed
  absl::Status last_ping;      // the last transport check (OK when idle)
};

// Polls every `poll` until both hold at one poll, or `max_wait` has been
// slept (the probes' own time comes on top):
//   `probe` (may be empty: not checked): the same finished count as at the
//     previous read and nothing queued;
//   `ping` (may be empty: not checked): OK, i.e. every connection answered.
// `sleep` is absl::SleepFor outside tests.
DrainResult WaitForIdle(const std::function<absl::StatusOr<ServerLoad>()>& probe,
                        const std::function<absl::Status()>& ping, const DrainOptions& options,
                        const std::function<void(absl::Duration)>& sleep = absl::SleepFor);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_SERVER_DRAIN_H_
