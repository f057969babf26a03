// A rankd ScoreRequest as a KServe v2 ModelInferRequest (the tensors of
// server/kserve_conversion.h) and a ModelInferResponse back as scores, so a
// client (rankload --protocol kserve) can send the same requests over both
// gRPC front ends:
//   dense              FP32  [B, num_dense]   left out when the request has none
//   <feature>          INT64 [total ids]
//   <feature>.lengths  INT32 [lengths]        [B], or [1] for a bag shared by all
//   <feature>.weights  FP32  [total ids]      only when the feature has weights
// Inputs go in that order (features in request order). `raw` puts the
// elements in raw_input_contents (little-endian, the form that skips
// protobuf's per-element coding) instead of typed contents.
#ifndef RANKD_CLIENT_KSERVE_REQUEST_H_
#define RANKD_CLIENT_KSERVE_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grpc_predict_v2.pb.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::client {

// INVALID_ARGUMENT naming the field for what KServe cannot carry: a
// version_label (KServe names versions only), num_candidates < 1, or a dense
// array that is not B rows. Everything else is left to the server to judge,
// as it judges a ScoreRequest.
absl::StatusOr<inference::ModelInferRequest> ToModelInferRequest(
    const rankd::v1::ScoreRequest& request, bool raw);

// The scores and version of a ModelInferResponse: INVALID_ARGUMENT (naming
// what is wrong) unless it holds one FP32 output `scores` of one dimension,
// typed or raw, and a decimal model_version.
struct KServeScores {
  std::vector<float> scores;
  int64_t version = 0;
};
absl::StatusOr<KServeScores> FromModelInferResponse(const inference::ModelInferResponse& response);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_KSERVE_REQUEST_H_
