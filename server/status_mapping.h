// The one place where engine statuses become gRPC statuses (DESIGN.md).
#ifndef RANKD_SERVER_STATUS_MAPPING_H_
#define RANKD_SERVER_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace rankd::server {

// Same code (absl and gRPC share the canonical code numbers) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace rankd::server

#endif  // RANKD_SERVER_STATUS_MAPPING_H_
