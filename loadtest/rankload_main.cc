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
#include <memory>
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
#include "client/ranking_client.h"
#include "google/protobuf/text_format.h"
#include "loadtest/cli.h"
#include "loadtest/http_get.h"
#include "loadtest/load_driver.h"
#include "loadtest/plots.h"
#include "loadtest/report.h"
#include "loadtest/report_csv.h"
#include "loadtest/report_json.h"
#include "loadtest/request_file.h"
#include "loadtest/request_generator.h"
#include "loadtest/slo_search.h"
#include "rankd/v1/model_config.pb.h"

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

// typical_ids_per_bag by feature from a model.pbtxt.
absl::StatusOr<std::map<std::string, int>> BagSizesFromConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--model_config: cannot read ", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rankd::v1::ModelConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_config: ", path, " is not a text-format rankd.v1.ModelConfig"));
  }
  std::map<std::string, int> out;
  for (const auto& f : config.sparse_features()) {
    out[f.name()] = std::max(1, f.typical_ids_per_bag());
  }
  return out;
}

struct Setup {
  std::vector<std::unique_ptr<client::RankingClient>> clients;
  RequestPool pool;
  std::set<std::string> models;
  std::string traffic;
};

absl::StatusOr<Setup> Prepare(const Config& c, Fail* fail) {
  Setup s;
  for (int i = 0; i < c.connections; ++i) {
    client::RankingClient::Options o;
    o.target = c.target;
    o.dedicated_connection = true;
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.deadline_ms = std::max<int64_t>(1, static_cast<int64_t>(c.deadline_ms));
    auto client = client::RankingClient::Create(o);
    if (!client.ok()) {
      *fail = {ExitCodeFor(client.status()),
               absl::StrCat("--target: ", client.status().message(), " (is rankd serving at ",
                            c.target, "?)")};
      return client.status();
    }
    s.clients.push_back(std::move(*client));
  }
  if (!c.request_files.empty()) {
    auto pool = ReadRequestFiles(c.request_files);
    if (!pool.ok()) {
      *fail = {kExitUsage, absl::StrCat("--requests: ", pool.status().message())};
      return pool.status();
    }
    s.pool = std::move(*pool);
    s.traffic = absl::StrCat("replay of ", s.pool.size(), " requests from ",
                             absl::StrJoin(c.request_files, ","));
  } else {
    client::CallOptions call;
    call.deadline = absl::Seconds(10);
    auto info = s.clients[0]->GetModelInfo(c.model, c.model_version, call);
    if (!info.ok()) {
      *fail = {absl::IsUnavailable(info.status()) ? kExitUnavailable : kExitUsage,
               absl::StrCat("--model: GetModelInfo(\"", c.model, "\", version ", c.model_version,
                            "): ", absl::StatusCodeToString(info.status().code()), ": ",
                            info.status().message())};
      return info.status();
    }
    GeneratorOptions g;
    g.version = c.model_version;
    g.candidates = c.candidates;
    g.zipf_alpha = c.zipf_alpha;
    g.ids_per_bag = c.ids_per_bag > 0 ? c.ids_per_bag : 1;
    if (!c.model_config.empty() && c.ids_per_bag == 0) {
      auto sizes = BagSizesFromConfig(c.model_config);
      if (!sizes.ok()) {
        *fail = {kExitUsage, std::string(sizes.status().message())};
        return sizes.status();
      }
      g.ids_per_bag_by_feature = *sizes;
    }
    g.shared_features = c.shared_features;
    g.pool_size = c.pool_size;
    g.seed = c.seed;
    auto pool = GenerateRequests(*info, g);
    if (!pool.ok()) {
      const std::string msg(pool.status().message());
      *fail = {kExitUsage, absl::StartsWith(msg, "shared_features")
                               ? absl::StrCat("--", msg)
                               : absl::StrCat("--model: ", msg)};
      return pool.status();
    }
    s.pool = std::move(*pool);
    s.traffic = absl::StrCat("generated for model ", info->name(), " v", info->version(), " (",
                             info->backend(), " backend): ", s.pool.size(),
                             " distinct requests, candidates ", c.candidates.ToString(),
                             ", Zipf alpha ", c.zipf_alpha,
                             c.shared_features.empty()
                                 ? ""
                                 : absl::StrCat(", shared ", absl::StrJoin(c.shared_features, ",")));
  }
  for (const auto& r : s.pool) s.models.insert(r->model());
  return s;
}

std::string StartedAt() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

void Judge(const Config& c, StepResult* s) {
  if (c.slo_latency_ms <= 0) return;
  const double bound_us = c.slo_latency_ms * 1000;
  const double error_ratio = s->completed > 0 ? static_cast<double>(s->errors) / s->completed : 1;
  std::vector<std::string> why;
  if (s->completed == 0) why.push_back("no answers");
  if (s->latency.slo_percentile_us > bound_us) {
    why.push_back(absl::StrFormat("p%g %.3f ms > %g ms", c.slo_percentile,
                                  s->latency.slo_percentile_us / 1000, c.slo_latency_ms));
  }
  if (error_ratio > c.slo_max_error_ratio) {
    why.push_back(absl::StrFormat("errors %.3g%% > %.3g%%", error_ratio * 100,
                                  c.slo_max_error_ratio * 100));
  }
  s->slo_pass = why.empty();
  s->slo_reason = why.empty() ? absl::StrFormat("p%g %.3f ms <= %g ms, errors %.3g%%",
                                                c.slo_percentile, s->latency.slo_percentile_us / 1000,
                                                c.slo_latency_ms, error_ratio * 100)
                              : absl::StrJoin(why, "; ");
  // Below 100 answers a p99 is just the largest few: say so.
  const double tail = 1.0 - c.slo_percentile / 100.0;
  if (s->completed > 0 && tail > 0 && s->completed * tail < 1.0) {
    absl::StrAppend(&s->slo_reason, absl::StrFormat(" (only %d answers: p%g is their max; "
                                                    "use a longer --duration_s)",
                                                    s->completed, c.slo_percentile));
  }
  if (!why.empty() && s->client_behind) {
    absl::StrAppend(&s->slo_reason, " (the client fell behind its schedule: its lag counts)");
  }
}

int Run(const Config& c, const std::string& command_line) {
  for (const auto& [path, flag] : {std::pair{c.json_path, "--json"}, {c.csv_path, "--csv"}}) {
    if (auto s = CheckWritable(path, flag); !s.ok()) return Die({kExitUsage, std::string(s.message())});
  }
  std::function<absl::StatusOr<PromSnapshot>()> scrape;
  if (!c.metrics_url.empty()) {
    if (auto url = ParseHttpUrl(c.metrics_url); !url.ok()) {
      return Die({kExitUsage, absl::StrCat("--metrics_url: ", url.status().message())});
    }
    scrape = [url = c.metrics_url]() -> absl::StatusOr<PromSnapshot> {
      auto body = HttpGet(url, absl::Seconds(10));
      if (!body.ok()) return body.status();
      return PromSnapshot::Parse(*body);
    };
    auto first = scrape();
    if (!first.ok()) {
      return Die({absl::IsInvalidArgument(first.status()) ? kExitUsage : kExitUnavailable,
                     absl::StrCat("--metrics_url: ", c.metrics_url, ": ", first.status().message())});
    }
  }

  Fail fail{kExitFailed, ""};
  auto setup = Prepare(c, &fail);
  if (!setup.ok()) return Die(fail);

  LoadDriver::Options d;
  for (auto& client : setup->clients) d.clients.push_back(client.get());
  d.pool = &setup->pool;
  d.sender_threads = c.threads;
  d.max_in_flight = c.max_in_flight;
  d.deadline_ms = c.deadline_ms;
  d.interval_s = c.interval_s;
  d.scrape = scrape;
  d.models = setup->models;
  d.slo_percentile = c.slo_percentile;
  std::string prefix;
  if (!c.quiet) {
    d.on_interval = [&prefix](const IntervalStats& i) {
      std::cerr << FormatInterval(i, prefix) << std::endl;
    };
  }
  auto driver = LoadDriver::Create(d);
  if (!driver.ok()) return Die({kExitUsage, std::string(driver.status().message())});

  Report report;
  RunSettings& r = report.settings;
  r.label = c.label;
  r.target = c.target;
  r.mode = c.mode == Mode::kOpen ? "open" : c.mode == Mode::kClosed ? "closed" : "slo";
  r.traffic = setup->traffic;
  r.models = absl::StrJoin(setup->models, ",");
  r.connections = c.connections;
  r.threads = c.threads;
  r.deadline_ms = c.deadline_ms;
  r.slo_percentile = c.slo_percentile;
  r.started_at = StartedAt();
  r.command_line = command_line;
  std::cerr << "rankload: " << r.traffic << "\n";

  uint64_t step_seed = c.seed;
  auto run_step = [&](StepSpec spec, const std::string& step_prefix) -> absl::StatusOr<StepResult> {
    prefix = step_prefix;
    spec.warmup_s = c.warmup_s;
    spec.duration_s = c.duration_s;
    spec.arrival = c.arrival;
    spec.seed = step_seed++;
    std::string warning;
    auto result = (*driver)->Run(spec, &warning);
    if (!warning.empty()) std::cerr << "rankload: warning: " << warning << "\n";
    if (result.ok()) Judge(c, &*result);
    return result;
  };

  if (c.mode == Mode::kSlo) {
    SloSearch::Options so;
    so.start_rps = c.rates[0];
    so.growth = c.slo_growth;
    so.precision = c.slo_precision;
    so.max_rps = c.slo_max_rps;
    so.min_rps = std::min(1.0, c.rates[0]);
    so.max_steps = c.slo_max_steps;
    auto search = SloSearch::Create(so);
    if (!search.ok()) return Die({kExitUsage, absl::StrCat("--slo_*: ", search.status().message())});
    SloResult slo;
    slo.percentile = c.slo_percentile;
    slo.latency_bound_ms = c.slo_latency_ms;
    slo.max_error_ratio = c.slo_max_error_ratio;
    while (auto rate = search->NextRate()) {
      StepSpec spec;
      spec.mode = StepSpec::Mode::kOpen;
      spec.rate_rps = *rate;
      auto step = run_step(spec, absl::StrFormat("[slo %d: %g/s] ", search->steps() + 1, *rate));
      if (!step.ok()) return Die({kExitUsage, std::string(step.status().message())});
      const bool pass = *step->slo_pass;
      std::cerr << "rankload: probe " << search->steps() + 1 << " at " << *rate << " req/s: "
                << (pass ? "pass" : "FAIL") << " (" << step->slo_reason << ")\n";
      report.steps.push_back(std::move(*step));
      search->Report(*rate, pass);
      if (pass && *rate >= slo.best_rps) {
        slo.best_rps = *rate;
        slo.best_step = static_cast<int>(report.steps.size()) - 1;
      }
    }
    slo.found = search->found();
    slo.steps = search->steps();
    slo.stop_reason = search->stop_reason();
    if (slo.found) {
      const StepResult& best = report.steps[slo.best_step];
      slo.best_achieved_rps = best.achieved_rps;
      slo.best_candidates_per_s = best.candidates_per_s;
      slo.best_latency_us = best.latency.slo_percentile_us;
    }
    report.slo = slo;
  } else if (c.mode == Mode::kOpen) {
    for (size_t i = 0; i < c.rates.size(); ++i) {
      StepSpec spec;
      spec.mode = StepSpec::Mode::kOpen;
      spec.rate_rps = c.rates[i];
      auto step = run_step(spec, c.rates.size() > 1 ? absl::StrFormat("[%d/%d: %g/s] ", i + 1,
                                                                      c.rates.size(), c.rates[i])
                                                    : "");
      if (!step.ok()) return Die({kExitUsage, std::string(step.status().message())});
      report.steps.push_back(std::move(*step));
    }
  } else {
    for (size_t i = 0; i < c.concurrencies.size(); ++i) {
      StepSpec spec;
      spec.mode = StepSpec::Mode::kClosed;
      spec.concurrency = c.concurrencies[i];
      auto step = run_step(spec, c.concurrencies.size() > 1
                                     ? absl::StrFormat("[%d/%d: c=%d] ", i + 1,
                                                       c.concurrencies.size(), c.concurrencies[i])
                                     : "");
      if (!step.ok()) return Die({kExitUsage, std::string(step.status().message())});
      report.steps.push_back(std::move(*step));
    }
  }

  std::cout << "\n" << FormatReport(report) << std::flush;
  int code = kExitOk;
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
  if (!c.plot_dir.empty()) {
    PlotOptions p;
    p.dir = c.plot_dir;
    p.gnuplot = c.gnuplot;
    p.title = c.label.empty() ? absl::StrCat("rankload ", r.models) : c.label;
    p.slo_latency_ms = c.slo_latency_ms;
    p.slo_percentile = c.slo_percentile;
    PlotFiles files;
    absl::Status s = WritePlots(report, p, &files);
    if (absl::IsNotFound(s)) {
      std::cerr << "rankload: warning: plots not rendered: " << s.message()
                << "; render them with `cd " << c.plot_dir << " && gnuplot *.gp`\n";
    } else if (!s.ok()) {
      Die({kExitFailed, std::string(s.message())});
      code = kExitFailed;
    } else {
      std::cerr << "rankload: plots: " << absl::StrJoin(files.pngs, " ") << "\n";
    }
  }
  if (code == kExitOk && report.slo.has_value() && !report.slo->found) code = kExitSloNotMet;
  return code;
}

}  // namespace
}  // namespace rankd::loadtest

int main(int argc, char** argv) {
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
