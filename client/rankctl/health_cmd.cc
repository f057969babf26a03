// rankctl health: asks grpc.health.v1.Health/Check; prints the serving status
// and exits 0 only for SERVING, so it can be a container health check.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "client/rankctl/commands.h"

ABSL_FLAG(std::string, service, "", "health: service to check: \"\" = the server, or a model name");

namespace rankd::rankctl {

int RunHealth() {
  auto client = ClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("health", client.status());
  const std::string service = absl::GetFlag(FLAGS_service);
  auto status = (*client)->Health(service);
  if (!status.ok()) return CallFailed("health", status.status());
  std::cout << client::ServingStatusName(*status) << "\n";
  return *status == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk : kExitFailed;
}

}  // namespace rankd::rankctl
