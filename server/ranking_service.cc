#include "server/ranking_service.h"

#include <chrono>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"

namespace rankd::server {
namespace {

// gRPC's "no deadline" is the far end of system_clock.
absl::Time ToAbslDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

const char* KindName(bool dynamic) { return dynamic ? "DYNAMIC" : "STATIC"; }

}  // namespace

grpc::ServerUnaryReactor* RankingService::Score(grpc::CallbackServerContext* context,
                                                const rankd::v1::ScoreRequest* request,
                                                rankd::v1::ScoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time arrival = absl::Now();
  auto found = models_->Find(request->model(), request->version(), request->version_label());
  if (!found.ok()) {
    metrics_->RecordRequest(request->model(), 0, found.status().code(), absl::Now() - arrival);
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  std::shared_ptr<ServedVersion> served = *std::move(found);
  engine::ModelInstance* model = &served->instance();
  const std::string& name = served->name();
  const int64_t version = served->version();
  absl::StatusOr<engine::Request> view;
  {
    // Validation looks keys up in dynamic tables (id_policy ERROR): not while
    // an update rewrites their hash slots.
    engine::LiveTables* live = served->live_tables();
    engine::LiveTables::BatchScope tables(
        live != nullptr && live->validation_reads_tables() ? live : nullptr);
    view = ToEngineRequest(model->model(), *request, limits_);
  }
  if (!view.ok()) {
    metrics_->RecordRequest(name, version, view.status().code(), absl::Now() - arrival);
    reactor->Finish(ToGrpcStatus(view.status()));
    return reactor;
  }
  // Workers write the scores straight into the response message.
  response->mutable_scores()->Resize(request->num_candidates(), 0.0f);
  response->set_model(name);
  response->set_version(version);

  engine::QueuedRequest item;
  item.request = std::move(*view);
  item.scores = absl::MakeSpan(response->mutable_scores()->mutable_data(),
                               response->scores_size());
  item.deadline = ToAbslDeadline(context->deadline());
  item.cancelled = [context] { return context->IsCancelled(); };
  Metrics* metrics = metrics_;
  // The callback holds the version until the request is answered, then lets
  // go at once (the batcher may keep the callback object a while longer).
  item.done = [reactor, metrics, served, arrival](absl::Status status,
                                                  const engine::RequestTiming&) mutable {
    metrics->RecordRequest(served->name(), served->version(), status.code(),
                           absl::Now() - arrival);
    reactor->Finish(ToGrpcStatus(status));
    served.reset();
  };
  absl::Status submitted = model->Submit(std::move(item));
  if (!submitted.ok()) {  // queue full or shutting down: answer at once
    metrics_->RecordRequest(name, version, submitted.code(), absl::Now() - arrival);
    response->clear_scores();
    reactor->Finish(ToGrpcStatus(submitted));
  }
  return reactor;
}

grpc::ServerUnaryReactor* RankingService::GetModelInfo(
    grpc::CallbackServerContext* context, const rankd::v1::GetModelInfoRequest* request,
    rankd::v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto found = models_->Find(request->model(), request->version(), request->version_label());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  const engine::Model& m = (*found)->instance().model();
  response->set_name(m.name);
  response->set_version(m.version);
  for (int64_t v : models_->ReadyVersions(m.name)) response->add_versions(v);
  for (const auto& [label, v] : models_->Labels(m.name)) (*response->mutable_labels())[label] = v;
  response->set_num_dense(m.num_dense);
  for (size_t f = 0; f < m.features.size(); ++f) {
    const engine::EmbeddingTable& t = m.tables[m.features[f].table];
    const rankd::v1::TableConfig& tc = m.config.tables(m.features[f].table);
    auto* out = response->add_features();
    out->set_name(m.features[f].name);
    out->set_table(t.name);
    out->set_request_level(m.features[f].request_level);
    out->set_dim(t.dim);
    out->set_num_rows(t.num_rows);
    out->set_table_kind(KindName(t.dynamic));
    out->set_pooling(rankd::v1::PoolingMode_Name(tc.pooling()));
    out->set_dtype(rankd::v1::DataType_Name(tc.dtype()));
  }
  response->set_interaction(rankd::v1::InteractionKind_Name(m.interaction));
  for (const auto& l : m.bottom) response->add_bottom_mlp(l.out);
  for (const auto& l : m.top) response->add_top_mlp(l.out);
  response->set_backend(backend_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace rankd::server
