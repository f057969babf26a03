#include "loadtest/cli/cli.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <type_traits>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/security_flags.h"

// --- Where and how ------------------------------------------------------------
ABSL_FLAG(std::string, target, "localhost:8500", "rankd's gRPC address (host:port)");
ABSL_FLAG(std::string, protocol, "rankd",
          "the front end to load: rankd (rankd.v1.Ranking/Score over gRPC) | kserve (KServe v2 "
          "ModelInfer with raw tensor contents, same gRPC port) | http (POST "
          "/v1/models/{model}:score with ScoreRequest JSON to --http_target); the same requests "
          "either way, so the three can be compared. --target stays the gRPC address (model "
          "info, health checks)");
ABSL_FLAG(std::string, http_target, "",
          "--protocol http: rankd's HTTP address (host:port); default --target's host, port 8501");
ABSL_FLAG(int, http_connections, 64,
          "--protocol http: keep-alive HTTP/1.1 connections, each carrying one call at a time "
          "(further calls queue in rankload, and the wait counts in their latency)");
ABSL_FLAG(std::string, mode, "open",
          "open: requests on an arrival schedule at --rate, latency from each scheduled send "
          "time | closed: --concurrency requests in flight | slo: search the highest rate "
          "meeting --slo_latency_ms (open-loop probes, starting at --rate)");
ABSL_FLAG(std::string, rate, "1000",
          "open / slo: requests per second; a list (100,200,500) or range (100:1000:100, "
          "100:6400:x2) sweeps; slo: the first value is where the search starts");
ABSL_FLAG(std::string, arrival, "constant", "open / slo: constant | poisson inter-arrival times");
ABSL_FLAG(std::string, concurrency, "1",
          "closed: requests in flight; a list or range sweeps (1,2,4 or 1:64:x2)");
ABSL_FLAG(double, duration_s, 10, "measured seconds per step (each sweep point, each SLO probe)");
ABSL_FLAG(double, warmup_s, 2, "seconds of load before each step's measured window (not measured)");
ABSL_FLAG(int, connections, 4, "gRPC connections (one channel each) the calls are spread over");
ABSL_FLAG(int, threads, 0, "open-loop sender threads; 0 = cores / 4 (1 .. 8)");
ABSL_FLAG(int64_t, spin_us, 200,
          "open loop: a sender spins (rather than sleeps) this long before each send, so "
          "sends leave on time where thread wake-ups are slow (VMs); 0 = sleep only");
ABSL_FLAG(int64_t, max_in_flight, 20000,
          "open loop: senders wait while this many calls are in flight (reported as the client "
          "falling behind); bounds the client's memory");
ABSL_FLAG(double, deadline_ms, 1000, "deadline of each call, from its send, in ms");
ABSL_FLAG(double, drain_s, 10,
          "after a step that failed its SLO or had errors, wait up to this long for the server "
          "to go idle before the next step (idle: a health check answers within 200 ms on every "
          "connection and, with --metrics_url, no request finishing and none queued); 0 = never "
          "wait");
ABSL_FLAG(double, interval_s, 1, "period of the live line on stderr and of the latency-over-time plot");
ABSL_FLAG(bool, quiet, false, "no live lines");
ABSL_FLAG(int64_t, connect_timeout_ms, 5000,
          "wait this long for each connection before the run; fail (exit 3) without one");

// --- Traffic ------------------------------------------------------------------
ABSL_FLAG(std::string, requests, "",
          "replay: ScoreRequest JSON-lines files (comma-separated; `rankd gen-requests`), sent "
          "round-robin as they are; else requests are generated for --model");
ABSL_FLAG(std::string, model, "",
          "generate requests for this served model (features from GetModelInfo)");
ABSL_FLAG(int64_t, model_version, 0,
          "generated requests: ScoreRequest.version (0 = the newest ready version, or the one "
          "--version_label names)");
ABSL_FLAG(std::string, version_label, "",
          "generated requests: ScoreRequest.version_label, a version label of the model "
          "(\"stable\", \"canary\"); the requests are generated for the version it names now. "
          "Not with --model_version or --requests");
ABSL_FLAG(std::string, candidates, "1",
          "generated requests: candidates per request: N | uniform:LO:HI | "
          "lognormal:MEDIAN:SIGMA:MAX");
ABSL_FLAG(double, zipf_alpha, 1.05, "generated requests: Zipf exponent of id popularity; 0 = uniform");
ABSL_FLAG(int, ids_per_bag, 0,
          "generated requests: ids per bag; 0 = each feature's typical_ids_per_bag from "
          "--model_config, else 1");
ABSL_FLAG(std::string, model_config, "",
          "generated requests: the model's model.pbtxt, for typical_ids_per_bag (optional)");
ABSL_FLAG(std::string, shared_features, "",
          "generated requests: per-candidate features sent as one shared bag (comma-separated; "
          "request-level features always are)");
ABSL_FLAG(int, pool_size, 1000, "generated requests: distinct requests, cycled through");
ABSL_FLAG(uint64_t, seed, 1, "random seed (generated requests, Poisson arrivals)");

// --- SLO ----------------------------------------------------------------------
ABSL_FLAG(double, slo_latency_ms, 0,
          "the latency bound of the SLO, in ms (mode slo: required; other modes: marks each "
          "step pass / fail)");
ABSL_FLAG(double, slo_percentile, 99, "the percentile the SLO bounds, in (0, 100]");
ABSL_FLAG(double, slo_max_error_ratio, 0.001, "largest share of failed calls a passing step may have");
ABSL_FLAG(double, slo_growth, 2, "slo: rate multiplier while probes pass, > 1");
ABSL_FLAG(double, slo_precision, 0.05,
          "slo: stop bisecting when (failing - passing) / passing rate <= this");
ABSL_FLAG(double, slo_max_rps, 0, "slo: highest rate to probe (0 = no cap)");
ABSL_FLAG(int, slo_max_steps, 30, "slo: most probes");
ABSL_FLAG(int, slo_recheck, 2,
          "slo: re-runs of a failing probe at the same rate, the majority deciding (a stall of "
          "the machine can fail a probe; nothing makes an overloaded server pass); 0 = none, "
          "at most 10");

// --- Output -------------------------------------------------------------------
ABSL_FLAG(std::string, json, "", "write the full report as JSON to this file");
ABSL_FLAG(std::string, csv, "", "write one CSV row per step to this file");
ABSL_FLAG(std::string, plot_dir, "",
          "write PNG plots (latency over time; latency vs throughput for sweeps / SLO searches) "
          "with their gnuplot scripts and data into this directory");
ABSL_FLAG(std::string, gnuplot, "gnuplot", "the gnuplot program for --plot_dir");
ABSL_FLAG(std::string, label, "", "a label for the report and plot titles");
ABSL_FLAG(std::string, response_log, "",
          "write one CSV line per finished call (every step, warm-up included) to this file: "
          "scheduled_unix_us,sent_unix_us,done_unix_us,latency_us,code,version,step (wall-clock "
          "us; scheduled = the send in closed loop; latency from the scheduled time; code the "
          "gRPC code name; version ScoreResponse.version, 0 when the call failed; step the "
          "report's step index). Buffered and written by a background thread");
ABSL_FLAG(std::string, metrics_url, "",
          "rankd's Prometheus endpoint (http://host:8502/metrics): scraped before, at the end "
          "of warm-up and after each step for server-side queue / compute / batch figures");

namespace rankd::loadtest {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view what, absl::string_view got) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what, ", got \"", got, "\""));
}

bool Finite(double v) { return std::isfinite(v); }

// Bad(flag, "must be in [min, max]", value) unless min <= `value` <= max
// (the bounds are taken as `value`'s type).
template <typename T>
absl::Status InRange(absl::string_view flag, T value, typename std::common_type<T>::type min,
                     typename std::common_type<T>::type max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return Bad(flag, absl::StrCat("must be in [", min, ", ", max, "]"), absl::StrCat(value));
}

}  // namespace

absl::StatusOr<Mode> ParseMode(absl::string_view text) {
  if (text == "open") return Mode::kOpen;
  if (text == "closed") return Mode::kClosed;
  if (text == "slo") return Mode::kSlo;
  return Bad("--mode", "must be open, closed or slo", text);
}

absl::StatusOr<std::vector<double>> ParseNumberList(absl::string_view text,
                                                    absl::string_view flag) {
  constexpr size_t kMaxValues = 1000;
  std::vector<double> out;
  const auto positive = [&](absl::string_view t, double* v) {
    return absl::SimpleAtod(t, v) && *v > 0 && Finite(*v);
  };
  if (text.empty()) return Bad(flag, "must not be empty", text);
  std::vector<absl::string_view> range = absl::StrSplit(text, ':');
  if (range.size() == 3) {
    double start = 0, stop = 0, step = 0;
    if (!positive(range[0], &start) || !positive(range[1], &stop) || stop < start) {
      return Bad(flag, "a range is START:STOP:STEP with 0 < START <= STOP", text);
    }
    absl::string_view step_text = range[2];
    const bool multiply = absl::ConsumePrefix(&step_text, "x");
    if (!multiply) absl::ConsumePrefix(&step_text, "+");
    if (!positive(step_text, &step) || (multiply && step <= 1)) {
      return Bad(flag, "a range's STEP is N > 0 (added) or xF with F > 1 (multiplied)", text);
    }
    for (double v = start; v <= stop * (1 + 1e-9); v = multiply ? v * step : v + step) {
      out.push_back(v);
      if (out.size() > kMaxValues) return Bad(flag, "more than 1000 values", text);
    }
    return out;
  }
  if (range.size() != 1) return Bad(flag, "want N, N,N,... or START:STOP:STEP", text);
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!positive(absl::StripAsciiWhitespace(part), &v)) {
      return Bad(flag, "every value must be a number > 0", text);
    }
    out.push_back(v);
    if (out.size() > kMaxValues) return Bad(flag, "more than 1000 values", text);
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view text, absl::string_view flag) {
  auto values = ParseNumberList(text, flag);
  if (!values.ok()) return values.status();
  std::vector<int> out;
  for (double v : *values) {
    if (v != std::floor(v) || v > 1e6) return Bad(flag, "values must be whole numbers <= 1000000", text);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

namespace {

// --target, TLS and token, --protocol and --http_*.
absl::Status ConnectionFromFlags(Config* c) {
  c->target = absl::GetFlag(FLAGS_target);
  c->security = client::SecurityFilesFromFlags();
  if (c->target.empty()) return Bad("--target", "must not be empty", "");
  auto protocol = ParseProtocol(absl::GetFlag(FLAGS_protocol));
  if (!protocol.ok()) return protocol.status();
  c->protocol = *protocol;
  c->http_connections = absl::GetFlag(FLAGS_http_connections);
  if (absl::Status s = InRange("--http_connections", c->http_connections, 1, 4096); !s.ok()) {
    return s;
  }
  c->http_target = absl::GetFlag(FLAGS_http_target);
  if (c->protocol == Protocol::kHttp && c->http_target.empty()) {
    // --target's host (a plain HOST:PORT or [v6]:PORT) with port 8501.
    const size_t colon = c->target.rfind(':');
    const std::string host = colon == std::string::npos ? "" : c->target.substr(0, colon);
    if (host.empty() || c->target.find('/') != std::string::npos) {
      return Bad("--http_target", "is needed when --target is not HOST:PORT", c->target);
    }
    c->http_target = absl::StrCat(host, ":8501");
  }
  return absl::OkStatus();
}

// --mode and what it steps through: --rate, --arrival, --concurrency.
absl::Status StepsFromFlags(Config* c) {
  auto mode = ParseMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return mode.status();
  c->mode = *mode;
  auto rates = ParseNumberList(absl::GetFlag(FLAGS_rate), "--rate");
  if (!rates.ok()) return rates.status();
  c->rates = *rates;
  auto arrival = ParseArrival(absl::GetFlag(FLAGS_arrival));
  if (!arrival.ok()) return arrival.status();
  c->arrival = *arrival;
  auto conc = ParseIntList(absl::GetFlag(FLAGS_concurrency), "--concurrency");
  if (!conc.ok()) return conc.status();
  c->concurrencies = *conc;
  return absl::OkStatus();
}

// How each step runs: its timing, the connections and sender threads, call
// deadlines, the drain between steps and the live lines.
absl::Status LoadFromFlags(Config* c) {
  c->duration_s = absl::GetFlag(FLAGS_duration_s);
  if (!(c->duration_s > 0) || !Finite(c->duration_s)) {
    return Bad("--duration_s", "must be > 0", absl::StrCat(c->duration_s));
  }
  c->warmup_s = absl::GetFlag(FLAGS_warmup_s);
  if (!(c->warmup_s >= 0) || !Finite(c->warmup_s)) {
    return Bad("--warmup_s", "must be >= 0", absl::StrCat(c->warmup_s));
  }
  c->connections = absl::GetFlag(FLAGS_connections);
  if (absl::Status s = InRange("--connections", c->connections, 1, 1024); !s.ok()) return s;
  c->threads = absl::GetFlag(FLAGS_threads);
  if (absl::Status s = InRange("--threads", c->threads, 0, 256); !s.ok()) return s;
  if (c->threads == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    c->threads = std::max(1, std::min(8, cores / 4));
  }
  c->spin_us = absl::GetFlag(FLAGS_spin_us);
  if (absl::Status s = InRange("--spin_us", c->spin_us, 0, 100000); !s.ok()) return s;
  c->max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  if (c->max_in_flight < 1) {
    return Bad("--max_in_flight", "must be >= 1", absl::StrCat(c->max_in_flight));
  }
  c->drain_s = absl::GetFlag(FLAGS_drain_s);
  if (absl::Status s = InRange("--drain_s", c->drain_s, 0, 600); !s.ok()) return s;
  c->deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  if (!(c->deadline_ms > 0) || !Finite(c->deadline_ms) || c->deadline_ms > 1e9) {
    return Bad("--deadline_ms", "must be in (0, 1e9]", absl::StrCat(c->deadline_ms));
  }
  c->interval_s = absl::GetFlag(FLAGS_interval_s);
  if (!(c->interval_s >= 0.01) || !Finite(c->interval_s)) {
    return Bad("--interval_s", "must be >= 0.01", absl::StrCat(c->interval_s));
  }
  c->quiet = absl::GetFlag(FLAGS_quiet);
  c->connect_timeout_ms = absl::GetFlag(FLAGS_connect_timeout_ms);
  if (c->connect_timeout_ms < 1) {
    return Bad("--connect_timeout_ms", "must be >= 1", absl::StrCat(c->connect_timeout_ms));
  }
  return absl::OkStatus();
}

// The requests: replayed (--requests) or generated for --model, and the
// generator's flags, which only generated requests take. Reads c->protocol.
absl::Status TrafficFromFlags(Config* c) {
  const std::string files = absl::GetFlag(FLAGS_requests);
  for (absl::string_view f : absl::StrSplit(files, ',', absl::SkipWhitespace())) {
    c->request_files.emplace_back(absl::StripAsciiWhitespace(f));
  }
  c->model = absl::GetFlag(FLAGS_model);
  if (c->request_files.empty() == c->model.empty()) {
    return absl::InvalidArgumentError(
        "--requests / --model: give exactly one: --requests FILES to replay, or --model NAME to "
        "generate requests for a served model");
  }
  c->model_version = absl::GetFlag(FLAGS_model_version);
  if (c->model_version < 0) {
    return Bad("--model_version", "must be >= 0", absl::StrCat(c->model_version));
  }
  c->version_label = absl::GetFlag(FLAGS_version_label);
  if (!c->version_label.empty() && c->model_version != 0) {
    return absl::InvalidArgumentError(
        "--version_label: not with --model_version (the server reads the label only when the "
        "version is 0)");
  }
  if (!c->version_label.empty() && !c->request_files.empty()) {
    return absl::InvalidArgumentError(
        "--version_label: only for generated requests (--model); replayed requests keep their "
        "own version and version_label");
  }
  if (!c->version_label.empty() && c->protocol == Protocol::kKServe) {
    return absl::InvalidArgumentError(
        "--version_label: not with --protocol kserve (KServe v2 names versions by number only)");
  }
  auto candidates = CandidateCount::Parse(absl::GetFlag(FLAGS_candidates), "--candidates");
  if (!candidates.ok()) return candidates.status();
  c->candidates = *candidates;
  c->zipf_alpha = absl::GetFlag(FLAGS_zipf_alpha);
  if (absl::Status s = InRange("--zipf_alpha", c->zipf_alpha, 0, 10); !s.ok()) return s;
  c->ids_per_bag = absl::GetFlag(FLAGS_ids_per_bag);
  if (absl::Status s = InRange("--ids_per_bag", c->ids_per_bag, 0, 100000); !s.ok()) return s;
  c->model_config = absl::GetFlag(FLAGS_model_config);
  for (absl::string_view f :
       absl::StrSplit(absl::GetFlag(FLAGS_shared_features), ',', absl::SkipWhitespace())) {
    c->shared_features.emplace(absl::StripAsciiWhitespace(f));
  }
  c->pool_size = absl::GetFlag(FLAGS_pool_size);
  if (absl::Status s = InRange("--pool_size", c->pool_size, 1, 1000000); !s.ok()) return s;
  c->seed = absl::GetFlag(FLAGS_seed);
  if (!c->request_files.empty() &&
      (!c->model_config.empty() || !c->shared_features.empty())) {
    return absl::InvalidArgumentError(
        "--model_config / --shared_features: only for generated requests (--model), not with "
        "--requests");
  }
  return absl::OkStatus();
}

// The SLO each step is judged by, and --mode slo's search. Reads c->mode and
// c->rates.
absl::Status SloFromFlags(Config* c) {
  c->slo_latency_ms = absl::GetFlag(FLAGS_slo_latency_ms);
  if (!(c->slo_latency_ms >= 0) || !Finite(c->slo_latency_ms)) {
    return Bad("--slo_latency_ms", "must be >= 0", absl::StrCat(c->slo_latency_ms));
  }
  if (c->mode == Mode::kSlo && c->slo_latency_ms == 0) {
    return absl::InvalidArgumentError("--slo_latency_ms: required with --mode slo (e.g. 5)");
  }
  c->slo_percentile = absl::GetFlag(FLAGS_slo_percentile);
  if (!(c->slo_percentile > 0) || c->slo_percentile > 100) {
    return Bad("--slo_percentile", "must be in (0, 100]", absl::StrCat(c->slo_percentile));
  }
  c->slo_max_error_ratio = absl::GetFlag(FLAGS_slo_max_error_ratio);
  if (absl::Status s = InRange("--slo_max_error_ratio", c->slo_max_error_ratio, 0, 1); !s.ok()) {
    return s;
  }
  c->slo_growth = absl::GetFlag(FLAGS_slo_growth);
  if (!(c->slo_growth > 1) || c->slo_growth > 100) {
    return Bad("--slo_growth", "must be in (1, 100]", absl::StrCat(c->slo_growth));
  }
  c->slo_precision = absl::GetFlag(FLAGS_slo_precision);
  if (!(c->slo_precision > 0) || c->slo_precision > 1) {
    return Bad("--slo_precision", "must be in (0, 1]", absl::StrCat(c->slo_precision));
  }
  c->slo_max_rps = absl::GetFlag(FLAGS_slo_max_rps);
  if (!(c->slo_max_rps >= 0) || !Finite(c->slo_max_rps) ||
      (c->slo_max_rps > 0 && c->slo_max_rps < c->rates[0])) {
    return Bad("--slo_max_rps", "must be 0 (no cap) or >= the starting --rate",
               absl::StrCat(c->slo_max_rps));
  }
  c->slo_max_steps = absl::GetFlag(FLAGS_slo_max_steps);
  if (absl::Status s = InRange("--slo_max_steps", c->slo_max_steps, 1, 1000); !s.ok()) return s;
  c->slo_recheck = absl::GetFlag(FLAGS_slo_recheck);
  if (absl::Status s = InRange("--slo_recheck", c->slo_recheck, 0, 10); !s.ok()) return s;
  if (c->mode == Mode::kSlo && c->rates.size() != 1) {
    return absl::InvalidArgumentError(
        "--rate: with --mode slo give one starting rate (the search picks the others)");
  }
  return absl::OkStatus();
}

// The report's files, plots and label, the response log and --metrics_url.
absl::Status OutputsFromFlags(Config* c) {
  c->json_path = absl::GetFlag(FLAGS_json);
  c->csv_path = absl::GetFlag(FLAGS_csv);
  c->plot_dir = absl::GetFlag(FLAGS_plot_dir);
  c->gnuplot = absl::GetFlag(FLAGS_gnuplot);
  if (!c->plot_dir.empty() && c->gnuplot.empty()) return Bad("--gnuplot", "must not be empty", "");
  c->label = absl::GetFlag(FLAGS_label);
  c->response_log_path = absl::GetFlag(FLAGS_response_log);
  c->metrics_url = absl::GetFlag(FLAGS_metrics_url);
  return absl::OkStatus();
}

}  // namespace

// The flag groups in a fixed order: later groups read what earlier ones
// parsed (--protocol, --mode, --rate), and with several bad flags the first
// one met is the one reported.
absl::StatusOr<Config> ConfigFromFlags() {
  using Group = absl::Status (*)(Config*);
  const Group groups[] = {ConnectionFromFlags, StepsFromFlags, LoadFromFlags,
                          TrafficFromFlags,    SloFromFlags,   OutputsFromFlags};
  Config c;
  for (const Group group : groups) {
    if (absl::Status s = group(&c); !s.ok()) return s;
  }
  return c;
}

}  // namespace rankd::loadtest
