#include "server/ranking_service.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/admitted_call.h"
#include "server/grpc_deadline.h"
#include "server/raw_messages.h"
#include "server/request_conversion.h"
#include "server/status_mapping.h"

namespace rankd::server {
namespace {

const char* KindName(bool dynamic) { return dynamic ? "DYNAMIC" : "STATIC"; }

// Memory a parsed request holds (its repeated fields and strings), plus
// `response_scores` floats of its response.
int64_t HeldBytes(const rankd::v1::ScoreRequest& r, int64_t response_scores) {
  int64_t bytes = sizeof(rankd::v1::ScoreRequest) + r.model().size() +
                  r.version_label().size() + int64_t{r.dense_size()} * sizeof(float) +
                  response_scores * sizeof(float);
  for (const rankd::v1::SparseFeature& f : r.sparse()) {
    bytes += sizeof(rankd::v1::SparseFeature) + f.name().size() +
             int64_t{f.ids_size()} * sizeof(int64_t) +
             int64_t{f.lengths_size()} * sizeof(int32_t) +
             int64_t{f.weights_size()} * sizeof(float);
  }
  return bytes;
}

}  // namespace

RankingService::RankingService(const ModelManager* models, Metrics* metrics, Options options)
    : models_(models),
      metrics_(metrics),
      limits_(options.limits),
      backend_(std::move(options.backend)),
      budget_(RequestBudget::Options{
          options.max_inflight_request_bytes,
          [metrics](int64_t bytes) { metrics->SetRequestBytesInFlight(bytes); }}),
      request_pool_(std::make_shared<MessagePool<rankd::v1::ScoreRequest>>(options.request_pool)) {}

RankingService::ScoreCall::~ScoreCall() {
  if (pool_ == nullptr || request_ == nullptr) return;
  const int64_t bytes = HeldBytes(*request_, 0);
  pool_->Give(std::move(request_), bytes);
}

void RankingService::StopAdmitting() { budget_.Close(); }

bool RankingService::WaitForAdmitted(absl::Time deadline) const {
  return budget_.WaitUntilIdle(deadline);
}

absl::StatusOr<RequestBudget::Hold> RankingService::AdmitScore(int64_t wire_bytes,
                                                              absl::Time arrival) {
  return AdmitWireBytes(&budget_, metrics_, Metrics::Protocol::kRankd, wire_bytes, arrival);
}

grpc::ServerUnaryReactor* RankingService::Score(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  const absl::Time arrival = absl::Now();
  // Admission by wire size, before the bytes are parsed.
  absl::StatusOr<RequestBudget::Hold> hold =
      AdmitScore(static_cast<int64_t>(request->Length()), arrival);
  if (!hold.ok()) return FinishRefused(context, hold.status());
  auto* reactor = NewScoreCall<ReactorCall<ScoreCall>>(*std::move(hold), response, arrival);
  // The request buffer is this handler's to read and nothing reads it after
  // us (RunScore empties it).
  RunScore(reactor, const_cast<grpc::ByteBuffer*>(request), ToAbslDeadline(context->deadline()));
  return reactor;
}

void RankingService::RunScore(ScoreCall* call, grpc::ByteBuffer* request_wire,
                              absl::Time deadline) {
  // ParseRequest empties the wire buffer, so its bytes are freed now instead
  // of when the RPC ends.
  absl::Status parsed = ParseRequest(request_wire, &call->request());
  if (!parsed.ok()) {
    call->Refuse("malformed", "", 0, parsed);
    return;
  }
  const rankd::v1::ScoreRequest& req = call->request();
  if (!call->GrowOrRefuse(HeldBytes(req, 0), req.model(), 0)) return;
  auto found = models_->Find(req.model(), req.version(), req.version_label());
  if (!found.ok()) {
    call->Answer(req.model(), 0, found.status());
    return;
  }
  call->served = *std::move(found);
  ServedVersion* served = call->served.get();
  absl::StatusOr<engine::Request> view;
  {
    auto tables = engine::LiveTables::ValidationScope(served->live_tables());
    view = ToEngineRequest(served->instance().model(), req, limits_);
  }
  if (!view.ok()) {
    call->Answer(served->name(), served->version(), view.status());
    return;
  }
  // The response's scores count too (num_candidates is validated now).
  if (!call->GrowOrRefuse(HeldBytes(req, req.num_candidates()), served->name(),
                          served->version())) {
    return;
  }
  // Workers write the scores straight into the response message.
  call->response.mutable_scores()->Resize(req.num_candidates(), 0.0f);
  call->response.set_model(served->name());
  call->response.set_version(served->version());

  engine::QueuedRequest item;
  item.request = std::move(*view);
  item.scores = absl::MakeSpan(call->response.mutable_scores()->mutable_data(),
                               call->response.scores_size());
  item.deadline = deadline;
  SubmitAdmitted(call, std::move(item));
}

grpc::ServerUnaryReactor* RankingService::GetModelInfo(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request_wire,
                                                       grpc::ByteBuffer* response_wire) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(AnswerModelInfo(const_cast<grpc::ByteBuffer*>(request_wire), response_wire));
  return reactor;
}

grpc::Status RankingService::AnswerModelInfo(grpc::ByteBuffer* request_wire,
                                             grpc::ByteBuffer* response_wire) const {
  rankd::v1::GetModelInfoRequest request;
  if (absl::Status s = ParseRequest(request_wire, &request); !s.ok()) return ToGrpcStatus(s);
  auto found = models_->Find(request.model(), request.version(), request.version_label());
  if (!found.ok()) return ToGrpcStatus(found.status());
  rankd::v1::ModelInfo info;
  rankd::v1::ModelInfo* response = &info;
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
  return ToGrpcStatus(SerializeResponse(info, response_wire));
}

}  // namespace rankd::server
