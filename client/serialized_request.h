// A ScoreRequest serialized once, to be sent many times without serializing it
// again: a load generator's prepared traffic. Serializing a large request
// (hundreds of candidates, thousands of packed ids) is a large share of the
// sender's CPU for the call; a client that measures a server should not spend
// it on every call. RankingClient::ScoreAsync sends one as it is.
//
// Immutable once made, so one instance may be sent by any number of threads
// at once; each call takes a reference to the same bytes (gRPC slices are
// reference counted), not a copy.
#ifndef RANKD_CLIENT_SERIALIZED_REQUEST_H_
#define RANKD_CLIENT_SERIALIZED_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::client {

class SerializedScoreRequest {
 public:
  // Serializes `request`. INVALID_ARGUMENT naming the request when protobuf
  // cannot serialize it (a message of 2 GiB or more).
  static absl::StatusOr<SerializedScoreRequest> From(const rankd::v1::ScoreRequest& request);

  // The wire bytes, as gRPC sends them.
  const grpc::ByteBuffer& bytes() const { return bytes_; }
  size_t size() const { return bytes_.Length(); }
  // Taken from the request, for reports (candidates per call).
  int32_t num_candidates() const { return num_candidates_; }
  const std::string& model() const { return model_; }

 private:
  SerializedScoreRequest() = default;

  grpc::ByteBuffer bytes_;
  int32_t num_candidates_ = 0;
  std::string model_;
};

}  // namespace rankd::client

#endif  // RANKD_CLIENT_SERIALIZED_REQUEST_H_
