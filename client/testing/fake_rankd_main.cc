// fake_rankd: the fake Ranking + health server and the fake admin
// (ModelControl) server as a process, for rankctl's shell test. Like rankd,
// it serves the admin API on a listener of its own. Prints "admin_port M"
// and then "port N" once both listen; serves until killed.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/testing/fake_model_control_service.h"
#include "client/testing/fake_ranking_service.h"

ABSL_FLAG(int, port, 0, "port on 127.0.0.1 (Ranking, health); 0 = chosen by the OS");
ABSL_FLAG(int, admin_port, 0, "port on 127.0.0.1 (ModelControl); 0 = chosen by the OS");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto admin = rankd::client::testing::StartFakeAdminServer(absl::GetFlag(FLAGS_admin_port));
  if (!admin.ok()) {
    std::cerr << "fake_rankd: " << admin.status().message() << "\n";
    return 1;
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
