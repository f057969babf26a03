// A request message serialized once, to be sent many times without
// serializing it again: a load generator's prepared traffic. Serializing a
// large request (hundreds of candidates, thousands of packed ids) is a large
// share of the sender's CPU for the call; a client that measures a server
// should not spend it on every call. RankingClient::ScoreAsync and InferAsync
// send one as it is.
//
// Immutable once made, so one instance may be sent by any number of threads
// at once; each call takes a reference to the same bytes (gRPC slices are
// reference counted), not a copy. The message type is part of the type, so
// bytes of one request cannot be sent as another.
#ifndef RANKD_CLIENT_SERIALIZED_REQUEST_H_
#define RANKD_CLIENT_SERIALIZED_REQUEST_H_

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "inference/grpc_predict_v2.pb.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::client {

// `message`'s wire bytes in one gRPC slice. INVALID_ARGUMENT naming the
// request when protobuf cannot serialize it (a message of 2 GiB or more).
absl::StatusOr<grpc::ByteBuffer> SerializeToByteBuffer(const google::protobuf::MessageLite& message);

template <typename Request>
class SerializedRequest {
 public:
  // Serializes `request` (errors as SerializeToByteBuffer).
  static absl::StatusOr<SerializedRequest> From(const Request& request) {
    absl::StatusOr<grpc::ByteBuffer> bytes = SerializeToByteBuffer(request);
    if (!bytes.ok()) return bytes.status();
    return SerializedRequest(*std::move(bytes));
  }

  // The wire bytes, as gRPC sends them.
  const grpc::ByteBuffer& bytes() const { return bytes_; }
  size_t size() const { return bytes_.Length(); }

 private:
  explicit SerializedRequest(grpc::ByteBuffer bytes) : bytes_(std::move(bytes)) {}

  grpc::ByteBuffer bytes_;
};

using SerializedScoreRequest = SerializedRequest<rankd::v1::ScoreRequest>;
using SerializedInferRequest = SerializedRequest<inference::ModelInferRequest>;

}  // namespace rankd::client

#endif  // RANKD_CLIENT_SERIALIZED_REQUEST_H_
