// rankload's command line: the flags (defined in cli.cc, documented by
// `rankload --help`), turned into one validated Config. Every bad value is an
// INVALID_ARGUMENT whose message starts with the flag's name.
#ifndef RANKD_LOADTEST_CLI_CLI_H_
#define RANKD_LOADTEST_CLI_CLI_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/tls.h"
#include "loadtest/driver/score_sender.h"
#include "loadtest/traffic/arrival_schedule.h"
#include "loadtest/traffic/candidate_count.h"

namespace rankd::loadtest {

enum class Mode { kOpen, kClosed, kSlo };

// "open" | "closed" | "slo".
absl::StatusOr<Mode> ParseMode(absl::string_view text);

// A list of positive numbers: "1000", "100,200,500", or a range
// "START:STOP:STEP" (STOP included; STEP "+N" or "N" adds, "xF" multiplies).
// At most 1000 values. Errors name `flag`.
absl::StatusOr<std::vector<double>> ParseNumberList(absl::string_view text, absl::string_view flag);
// The same for positive integers.
absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view text, absl::string_view flag);

struct Config {
  std::string target;
  // --protocol: which front end the load goes to.
  Protocol protocol = Protocol::kRankd;
  // --http_target (protocol http): rankd's HTTP listener, HOST:PORT;
  // defaults to --target's host with port 8501.
  std::string http_target;
  // --http_connections (protocol http): keep-alive connections, the most
  // calls on the wire at once.
  int http_connections = 64;
  // --tls_ca_file, --tls_cert_file, --tls_key_file, --token_file
  // (client/tls.h; all empty = plaintext).
  client::SecurityFiles security;
  Mode mode = Mode::kOpen;
  std::vector<double> rates;        // open: one step per rate; slo: rates[0] is the start
  Arrival arrival = Arrival::kConstant;
  std::vector<int> concurrencies;   // closed: one step per value
  double duration_s = 10;
  double warmup_s = 2;
  int connections = 4;
  int threads = 1;                  // resolved (never 0)
  int64_t spin_us = 200;            // LoadDriver::Options::spin_us
  int64_t max_in_flight = 20000;
  double deadline_ms = 1000;
  double drain_s = 10;              // wait for an idle server after a failed step (driver/server_drain.h)
  double interval_s = 1;
  bool quiet = false;
  int64_t connect_timeout_ms = 5000;

  // Traffic: replay (request_files) or generated (model).
  std::vector<std::string> request_files;
  std::string model;
  int64_t model_version = 0;        // ScoreRequest.version of generated requests
  std::string version_label;        // ScoreRequest.version_label of generated requests
  CandidateCount candidates = CandidateCount::Fixed(1);
  double zipf_alpha = 1.05;
  int ids_per_bag = 0;              // 0 = model_config's typical_ids_per_bag, else 1
  std::string model_config;
  std::set<std::string> shared_features;
  int pool_size = 1000;
  uint64_t seed = 1;

  // SLO search (mode slo) and the pass/fail verdict of any step when set.
  double slo_percentile = 99;
  double slo_latency_ms = 0;        // 0 = no SLO
  double slo_max_error_ratio = 0.001;
  double slo_growth = 2;
  double slo_precision = 0.05;
  double slo_max_rps = 0;
  int slo_max_steps = 30;
  int slo_recheck = 2;              // re-runs of a failing SLO probe (SloSearch::Options::recheck)

  // Outputs.
  std::string json_path;
  std::string csv_path;
  std::string plot_dir;
  std::string gnuplot;
  std::string label;
  std::string metrics_url;
  std::string response_log_path;    // one CSV row per call (driver/response_log.h); "" = none
};

// Reads and validates every flag (after absl::ParseCommandLine).
absl::StatusOr<Config> ConfigFromFlags();

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_CLI_CLI_H_
