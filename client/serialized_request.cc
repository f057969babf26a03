#include "client/serialized_request.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"

namespace rankd::client {

absl::StatusOr<SerializedScoreRequest> SerializedScoreRequest::From(
    const rankd::v1::ScoreRequest& request) {
  std::string wire;
  if (!request.SerializeToString(&wire)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: cannot be serialized (", request.ByteSizeLong(),
                     " bytes; protobuf messages stop below 2 GiB)"));
  }
  SerializedScoreRequest out;
  grpc::Slice slice(wire);
  out.bytes_ = grpc::ByteBuffer(&slice, 1);
  out.num_candidates_ = request.num_candidates();
  out.model_ = request.model();
  return out;
}

}  // namespace rankd::client
