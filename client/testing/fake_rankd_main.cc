// fake_rankd: the fake Ranking + health server as a process, for rankctl's
// shell test. Prints "port N" once listening; serves until killed.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/testing/fake_ranking_service.h"

ABSL_FLAG(int, port, 0, "port on 127.0.0.1; 0 = chosen by the OS");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto fake = rankd::client::testing::StartFakeServer(absl::GetFlag(FLAGS_port));
  if (!fake.ok()) {
    std::cerr << "fake_rankd: " << fake.status().message() << "\n";
    return 1;
  }
  std::cout << "port " << fake->port << std::endl;
  fake->server->Wait();
  return 0;
}
