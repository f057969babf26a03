#include "client/serialized_request.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"

namespace rankd::client {

absl::StatusOr<grpc::ByteBuffer> SerializeToByteBuffer(const google::protobuf::MessageLite& message) {
  std::string wire;
  if (!message.SerializeToString(&wire)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: cannot be serialized (", message.ByteSizeLong(),
                     " bytes; protobuf messages stop below 2 GiB)"));
  }
  grpc::Slice slice(wire);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace rankd::client
