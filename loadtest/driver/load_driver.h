// Runs one load step against rankd through a ScoreSender (rankd's gRPC API,
// KServe v2 over gRPC, or HTTP/JSON: score_sender.h) and measures
// it: open loop (requests sent on an arrival schedule whatever the server
// does; latency from each request's scheduled send time) or closed loop (N
// virtual users, each sending its next request when the previous one is
// answered).
//
// Threads. Open loop: `sender_threads` threads each own an arrival schedule of
// rate / threads and sleep until each send time (with 1 us timer slack), then
// send everything due; a sender that wakes late sends in a burst and counts
// the lag. Closed loop: each completion sends that user's next request from
// the sender's completion thread (a completion run inline inside the send is
// handed to a helper thread instead, so a failing server cannot recurse the
// stack). Completions record into a sharded Recorder (and, when given, append
// a row to the ResponseLog: response_log.h). A reporter thread closes
// an interval every `interval_s` (live line), and scrapes the server's
// metrics at the warm-up's end.
//
// Run() returns once every request of the step has been answered (each call
// has a deadline, so it always ends). One Run() at a time; the driver does not
// own the sender or the request pool, which must outlive it.
#ifndef RANKD_LOADTEST_DRIVER_LOAD_DRIVER_H_
#define RANKD_LOADTEST_DRIVER_LOAD_DRIVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/driver/response_log.h"
#include "loadtest/driver/score_sender.h"
#include "loadtest/metrics/prometheus_text.h"
#include "loadtest/report/report.h"
#include "loadtest/traffic/arrival_schedule.h"
#include "loadtest/traffic/request_generator.h"

namespace rankd::loadtest {

struct StepSpec {
  enum class Mode { kOpen, kClosed };
  Mode mode = Mode::kOpen;
  double rate_rps = 1000;  // open loop: total arrival rate, > 0
  Arrival arrival = Arrival::kConstant;
  int concurrency = 1;     // closed loop: requests in flight, >= 1
  double warmup_s = 1;     // >= 0; requests scheduled in it are not measured
  double duration_s = 10;  // > 0: the measured window
  uint64_t seed = 1;       // Poisson schedules
  int index = 0;           // the response log's `step` column (rankload: the report's step)
};

class LoadDriver {
 public:
  struct Options {
    // Sends the calls (made for `pool`). Not owned; not null.
    ScoreSender* sender = nullptr;
    // Requests sent round-robin (by index, to the sender). Not owned; non-empty.
    const RequestPool* pool = nullptr;
    // Open-loop sender threads; >= 1.
    int sender_threads = 1;
    // Open loop: a sender sleeps until this long before a send and spins the
    // rest, so the send leaves on time even where waking a sleeping thread is
    // slow and jittery (virtual machines: tens of us typical, milliseconds at
    // the tail), which would otherwise be counted as server latency. At rates
    // above 1e6 / spin_us per thread the senders never sleep. 0 = sleep only.
    // In [0, 100000].
    int64_t spin_us = 200;
    // Open loop: a sender waits (and the step is marked client-behind) while
    // this many calls are in flight; bounds the client's memory. >= 1.
    int64_t max_in_flight = 20000;
    // Deadline of each call, from its send; > 0.
    double deadline_ms = 1000;
    // Live-report period; > 0.
    double interval_s = 1;
    // Called on the reporter thread after each interval (may be null).
    std::function<void(const IntervalStats&)> on_interval;
    // Reads the server's /metrics (may be null: no server-side figures).
    std::function<absl::StatusOr<PromSnapshot>()> scrape;
    // Model names sent to, for the server-side figures.
    std::set<std::string> models;
    // The percentile LatencySummary::slo_percentile_us reports.
    double slo_percentile = 99;
    // Every finished call of every step (warm-up included) appends one row,
    // before the call counts as finished, so all of a step's rows are in
    // when Run() returns. Times are the step's steady clock mapped onto the
    // wall clock read once at the step's start (a wall-clock jump during
    // the step is not followed; differences between rows stay exact). May be
    // null (no log); not owned.
    ResponseLog* response_log = nullptr;
  };

  // INVALID_ARGUMENT naming the option when one is bad.
  static absl::StatusOr<std::unique_ptr<LoadDriver>> Create(const Options& options);
  ~LoadDriver();

  // INVALID_ARGUMENT naming the field for a bad spec. A failed scrape leaves
  // the server figures unavailable and is reported through `warning`.
  absl::StatusOr<StepResult> Run(const StepSpec& spec, std::string* warning = nullptr);

 private:
  explicit LoadDriver(const Options& options);
  struct Step;
  Options options_;
};

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_DRIVER_LOAD_DRIVER_H_
