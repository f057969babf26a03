// What a rankload run needs before the first request: the connections (one
// RankingClient with its own TCP connection per --connections, each connected
// within --connect_timeout_ms) and the requests (replayed from --requests, or
// generated from the served model's GetModelInfo, with --model_config's bag
// sizes), and the sender of --protocol over them. Errors start with the flag to blame; UNAVAILABLE / DEADLINE_EXCEEDED
// mean the server could not be reached, anything else a bad flag value.
#ifndef RANKD_LOADTEST_CLI_RUN_SETUP_H_
#define RANKD_LOADTEST_CLI_RUN_SETUP_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ranking_client.h"
#include "loadtest/cli/cli.h"
#include "loadtest/driver/score_sender.h"
#include "loadtest/traffic/request_generator.h"

namespace rankd::loadtest {

struct RunSetup {
  std::vector<std::unique_ptr<client::RankingClient>> clients;
  RequestPool pool;
  // Sends `pool` by --protocol (over `clients` for rankd and kserve);
  // declared after them, so it goes first.
  std::unique_ptr<ScoreSender> sender;
  std::set<std::string> models;  // model names the requests name
  std::string traffic;           // one line for the report
};

absl::StatusOr<RunSetup> PrepareRun(const Config& config);

// typical_ids_per_bag by feature name from a text-format model.pbtxt (0 -> 1).
absl::StatusOr<std::map<std::string, int>> BagSizesFromModelConfig(const std::string& path);

}  // namespace rankd::loadtest

#endif  // RANKD_LOADTEST_CLI_RUN_SETUP_H_
