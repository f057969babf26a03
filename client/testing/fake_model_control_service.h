// An in-process stand-in for rankd's admin API (rankd.v1.ModelControl), for
// client tests: an in-memory model repository and version states that honour
// the API's documented errors. Never used in production code.
#ifndef RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_
#define RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
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
//
// Embedding updates (UpdateEmbeddings): "mini" has tables
//   t_user  STATIC, 1000 rows, dim 4, F32 (raw_rows: 4 bytes per value)
//   t_item  DYNAMIC, dim 4, F16 (raw_rows: 2 bytes per value), max_keys 100
//           (the smallest key is evicted past that)
// and every other model none. A message is checked whole (model, version
// READY, table, producer_id with a sequence, rows/raw_rows sizes, static ids
// in range, no delete_keys on a static table, no key both deleted and
// written), then applied to each targeted version (version 0 = every READY
// one) unless its (producer_id, table) sequence is <= that version's last
// one: then it counts as a duplicate. The first bad message ends the stream:
// INVALID_ARGUMENT (NOT_FOUND for an unknown model or table,
// FAILED_PRECONDITION for a version that is not READY) 'table "t_user",
// message 2 (sequence 7): id 1000 is out of range [0, 1000) (2 messages
// before it applied)'. ListModels reports each version's update positions
// and t_item's key count. SaveSnapshot copies a READY version (tables and
// positions) into a new READY version (new_version 0 = highest + 1;
// ALREADY_EXISTS for a version in the repository).
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
  grpc::Status UpdateEmbeddings(grpc::ServerContext* context,
                                grpc::ServerReader<rankd::v1::EmbeddingUpdate>* reader,
                                rankd::v1::UpdateSummary* response) override;
  grpc::Status SaveSnapshot(grpc::ServerContext* context,
                            const rankd::v1::SaveSnapshotRequest* request,
                            rankd::v1::SaveSnapshotResponse* response) override;

  // Injected errors: the next `streams` UpdateEmbeddings calls end with
  // `code` and `message` after reading (and applying) `after_messages`
  // messages, as a server that went away mid-stream.
  void FailUpdates(int streams, grpc::StatusCode code, const std::string& message,
                   int after_messages);
  // The next SaveSnapshot fails with `code` and `message`.
  void FailNextSnapshot(grpc::StatusCode code, const std::string& message);

  // Every EmbeddingUpdate read, in order, over all streams (retries too).
  std::vector<rankd::v1::EmbeddingUpdate> received_updates();
  // UpdateEmbeddings calls so far.
  int update_streams();
  // Messages applied to `version` of `model` (duplicates not counted).
  int64_t applied(const std::string& model, int64_t version);

 private:
  // A version's tables as updates leave them.
  struct Tables {
    // (producer_id, table) -> (last sequence, its timestamp).
    std::map<std::pair<std::string, std::string>, std::pair<uint64_t, int64_t>> positions;
    std::set<int64_t> item_keys;  // t_item
    int64_t evictions = 0;
    int64_t applied = 0;  // messages
  };
  struct Model {
    std::vector<int64_t> repository;                       // ascending
    std::map<int64_t, rankd::v1::VersionStatus> versions;  // tried so far
    std::map<std::string, int64_t> labels;
    std::map<int64_t, Tables> tables;  // by version
    bool has_tables = false;           // "mini": t_user, t_item
  };
  struct FailUpdate {
    int streams = 0;
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message;
    int after_messages = 0;
  };

  // Checks `m` against `model` and applies it to the versions it targets,
  // adding to `summary`; an error leaves nothing applied.
  grpc::Status ApplyUpdate(const rankd::v1::EmbeddingUpdate& m, Model* model,
                           std::map<std::pair<int64_t, std::string>,
                                    rankd::v1::TableUpdateSummary>* summary);

  // NOT_FOUND naming the models, or the model.
  grpc::Status Find(const std::string& name, Model** model);
  // NOT_FOUND naming the repository's versions unless all of `versions` are in it.
  static grpc::Status CheckVersions(const std::string& name, const Model& model,
                                    const google::protobuf::RepeatedField<int64_t>& versions);
  // `model` as the API reports it (labels of each version filled in).
  static rankd::v1::ModelStatus Status(const std::string& name, const Model& model);

  std::mutex mu_;
  std::map<std::string, Model> models_;  // guarded by mu_
  FailUpdate fail_update_;                // guarded by mu_
  grpc::Status fail_snapshot_;            // guarded by mu_
  std::vector<rankd::v1::EmbeddingUpdate> received_;  // guarded by mu_
  int update_streams_ = 0;                // guarded by mu_
};

// A started admin server: the fake ModelControl service on its own port, as
// rankd serves it on its own (admin) listener.
struct FakeAdminServer {
  std::unique_ptr<FakeModelControlService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string host = "127.0.0.1";
  std::string target() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port);
  }
};

// Listens on `host`:`port` (0 = a free port chosen by the OS).
absl::StatusOr<FakeAdminServer> StartFakeAdminServer(int port = 0,
                                                     const std::string& host = "127.0.0.1");

}  // namespace rankd::client::testing

#endif  // RANKD_CLIENT_TESTING_FAKE_MODEL_CONTROL_SERVICE_H_
