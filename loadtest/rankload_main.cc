// rankload: load tests of a rankd server against latency SLOs (docs/loadtest.md).
//
//   rankload --target HOST:8500 --model kaggle --candidates 1 --mode slo --slo_latency_ms 5
//
// Exit codes: 0 done; 1 the run failed part-way (an output could not be
// written, plotting failed); 2 a bad flag (the message names it); 3 the server
// (or --metrics_url) could not be reached; 4 --mode slo found no passing rate.
// abseil's own flag errors (unknown flag, unparsable value) and --help exit 1.
#include <fstream>
#include <iostream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/process_exit.h"
#include "client/ranking_client.h"
#include "loadtest/cli/cli.h"
#include "loadtest/cli/run_setup.h"
#include "loadtest/driver/load_driver.h"
#include "loadtest/driver/response_log.h"
#include "loadtest/driver/server_drain.h"
#include "loadtest/metrics/http_get.h"
#include "loadtest/report/plots.h"
#include "loadtest/report/report.h"
#include "loadtest/report/report_csv.h"
#include "loadtest/report/report_json.h"
#include "loadtest/slo/slo_search.h"
#include "loadtest/slo/slo_verdict.h"

namespace rankd::loadtest {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnavailable = 3;
constexpr int kExitSloNotMet = 4;

constexpr char kUsage[] =
    "load tests of a rankd server against latency SLOs.\n"
    "\n"
    "  # open loop, 2000 req/s, latency from each request's scheduled send time\n"
    "  rankload --target localhost:8500 --model kaggle --candidates 1 --rate 2000\n"
    "  # closed loop, 8 in flight; a sweep of rates; replayed requests\n"
    "  rankload --model kaggle --mode closed --concurrency 8\n"
    "  rankload --requests req.jsonl --rate 1000:8000:x2 --csv sweep.csv --plot_dir plots\n"
    "  # every call's send / answer times, code and answering model version, as CSV\n"
    "  rankload --model kaggle --version_label stable --rate 500 --response_log calls.csv\n"
    "  # the highest rate with p99 <= 5 ms and < 0.1% errors\n"
    "  rankload --model kaggle --mode slo --slo_latency_ms 5 --rate 1000 --duration_s 5 \\\n"
    "      --metrics_url http://localhost:8502/metrics --json slo.json\n"
    "\n"
    "Live lines go to stderr, the report to stdout. Exit codes: 0 done, 1 failed part-way,\n"
    "2 bad flag, 3 server unreachable, 4 SLO not met at any rate. See docs/loadtest.md.";

struct Fail {
  int code;
  std::string message;
};

int Die(const Fail& f) {
  std::cerr << "rankload: " << f.message << "\n";
  return f.code;
}

int ExitCodeFor(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ? kExitUnavailable : kExitUsage;
}

// Fails early, before minutes of load, when an output cannot be written.
absl::Status CheckWritable(const std::string& path, absl::string_view flag) {
  if (path.empty()) return absl::OkStatus();
  std::ofstream out(path, std::ios::app);
  if (!out) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteText(const std::string& path, const std::string& text, absl::string_view flag) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(flag, ": cannot write ", path));
  return absl::OkStatus();
}

// --response_log's writer (null without the flag), opened before any load so
// that a bad path fails at once.
absl::StatusOr<std::unique_ptr<ResponseLog>> OpenResponseLog(const Config& c) {
  if (c.response_log_path.empty()) return nullptr;
  ResponseLog::Options o;
  o.path = c.response_log_path;
  auto log = ResponseLog::Create(o);
  if (!log.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--response_log: ", log.status().message()));
  }
  return log;
}

std::string StartedAt() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

// Reads rankd's /metrics (LoadDriver::Options::scrape).
using Scraper = std::function<absl::StatusOr<PromSnapshot>()>;

// --metrics_url's scraper (null without the flag), tried once so that a bad
// URL or an endpoint that does not answer fails before any load.
std::optional<Fail> MakeScraper(const Config& c, Scraper* scrape) {
  if (c.metrics_url.empty()) return std::nullopt;
  if (auto url = ParseHttpUrl(c.metrics_url); !url.ok()) {
    return Fail{kExitUsage, absl::StrCat("--metrics_url: ", url.status().message())};
  }
  *scrape = [url = c.metrics_url]() -> absl::StatusOr<PromSnapshot> {
    auto body = HttpGet(url, absl::Seconds(10));
    if (!body.ok()) return body.status();
    return PromSnapshot::Parse(*body);
  };
  auto first = (*scrape)();
  if (!first.ok()) {
    return Fail{absl::IsInvalidArgument(first.status()) ? kExitUsage : kExitUnavailable,
                absl::StrCat("--metrics_url: ", c.metrics_url, ": ", first.status().message())};
  }
  return std::nullopt;
}

// The load driver's options: the run's connections, requests and flags.
// Live lines (unless --quiet) start with `*prefix`, the current step's.
LoadDriver::Options DriverOptions(const Config& c, RunSetup* setup, const Scraper& scrape,
                                  ResponseLog* response_log, const std::string* prefix) {
  LoadDriver::Options d;
  d.sender = setup->sender.get();
  d.pool = &setup->pool;
  d.sender_threads = c.threads;
  d.spin_us = c.spin_us;
  d.max_in_flight = c.max_in_flight;
  d.deadline_ms = c.deadline_ms;
  d.interval_s = c.interval_s;
  d.scrape = scrape;
  d.models = setup->models;
  d.slo_percentile = c.slo_percentile;
  d.response_log = response_log;
  if (!c.quiet) {
    d.on_interval = [prefix](const IntervalStats& i) {
      std::cerr << FormatInterval(i, *prefix) << std::endl;
    };
  }
  return d;
}

// The report's description of the run (started now).
RunSettings DescribeRun(const Config& c, const RunSetup& setup, const std::string& command_line) {
  RunSettings r;
  r.label = c.label;
  r.target = c.protocol == Protocol::kHttp ? c.http_target : c.target;
  r.protocol = ProtocolName(c.protocol);
  r.mode = c.mode == Mode::kOpen ? "open" : c.mode == Mode::kClosed ? "closed" : "slo";
  r.traffic = setup.traffic;
  r.models = absl::StrJoin(setup.models, ",");
  r.connections = c.protocol == Protocol::kHttp ? c.http_connections : c.connections;
  r.threads = c.threads;
  r.spin_us = c.spin_us;
  r.drain_s = c.drain_s;
  r.slo_recheck = c.slo_recheck;
  r.deadline_ms = c.deadline_ms;
  r.slo_percentile = c.slo_percentile;
  r.started_at = StartedAt();
  r.command_line = command_line;
  return r;
}

// Runs a run's steps one after the other on its driver (each step with the
// run's timing, the next seed and its place in the report), and lets the
// server drain between them.
class StepRunner {
 public:
  StepRunner(const Config& c, LoadDriver* driver, RunSetup* setup, const Scraper& scrape,
             std::string* prefix, const Report* report)
      : c_(c),
        driver_(driver),
        setup_(setup),
        scrape_(scrape),
        prefix_(prefix),
        report_(report),
        step_seed_(c.seed) {}

  // One step, its live lines prefixed with `step_prefix`; judged against the
  // SLO flags.
  absl::StatusOr<StepResult> Run(StepSpec spec, const std::string& step_prefix) {
    *prefix_ = step_prefix;
    spec.warmup_s = c_.warmup_s;
    spec.duration_s = c_.duration_s;
    spec.arrival = c_.arrival;
    spec.seed = step_seed_++;
    spec.index = static_cast<int>(report_->steps.size());  // the step's place in the report
    std::string warning;
    auto result = driver_->Run(spec, &warning);
    if (!warning.empty()) std::cerr << "rankload: warning: " << warning << "\n";
    if (result.ok()) {
      JudgeStep({c_.slo_latency_ms, c_.slo_percentile, c_.slo_max_error_ratio}, &*result);
    }
    return result;
  }

  // Before the next step: after one that failed its SLO or had errors, let
  // the server work off what that step left behind (driver/server_drain.h).
  void DrainAfter(const StepResult& step) {
    const bool failed = (step.slo_pass.has_value() && !*step.slo_pass) || step.errors > 0;
    if (!failed || c_.drain_s <= 0) return;
    DrainOptions o;
    o.max_wait = absl::Seconds(c_.drain_s);
    std::function<absl::StatusOr<ServerLoad>()> counters;
    if (scrape_) {
      counters = [&]() -> absl::StatusOr<ServerLoad> {
        auto m = scrape_();
        if (!m.ok()) return m.status();
        return LoadFromMetrics(*m);
      };
    }
    // A health check over every connection the load used, each with a short
    // deadline: calls stuck behind the last step's backlog time out here.
    auto ping = [&]() -> absl::Status {
      client::CallOptions call;
      call.deadline = absl::Milliseconds(200);
      for (auto& cl : setup_->clients) {
        auto h = cl->Health("", call);
        if (!h.ok()) return h.status();
      }
      return absl::OkStatus();
    };
    const DrainResult r = WaitForIdle(counters, ping, o);
    std::cerr << "rankload: step failed; server "
              << (r.idle ? "idle" : r.probe_status.ok() ? "still busy" : "not scraped") << " after "
              << absl::FormatDuration(r.waited) << " (" << r.finished_while_waiting
              << " requests finished meanwhile"
              << (r.probe_status.ok() ? "" : absl::StrCat("; ", r.probe_status.message()))
              << (r.last_ping.ok() ? "" : absl::StrCat("; last health check: ", r.last_ping.ToString()))
              << ")\n";
  }

 private:
  const Config& c_;
  LoadDriver* const driver_;
  RunSetup* const setup_;
  const Scraper& scrape_;
  std::string* const prefix_;
  const Report* const report_;
  uint64_t step_seed_;  // the next step's
};

// --mode slo: open-loop probes at the rates SloSearch picks, from --rate up,
// until it has found the highest passing rate; fills report->slo.
std::optional<Fail> RunSloSearch(const Config& c, StepRunner* steps, Report* report) {
  SloSearch::Options so;
  so.start_rps = c.rates[0];
  so.growth = c.slo_growth;
  so.precision = c.slo_precision;
  so.max_rps = c.slo_max_rps;
  so.min_rps = std::min(1.0, c.rates[0]);
  so.max_steps = c.slo_max_steps;
  so.recheck = c.slo_recheck;
  auto search = SloSearch::Create(so);
  if (!search.ok()) return Fail{kExitUsage, absl::StrCat("--slo_*: ", search.status().message())};
  SloResult slo;
  slo.percentile = c.slo_percentile;
  slo.latency_bound_ms = c.slo_latency_ms;
  slo.max_error_ratio = c.slo_max_error_ratio;
  while (auto rate = search->NextRate()) {
    StepSpec spec;
    spec.mode = StepSpec::Mode::kOpen;
    spec.rate_rps = *rate;
    auto step = steps->Run(spec, absl::StrFormat("[slo %d: %g/s] ", search->steps() + 1, *rate));
    if (!step.ok()) return Fail{kExitUsage, std::string(step.status().message())};
    const bool pass = *step->slo_pass;
    std::cerr << "rankload: probe " << search->steps() + 1 << " at " << *rate << " req/s: "
              << (pass ? "pass" : "FAIL") << " (" << step->slo_reason << ")\n";
    report->steps.push_back(std::move(*step));
    search->Report(*rate, pass);
    if (search->NextRate()) steps->DrainAfter(report->steps.back());
  }
  slo.found = search->found();
  slo.steps = search->steps();
  slo.stop_reason = search->stop_reason();
  if (c.slo_recheck > 0) {
    absl::StrAppend(&slo.stop_reason, "; ", search->rechecks(), " rechecks of failing probes, ",
                    search->overturned(), " rates passed on recheck");
  }
  if (slo.found) {
    // The search's answer (a rate whose probes passed by majority); its
    // last passing probe is the step reported.
    slo.best_rps = search->best_rps();
    for (int i = static_cast<int>(report->steps.size()) - 1; i >= 0; --i) {
      if (report->steps[i].target_rps == slo.best_rps &&
          report->steps[i].slo_pass.value_or(false)) {
        slo.best_step = i;
        break;
      }
    }
  }
  if (slo.best_step >= 0) {
    const StepResult& best = report->steps[slo.best_step];
    slo.best_achieved_rps = best.achieved_rps;
    slo.best_candidates_per_s = best.candidates_per_s;
    slo.best_latency_us = best.latency.slo_percentile_us;
  }
  report->slo = slo;
  return std::nullopt;
}

// A sweep's step: what it runs and the prefix of its live lines.
struct SweepPoint {
  StepSpec spec;
  std::string prefix;
};

// Runs a sweep's steps in order, letting the server drain between them.
std::optional<Fail> RunSweep(const std::vector<SweepPoint>& points, StepRunner* steps,
                             Report* report) {
  for (size_t i = 0; i < points.size(); ++i) {
    auto step = steps->Run(points[i].spec, points[i].prefix);
    if (!step.ok()) return Fail{kExitUsage, std::string(step.status().message())};
    report->steps.push_back(std::move(*step));
    if (i + 1 < points.size()) steps->DrainAfter(report->steps.back());
  }
  return std::nullopt;
}

// The steps of a sweep: --mode open, one open-loop step per --rate value;
// --mode closed, one closed-loop step per --concurrency value.
std::vector<SweepPoint> SweepPoints(const Config& c) {
  const bool open = c.mode == Mode::kOpen;
  const size_t n = open ? c.rates.size() : c.concurrencies.size();
  std::vector<SweepPoint> points(n);
  for (size_t i = 0; i < n; ++i) {
    StepSpec& spec = points[i].spec;
    if (open) {
      spec.mode = StepSpec::Mode::kOpen;
      spec.rate_rps = c.rates[i];
    } else {
      spec.mode = StepSpec::Mode::kClosed;
      spec.concurrency = c.concurrencies[i];
    }
    if (n == 1) continue;  // no prefix for a single step
    points[i].prefix = open ? absl::StrFormat("[%d/%d: %g/s] ", i + 1, n, c.rates[i])
                            : absl::StrFormat("[%d/%d: c=%d] ", i + 1, n, c.concurrencies[i]);
  }
  return points;
}

// --plot_dir: the plots, rendered with --gnuplot when it is there (a missing
// gnuplot only warns: the scripts and data are written anyway). False after
// printing why they could not be written.
bool WritePlotFiles(const Config& c, const Report& report) {
  PlotOptions p;
  p.dir = c.plot_dir;
  p.gnuplot = c.gnuplot;
  p.title = c.label.empty() ? absl::StrCat("rankload ", report.settings.models) : c.label;
  p.slo_latency_ms = c.slo_latency_ms;
  p.slo_percentile = c.slo_percentile;
  PlotFiles files;
  absl::Status s = WritePlots(report, p, &files);
  if (absl::IsNotFound(s)) {
    std::cerr << "rankload: warning: plots not rendered: " << s.message()
              << "; render them with `cd " << c.plot_dir << " && gnuplot *.gp`\n";
  } else if (!s.ok()) {
    Die({kExitFailed, std::string(s.message())});
    return false;
  } else {
    std::cerr << "rankload: plots: " << absl::StrJoin(files.pngs, " ") << "\n";
  }
  return true;
}

// The report on stdout, then each output asked for (response log closed,
// --json, --csv, --plot_dir), every one tried even when an earlier one
// failed. kExitFailed when one did, else kExitOk.
int WriteOutputs(const Config& c, const Report& report, ResponseLog* response_log) {
  std::cout << "\n" << FormatReport(report) << std::flush;
  int code = kExitOk;
  if (response_log != nullptr) {
    if (auto s = response_log->Close(); !s.ok()) {
      Die({kExitFailed, absl::StrCat("--response_log: ", s.message())});
      code = kExitFailed;
    } else {
      std::cerr << "rankload: response log: " << response_log->rows_written() << " calls in "
                << c.response_log_path << "\n";
    }
  }
  if (!c.json_path.empty()) {
    if (auto s = WriteText(c.json_path, ReportToJson(report), "--json"); !s.ok()) {
      Die({kExitFailed, std::string(s.message())});
      code = kExitFailed;
    }
  }
  if (!c.csv_path.empty()) {
    if (auto s = WriteText(c.csv_path, ReportToCsv(report), "--csv"); !s.ok()) {
      Die({kExitFailed, std::string(s.message())});
      code = kExitFailed;
    }
  }
  if (!c.plot_dir.empty() && !WritePlotFiles(c, report)) code = kExitFailed;
  return code;
}

// One rankload run: what can fail before any load is checked first (outputs
// writable, response log, --metrics_url, connections and requests), then the
// steps of --mode, then the report and outputs.
int Run(const Config& c, const std::string& command_line) {
  for (const auto& [path, flag] : {std::pair{c.json_path, "--json"}, {c.csv_path, "--csv"}}) {
    if (auto s = CheckWritable(path, flag); !s.ok()) return Die({kExitUsage, std::string(s.message())});
  }
  auto response_log = OpenResponseLog(c);
  if (!response_log.ok()) return Die({kExitUsage, std::string(response_log.status().message())});
  Scraper scrape;
  if (std::optional<Fail> f = MakeScraper(c, &scrape)) return Die(*f);

  auto setup = PrepareRun(c);
  if (!setup.ok()) return Die({ExitCodeFor(setup.status()), std::string(setup.status().message())});

  std::string prefix;  // the current step's, for the live lines
  auto driver =
      LoadDriver::Create(DriverOptions(c, &*setup, scrape, response_log->get(), &prefix));
  if (!driver.ok()) return Die({kExitUsage, std::string(driver.status().message())});

  Report report;
  report.settings = DescribeRun(c, *setup, command_line);
  std::cerr << "rankload: " << report.settings.traffic << "\n";

  StepRunner steps(c, driver->get(), &*setup, scrape, &prefix, &report);
  std::optional<Fail> failed = c.mode == Mode::kSlo ? RunSloSearch(c, &steps, &report)
                                                    : RunSweep(SweepPoints(c), &steps, &report);
  if (failed.has_value()) return Die(*failed);

  int code = WriteOutputs(c, report, response_log->get());
  if (code == kExitOk && report.slo.has_value() && !report.slo->found) code = kExitSloNotMet;
  return code;
}

}  // namespace
}  // namespace rankd::loadtest

namespace {

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(rankd::loadtest::kUsage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "loadtest/");
  };
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "rankload: unexpected argument \"" << rest[1]
              << "\" (flags are --name=value; see --help)\n";
    return rankd::loadtest::kExitUsage;
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) absl::StrAppend(&command_line, i ? " " : "", argv[i]);
  auto c = rankd::loadtest::ConfigFromFlags();
  if (!c.ok()) return rankd::loadtest::Die({rankd::loadtest::kExitUsage, std::string(c.status().message())});
  return rankd::loadtest::Run(*c, command_line);
}

}  // namespace

// Run's files are closed when it returns; ExitFlushed then ends the process
// without the exit-time teardown that can race gRPC's own.
int main(int argc, char** argv) { rankd::client::ExitFlushed(Main(argc, argv)); }
