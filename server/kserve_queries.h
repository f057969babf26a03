// The KServe v2 readiness and metadata answers, shared by the gRPC service
// (server/kserve_service.h) and the REST endpoints (server/http/), so both
// protocols answer the same questions the same way.
//
// Readiness: the server is ready while it admits requests (not draining)
// and serves at least one model; a model (version) is ready when the
// Ranking service would route to it and the server admits requests.
#ifndef RANKD_SERVER_KSERVE_QUERIES_H_
#define RANKD_SERVER_KSERVE_QUERIES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/grpc_predict_v2.pb.h"
#include "server/lifecycle/model_manager.h"
#include "server/request_budget.h"

namespace rankd::server {

bool KServeServerReady(const ModelManager& models, const RequestBudget& budget);

// Whether model `name` at `version` ("" = the latest ready one) is ready;
// not ready is an answer (false), a model that does not exist or a
// malformed version is an error (NOT_FOUND, INVALID_ARGUMENT).
absl::StatusOr<bool> KServeModelReady(const ModelManager& models, const RequestBudget& budget,
                                      const std::string& name, const std::string& version);

// ModelMetadata of model `name` at `version`: its name, ready versions,
// `platform`, input and output tensors; errors as ModelManager::Find's.
absl::Status KServeModelMetadata(const ModelManager& models, const std::string& platform,
                                 const std::string& name, const std::string& version,
                                 inference::ModelMetadataResponse* out);

}  // namespace rankd::server

#endif  // RANKD_SERVER_KSERVE_QUERIES_H_
