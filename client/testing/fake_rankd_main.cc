// fake_rankd: the fake Ranking + health server and the fake admin
// (ModelControl) server as a process, for rankctl's shell test. Like rankd,
// it serves the admin API on a listener of its own. Prints "admin_port M"
// and then "port N" once both listen; serves until killed.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/testing/fake_model_control_service.h"
#include "client/testing/fake_ranking_service.h"

ABSL_FLAG(int, port, 0, "port on 127.0.0.1 (Ranking, health); 0 = chosen by the OS");
ABSL_FLAG(int, admin_port, 0, "port of ModelControl; 0 = chosen by the OS");
ABSL_FLAG(std::string, admin_host, "127.0.0.1", "address of ModelControl (e.g. ::1)");
ABSL_FLAG(int, fail_updates, 0,
          "the first N UpdateEmbeddings streams end with UNAVAILABLE after one message");
ABSL_FLAG(bool, no_ranking, false, "serve only the admin API (a second replica)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto admin = rankd::client::testing::StartFakeAdminServer(absl::GetFlag(FLAGS_admin_port),
                                                            absl::GetFlag(FLAGS_admin_host));
  if (!admin.ok()) {
    std::cerr << "fake_rankd: " << admin.status().message() << "\n";
    return 1;
  }
  if (absl::GetFlag(FLAGS_fail_updates) > 0) {
    admin->service->FailUpdates(absl::GetFlag(FLAGS_fail_updates), grpc::StatusCode::UNAVAILABLE,
                                "fake_rankd: connection reset (--fail_updates)", 1);
  }
  if (absl::GetFlag(FLAGS_no_ranking)) {
    std::cout << "admin_port " << admin->port << std::endl;
    admin->server->Wait();
    return 0;
  }
  auto fake = rankd::client::testing::StartFakeServer(absl::GetFlag(FLAGS_port));
  if (!fake.ok()) {
    std::cerr << "fake_rankd: " << fake.status().message() << "\n";
    return 1;
  }
  std::cout << "admin_port " << admin->port << "\n";
  std::cout << "port " << fake->port << std::endl;
  fake->server->Wait();
  return 0;
}
