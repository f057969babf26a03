// Wire -> engine: turns a rankd.v1.ScoreRequest into an engine::Request that
// views the message's arrays (ids are not copied), after checking it against
// the model. Shared by the gRPC handler and `rankd score`.
#ifndef RANKD_SERVER_REQUEST_CONVERSION_H_
#define RANKD_SERVER_REQUEST_CONVERSION_H_

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/request.h"
#include "engine/request_validation.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::server {

// The message must outlive the returned Request. INVALID_ARGUMENT naming the
// field for: unknown, repeated or missing sparse features, and everything
// engine::ValidateRequest checks.
absl::StatusOr<engine::Request> ToEngineRequest(
    const engine::Model& model, const rankd::v1::ScoreRequest& request,
    const engine::RequestLimits& limits = {});

}  // namespace rankd::server

#endif  // RANKD_SERVER_REQUEST_CONVERSION_H_
