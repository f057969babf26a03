// An in-process stand-in for rankd's admin API (rankd.v1.ModelControl), for
// client tests: an in-memory model repository and version states that honour
// the API's documented errors. Never used in production code.
#ifndef RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_
#define RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "rankd/v1/model_control.grpc.pb.h"

namespace rankd::client::testing {

// The repository, by model name (policy "all" everywhere: LoadModel without
// versions loads every version of the repository):
//   "mini"    versions 1, 2, 3; 1 and 2 READY, 3 never loaded (not listed);
//             labels stable -> 1, canary -> 2.
//   "broken"  version 1, FAILED (kBrokenReason); loading it fails again.
//   "slow"    version 1, never loaded; LoadModel first sleeps 500 ms
//             (returns early if the call is cancelled).
// Errors, as documented in model_control.proto:
//   empty model (Load, Unload, SetVersionLabel) or label -> INVALID_ARGUMENT
//   unknown model      -> NOT_FOUND 'model "x" is not in the repository
//                         (models: broken, mini, slow)'
//   unknown version    -> NOT_FOUND 'model "mini" has no version 9 in the
//                         repository (versions: 1, 2, 3)'
//   label -> a version that is not READY -> FAILED_PRECONDITION 'model
//                         "mini" version 3 is not loaded (ready: 1, 2)', or
//                         '... version 1 is UNLOADED, not READY (ready: 2)'
// Unloading a version keeps the labels pointing at it. Removing a label that
// does not exist is OK (nothing to do). State is shared by all callers.
class FakeModelControlService final : public rankd::v1::ModelControl::Service {
 public:
  static constexpr char kBrokenReason[] =
      "weights.safetensors: emb_l.0.weight is [10, 8], want [10, 16]";

  FakeModelControlService();

  grpc::Status ListModels(grpc::ServerContext* context, const rankd::v1::ListModelsRequest* request,
                          rankd::v1::ListModelsResponse* response) override;
  grpc::Status LoadModel(grpc::ServerContext* context, const rankd::v1::LoadModelRequest* request,
                         rankd::v1::LoadModelResponse* response) override;
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const rankd::v1::UnloadModelRequest* request,
                           rankd::v1::UnloadModelResponse* response) override;
  grpc::Status SetVersionLabel(grpc::ServerContext* context,
                               const rankd::v1::SetVersionLabelRequest* request,
                               rankd::v1::SetVersionLabelResponse* response) override;

 private:
  struct Model {
    std::vector<int64_t> repository;                       // ascending
    std::map<int64_t, rankd::v1::VersionStatus> versions;  // tried so far
    std::map<std::string, int64_t> labels;
  };

  // NOT_FOUND naming the models, or the model.
  grpc::Status Find(const std::string& name, Model** model);
  // NOT_FOUND naming the repository's versions unless all of `versions` are in it.
  static grpc::Status CheckVersions(const std::string& name, const Model& model,
                                    const google::protobuf::RepeatedField<int64_t>& versions);
  // `model` as the API reports it (labels of each version filled in).
  static rankd::v1::ModelStatus Status(const std::string& name, const Model& model);

  std::mutex mu_;
  std::map<std::string, Model> models_;  // guarded by mu_
};

// A started admin server: the fake ModelControl service on its own port, as
// rankd serves it on its own (admin) listener.
struct FakeAdminServer {
  std::unique_ptr<FakeModelControlService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

// Listens on 127.0.0.1:`port` (0 = a free port chosen by the OS).
absl::StatusOr<FakeAdminServer> StartFakeAdminServer(int port = 0);

}  // namespace rankd::client::testing

#endif  // RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_
