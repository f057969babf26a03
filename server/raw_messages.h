// Requests and responses of the raw (grpc::ByteBuffer) methods of the public
// service (server/ranking_service.h): the service parses and serializes its
// messages itself, so a request that is not valid protobuf gets a real answer
// (INVALID_ARGUMENT naming the message type) instead of gRPC's UNIMPLEMENTED
// with no message, and reaches the service's metrics.
#ifndef RANKD_SERVER_RAW_MESSAGES_H_
#define RANKD_SERVER_RAW_MESSAGES_H_

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace rankd::server {

// Parses `wire` into `message` (cleared first) and empties `wire` (its
// slices are released at once: the parsed message holds the data now).
// INVALID_ARGUMENT "request is not a valid <full type name>" when the bytes
// are not a valid serialization of it (bad wire format, truncated, a string
// field that is not UTF-8), with what protobuf reports, cut short.
absl::Status ParseRequest(grpc::ByteBuffer* wire, google::protobuf::Message* message);

// Serializes `message` into `wire` (replacing what it held). INTERNAL when
// it cannot be serialized (over 2 GiB).
absl::Status SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* wire);

}  // namespace rankd::server

#endif  // RANKD_SERVER_RAW_MESSAGES_H_
