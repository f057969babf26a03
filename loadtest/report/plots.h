// PNG plots of a report through gnuplot (Debian package gnuplot-nox, pngcairo
// terminal): the data files and gnuplot scripts are written into a directory,
// then `gnuplot SCRIPT` renders each.
//   latency_over_time.png       p50 / p99 / max and answers/s per live
//                               interval, every step one after another
//   latency_vs_throughput.png   p50 / p90 / p99 / p99.9 against the achieved
//                               rate, one point per step (sweeps and SLO
//                               searches only), with the SLO bound
// The scripts name their data and PNG files relative to their own directory,
// so `cd DIR && gnuplot *.gp` renders them on another machine too.
// Blocking (runs gnuplot as a child process); no shared state.
#ifndef RANKD_LOADTEST_REPORT_PLOTS_H_
#define RANKD_LOADTEST_REPORT_PLOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/report/report.h"

namespace rankd::loadtest {

struct PlotOptions {
  std::string dir;                 // created when missing
  std::string gnuplot = "gnuplot"; // program name (looked up in PATH) or path
  std::string title = "rankload";
  double slo_latency_ms = 0;       // > 0: draw the bound on latency_vs_throughput
  double slo_percentile = 99;
};

struct PlotFiles {
  std::vector<std::string> scripts;  // .gp files, written
  std::vector<std::string> pngs;     // rendered
};

// Writes the data and scripts (INVALID_ARGUMENT naming `dir` when it cannot be
// written), then renders them: NOT_FOUND when gnuplot cannot be run, INTERNAL
// when it fails (its messages are in DIR/gnuplot.log); the scripts stay, so
// `cd DIR && gnuplot *.gp` can render them elsewhere. `files` (may be null) lists
// what was written even on error.
absl::Status WritePlots(const Report& report, const PlotOptions& options, PlotFiles* files);

// Gnuplot scripts (exposed for tests): `data` and `png` are paths (relative to
// gnuplot's working directory).
std::string LatencyOverTimeScript(const std::string& data, const std::string& png,
                                  const std::string& title);
std::string LatencyThroughputScript(const std::string& data, const std::string& png,
                                    const std::string& title, double slo_latency_ms,
                                    double slo_percentile);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_REPORT_PLOTS_H_
