// What a rankload run measured: one StepResult per run step (a single run, each
// point of a sweep, each probe of an SLO search), the SLO search's answer and
// the run's settings; and the human-readable text form of it. The JSON and CSV
// forms are in report_json.h and report_csv.h. Plain value types.
//
// Conventions: latencies in microseconds; rates per second; "window" = the
// measured part of a step (after warm-up). A request belongs to the window when
// its scheduled send time (open loop) or its send time (closed loop) falls in
// it; counts "total" include the warm-up.
#ifndef RANKD_LOADTEST_REPORT_REPORT_H_
#define RANKD_LOADTEST_REPORT_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadtest/metrics/prometheus_text.h"
#include "loadtest/report/latency_histogram.h"

namespace rankd::loadtest {

struct LatencySummary {
  int64_t count = 0;
  double min_us = 0, mean_us = 0, p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  // The SLO percentile (RunSettings::slo_percentile) when a bound is set, else p99.
  double slo_percentile_us = 0;
};

// Summary of a histogram of nanoseconds, with `slo_percentile` (e.g. 99.9) as well.
LatencySummary Summarize(const LatencyHistogram& ns, double slo_percentile);

// One live-report interval (default 1 s) of a step, by completion time.
struct IntervalStats {
  double start_s = 0;   // from the step's start
  double length_s = 0;
  bool warmup = false;  // the interval started inside the warm-up
  int64_t completed = 0;
  int64_t errors = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;  // latency (corrected in open loop)
  int64_t in_flight = 0;                      // at the interval's end
};

struct StepResult {
  std::string mode;              // "open" | "closed"
  std::string arrival;           // open: "constant" | "poisson"
  double target_rps = 0;         // open loop
  int concurrency = 0;           // closed loop
  double warmup_s = 0, duration_s = 0;
  double mean_candidates = 0;    // of the requests sent in the window

  // Rates over the window.
  int64_t sent = 0;              // requests sent (open: scheduled) in the window
  int64_t completed = 0;         // answers (any code) to them
  double sent_rps = 0;           // sent / duration
  double achieved_rps = 0;       // answers (any code) arriving in the window / duration
  double ok_rps = 0;             // OK answers to window requests / duration
  double candidates_per_s = 0;   // candidates of those OK answers / duration
  int64_t ok = 0;
  int64_t errors = 0;
  std::map<std::string, int64_t> errors_by_code;      // window, gRPC code name
  std::map<std::string, int64_t> total_by_code;       // whole step (warm-up too), OK included

  // Open loop: latency from the scheduled send time (coordinated omission
  // corrected). Closed loop: from the send (= service).
  LatencySummary latency;
  // From the actual send (what a closed-loop tool reports).
  LatencySummary service;
  // Open loop: actual send - scheduled send.
  LatencySummary send_lag;
  int64_t late_sends = 0;        // sends more than 1 ms behind schedule
  bool client_behind = false;    // > 1% (and >= 10) of sends more than 1 ms late, or the cap hit
  int64_t in_flight_cap_waits = 0;
  // rankload's own CPU (all its threads) over the window, in cores (CPU
  // seconds a second); 0 where not measured (reports from before it was).
  double client_cpu_cores = 0;

  std::vector<IntervalStats> intervals;

  ServerFigures server_window;   // scrape at warm-up end -> after the step
  ServerFigures server_total;    // scrape before the step -> after it

  // SLO verdict, when an SLO bound is set.
  std::optional<bool> slo_pass;
  std::string slo_reason;
};

struct SloResult {
  bool found = false;
  double percentile = 99;
  double latency_bound_ms = 0;
  double max_error_ratio = 0;
  double best_rps = 0;               // highest passing target rate
  double best_achieved_rps = 0;
  double best_candidates_per_s = 0;
  double best_latency_us = 0;        // its SLO percentile
  int best_step = -1;                // index into Report::steps
  int steps = 0;
  std::string stop_reason;           // why the search ended
};

struct RunSettings {
  std::string label;
  std::string target;                // where the load went (the HTTP address for http)
  std::string protocol = "rankd";    // rankd | kserve | http (loadtest/driver/score_sender.h)
  std::string mode;                  // open | closed | slo
  std::string traffic;               // "generated ..." or "replay FILES"
  std::string models;                // comma-separated model names sent to
  int connections = 0;               // gRPC channels, or HTTP connections for http
  int threads = 0;
  int64_t spin_us = 0;               // open-loop senders' spin before each send
  double deadline_ms = 0;
  double slo_percentile = 99;        // percentile the SLO (and the latency.slo_* fields) use
  std::string started_at;            // ISO 8601, UTC
  std::string command_line;
  double drain_s = 0;                // wait for an idle server after a failed step
  int slo_recheck = 0;               // re-runs of a failing SLO probe
};

struct Report {
  RunSettings settings;
  std::vector<StepResult> steps;
  std::optional<SloResult> slo;
};

// The final report as text: one block per step (or a table for several), then
// the SLO answer.
std::string FormatReport(const Report& report);

// One line for the live view: "[ 3s] 1001 req/s  p50 0.41 ms  p99 1.20 ms  err 0  in flight 2".
std::string FormatInterval(const IntervalStats& interval, const std::string& prefix);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_REPORT_REPORT_H_
