// Prometheus text exposition format (version 0.0.4), parsed into samples, and
// the server-side figures rankload derives from two scrapes of rankd's
// /metrics (docs/operations.md lists the series).
//
// Parsing: "# ..." lines (HELP, TYPE, comments) and blank lines are skipped;
// a sample is `name[{label="value",...}] value [timestamp]`, label values with
// \\, \" and \n escapes, values as floats or +Inf / -Inf / NaN. Errors name
// the line. Value types; no shared state.
#ifndef RANKD_LOADTEST_METRICS_PROMETHEUS_TEXT_H_
#define RANKD_LOADTEST_METRICS_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rankd::loadtest {

using PromLabels = std::map<std::string, std::string>;

struct PromSample {
  std::string name;
  PromLabels labels;
  double value = 0;
};

class PromSnapshot {
 public:
  static absl::StatusOr<PromSnapshot> Parse(absl::string_view text);

  const std::vector<PromSample>& samples() const { return samples_; }

  // Sum of the samples called `name` whose labels pass `filter` (all when null).
  double Sum(absl::string_view name,
             const std::function<bool(const PromLabels&)>& filter = nullptr) const;

  // Cumulative bucket counts of histogram `base` (samples `base`_bucket),
  // summed over the series passing `filter`, by upper edge ("le"; +Inf last).
  std::map<double, double> Buckets(absl::string_view base,
                                   const std::function<bool(const PromLabels&)>& filter = nullptr) const;

 private:
  std::vector<PromSample> samples_;
};

// The q-quantile (q in [0, 1]) of a histogram given as cumulative counts by
// upper edge, interpolating linearly inside the bucket that holds it (what
// PromQL's histogram_quantile does; the lowest bucket starts at 0). The answer
// is only as fine as the bucket edges. NaN for an empty histogram; the highest
// finite edge when the quantile falls in the +Inf bucket.
double HistogramQuantile(double q, const std::map<double, double>& cumulative);

// What the server measured between two scrapes of its /metrics, for the
// models rankload sent to (plus model="", where rankd counts requests for
// models it does not serve). Means are (sum after - sum before) / (count
// after - count before) of the histograms; server percentiles come from the
// bucket differences (coarse: rankd's latency buckets are 0.1, 0.25, 0.5, 1,
// 2, 5, 10, ... ms). Any other client of the same server is counted too.
struct ServerFigures {
  bool available = false;
  double span_s = 0;                            // time between the two scrapes
  std::map<std::string, int64_t> requests_by_code;  // rankd_requests_total
  int64_t requests = 0;
  int64_t candidates = 0;                       // rankd_candidates_total
  int64_t batches = 0;                          // rankd_batch_candidates_count
  double mean_request_us = 0;                   // rankd_request_duration_seconds
  double p50_request_us = 0;                    // from its buckets
  double p99_request_us = 0;
  double mean_queue_us = 0;                     // rankd_queue_duration_seconds
  double p99_queue_us = 0;
  double mean_compute_us = 0;                   // rankd_compute_duration_seconds (per batch)
  double mean_batch_candidates = 0;             // rankd_batch_candidates
  double mean_batch_requests = 0;               // rankd_batch_requests
  int64_t ids_missing = 0;                      // rankd_ids_missing_total
  int64_t ids_out_of_range = 0;                 // rankd_ids_out_of_range_total
};

ServerFigures ServerDelta(const PromSnapshot& before, const PromSnapshot& after,
                          const std::set<std::string>& models, double span_s);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_METRICS_PROMETHEUS_TEXT_H_
