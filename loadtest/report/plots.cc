#include "loadtest/report/plots.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

extern char** environ;

namespace rankd::loadtest {
namespace {

// A gnuplot single-quoted string.
std::string Quote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--plot_dir: cannot write ", path));
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::InvalidArgumentError(
            absl::StrCat("--plot_dir: cannot create ", path, ": ", std::strerror(errno)));
      }
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--plot_dir: ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

std::string MsOrMissing(double us, int64_t count) {
  return count > 0 && us > 0 ? absl::StrFormat("%.6g", us / 1000.0) : "?";
}

// Runs `gnuplot -e "cd 'dir'" script` (the scripts name their files relative
// to their directory), stderr and stdout appended to `log`.
absl::Status RunGnuplot(const std::string& gnuplot, const std::string& dir,
                        const std::string& script, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::string arg0 = gnuplot, arg1 = "-e", arg2 = absl::StrCat("cd ", Quote(dir)), arg3 = script;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), arg3.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, gnuplot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("--gnuplot: cannot run \"", gnuplot, "\": ",
                                            std::strerror(rc),
                                            " (Debian: apt-get install gnuplot-nox)"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::NotFoundError(absl::StrCat("--gnuplot: \"", gnuplot, "\" not found"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ", script, " (see ", log, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string LatencyOverTimeScript(const std::string& data, const std::string& png,
                                  const std::string& title) {
  return absl::StrCat(
      "set terminal pngcairo size 1100,650 noenhanced\n", "set output ", Quote(png), "\n",
      "set title ", Quote(absl::StrCat(title, ": latency over time (per interval, by completion)")),
      "\n",
      "set datafile missing '?'\n"
      "set xlabel 'time since the first step started (s)'\n"
      "set ylabel 'latency (ms, log scale)'\n"
      "set logscale y\n"
      "set ytics nomirror\n"
      "set y2label 'answers per second'\n"
      "set y2tics\n"
      "set y2range [0:*]\n"
      "set grid\n"
      "set key outside bottom center horizontal\n"
      "plot ",
      Quote(data), " using 1:5 with lines lw 2 lc rgb '#d62728' title 'p99', ", Quote(data),
      " using 1:4 with lines lw 2 lc rgb '#1f77b4' title 'p50', ", Quote(data),
      " using 1:6 with lines dt 2 lc rgb '#7f7f7f' title 'max', ", Quote(data),
      " using 1:3 axes x1y2 with lines lc rgb '#2ca02c' title 'answers/s'\n");
}

std::string LatencyThroughputScript(const std::string& data, const std::string& png,
                                    const std::string& title, double slo_latency_ms,
                                    double slo_percentile) {
  std::string plot = absl::StrCat(
      "plot ", Quote(data), " using 1:5 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'p99', ",
      Quote(data), " using 1:6 with linespoints pt 6 lc rgb '#9467bd' title 'p99.9', ", Quote(data),
      " using 1:4 with linespoints pt 5 lc rgb '#ff7f0e' title 'p90', ", Quote(data),
      " using 1:3 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'p50'");
  if (slo_latency_ms > 0) {
    absl::StrAppend(&plot, ", ", absl::StrFormat("%.6g", slo_latency_ms),
                    " with lines dt 3 lw 2 lc rgb 'black' title ",
                    Quote(absl::StrFormat("SLO: p%g <= %g ms", slo_percentile, slo_latency_ms)));
  }
  return absl::StrCat(
      "set terminal pngcairo size 1100,650 noenhanced\n", "set output ", Quote(png), "\n",
      "set title ", Quote(absl::StrCat(title, ": latency vs throughput (one point per step)")), "\n",
      "set datafile missing '?'\n"
      "set xlabel 'achieved requests per second'\n"
      "set ylabel 'latency (ms, log scale)'\n"
      "set logscale y\n"
      "set xrange [0:*]\n"
      "set grid\n"
      "set key top left\n",
      plot, "\n");
}

absl::Status WritePlots(const Report& report, const PlotOptions& options, PlotFiles* files) {
  PlotFiles local;
  PlotFiles& out = files != nullptr ? *files : local;
  if (options.dir.empty()) return absl::InvalidArgumentError("--plot_dir: empty");
  if (absl::Status s = MakeDirs(options.dir); !s.ok()) return s;
  const std::string dir = options.dir;
  const std::string log = absl::StrCat(dir, "/gnuplot.log");

  // Latency over time: every step's intervals on one clock.
  std::string data = "# time_s(middle of the interval) step answers_per_s p50_ms p99_ms max_ms errors warmup\n";
  double offset = 0;
  for (size_t i = 0; i < report.steps.size(); ++i) {
    double step_end = 0;
    for (const IntervalStats& iv : report.steps[i].intervals) {
      const double t = offset + iv.start_s + iv.length_s / 2;  // the interval's middle
      absl::StrAppend(&data, absl::StrFormat("%.3f %d %.6g %s %s %s %d %d\n", t, i,
                                             iv.length_s > 0 ? iv.completed / iv.length_s : 0.0,
                                             MsOrMissing(iv.p50_us, iv.completed),
                                             MsOrMissing(iv.p99_us, iv.completed),
                                             MsOrMissing(iv.max_us, iv.completed), iv.errors,
                                             iv.warmup ? 1 : 0));
      step_end = iv.start_s + iv.length_s;
    }
    absl::StrAppend(&data, "\n");  // a break in the lines between steps
    offset += step_end;
  }
  std::vector<std::pair<std::string, std::string>> jobs;  // script, png
  {
    const std::string dat = absl::StrCat(dir, "/latency_over_time.dat");
    const std::string gp = absl::StrCat(dir, "/latency_over_time.gp");
    const std::string png = absl::StrCat(dir, "/latency_over_time.png");
    if (auto s = WriteFile(dat, data); !s.ok()) return s;
    if (auto s = WriteFile(gp, LatencyOverTimeScript("latency_over_time.dat",
                                                     "latency_over_time.png", options.title));
        !s.ok()) {
      return s;
    }
    out.scripts.push_back(gp);
    jobs.emplace_back(gp, png);
  }
  if (report.steps.size() >= 2) {
    std::vector<const StepResult*> steps;
    for (const auto& s : report.steps) steps.push_back(&s);
    std::sort(steps.begin(), steps.end(), [](const StepResult* a, const StepResult* b) {
      return a->achieved_rps < b->achieved_rps;
    });
    std::string points =
        "# achieved_rps candidates_per_s p50_ms p90_ms p99_ms p99_9_ms max_ms target_rps concurrency\n";
    for (const StepResult* s : steps) {
      const int64_t n = s->latency.count;
      absl::StrAppend(&points,
                      absl::StrFormat("%.6g %.6g %s %s %s %s %s %.6g %d\n", s->achieved_rps,
                                      s->candidates_per_s, MsOrMissing(s->latency.p50_us, n),
                                      MsOrMissing(s->latency.p90_us, n),
                                      MsOrMissing(s->latency.p99_us, n),
                                      MsOrMissing(s->latency.p999_us, n),
                                      MsOrMissing(s->latency.max_us, n), s->target_rps,
                                      s->concurrency));
    }
    const std::string dat = absl::StrCat(dir, "/latency_vs_throughput.dat");
    const std::string gp = absl::StrCat(dir, "/latency_vs_throughput.gp");
    const std::string png = absl::StrCat(dir, "/latency_vs_throughput.png");
    if (auto s = WriteFile(dat, points); !s.ok()) return s;
    if (auto s = WriteFile(gp, LatencyThroughputScript("latency_vs_throughput.dat",
                                                       "latency_vs_throughput.png", options.title,
                                                       options.slo_latency_ms,
                                                       options.slo_percentile));
        !s.ok()) {
      return s;
    }
    out.scripts.push_back(gp);
    jobs.emplace_back(gp, png);
  }
  for (const auto& [gp, png] : jobs) {
    unlink(png.c_str());  // a stale plot must not pass for a new one
    if (absl::Status s = RunGnuplot(options.gnuplot, dir, gp, log); !s.ok()) return s;
    if (access(png.c_str(), R_OK) != 0) {
      return absl::InternalError(absl::StrCat("gnuplot wrote no ", png, " (see ", log, ")"));
    }
    out.pngs.push_back(png);
  }
  return absl::OkStatus();
}

}  // namespace rankd::loadtest
