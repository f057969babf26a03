#include "server/status_mapping.h"

#include <string>

#include "engine/model/error_text.h"

namespace rankd::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      engine::TruncateForError(status.message(), kMaxStatusMessageBytes));
}

}  // namespace rankd::server
