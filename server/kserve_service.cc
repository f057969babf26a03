#include "server/kserve_service.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/arena.h"
#include "server/admitted_call.h"
#include "server/build_info.h"
#include "server/grpc_deadline.h"
#include "server/kserve_conversion.h"
#include "server/kserve_queries.h"
#include "server/raw_messages.h"
#include "server/status_mapping.h"

namespace rankd::server {
namespace {

// Parses `wire` into `request` and answers `response` (computed by `answer`
// from the request) on the default reactor: the small, immediate methods.
template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* AnswerNow(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* wire, grpc::ByteBuffer* response_wire,
                                    Answer answer) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request request;
  absl::Status s = ParseRequest(const_cast<grpc::ByteBuffer*>(wire), &request);
  Response response;
  if (s.ok()) s = answer(request, &response);
  if (s.ok()) s = SerializeResponse(response, response_wire);
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

KServeService::KServeService(const ModelManager* models, Metrics* metrics, RequestBudget* budget,
                             Options options)
    : models_(models),
      metrics_(metrics),
      budget_(budget),
      limits_(options.limits),
      platform_(std::move(options.platform)),
      request_pool_(
          std::make_shared<MessagePool<inference::ModelInferRequest>>(options.request_pool)) {}

KServeService::InferCall::~InferCall() {
  if (pool_ != nullptr && request_ != nullptr && request_bytes_ >= 0) {
    pool_->Give(std::move(request_), request_bytes_);
  }
}

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return AnswerNow<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      context, request, response,
      [](const inference::ServerLiveRequest&, inference::ServerLiveResponse* r) {
        r->set_live(true);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KServeService::ServerReady(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return AnswerNow<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      context, request, response,
      [this](const inference::ServerReadyRequest&, inference::ServerReadyResponse* r) {
        r->set_ready(KServeServerReady(*models_, *budget_));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return AnswerNow<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      context, request, response,
      [this](const inference::ModelReadyRequest& q, inference::ModelReadyResponse* r) {
        absl::StatusOr<bool> ready = KServeModelReady(*models_, *budget_, q.name(), q.version());
        if (!ready.ok()) return ready.status();
        r->set_ready(*ready);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return AnswerNow<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      context, request, response,
      [](const inference::ServerMetadataRequest&, inference::ServerMetadataResponse* r) {
        r->set_name("rankd");
        r->set_version(kRankdVersion);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return AnswerNow<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      context, request, response,
      [this](const inference::ModelMetadataRequest& q, inference::ModelMetadataResponse* r) {
        return KServeModelMetadata(*models_, platform_, q.name(), q.version(), r);
      });
}

absl::StatusOr<RequestBudget::Hold> KServeService::AdmitInfer(int64_t wire_bytes,
                                                              absl::Time arrival) {
  return AdmitWireBytes(budget_, metrics_, Metrics::Protocol::kKServe, wire_bytes, arrival);
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request_wire,
                                                    grpc::ByteBuffer* response_wire) {
  const absl::Time arrival = absl::Now();
  absl::StatusOr<RequestBudget::Hold> hold =
      AdmitInfer(static_cast<int64_t>(request_wire->Length()), arrival);
  if (!hold.ok()) return FinishRefused(context, hold.status());
  auto* reactor = NewInferCall<ReactorCall<InferCall>>(*std::move(hold), response_wire, arrival);
  RunInfer(reactor, const_cast<grpc::ByteBuffer*>(request_wire),
           ToAbslDeadline(context->deadline()));
  return reactor;
}

void KServeService::RunInfer(InferCall* call, grpc::ByteBuffer* request_wire,
                             absl::Time deadline) {
  absl::Status parsed = ParseRequest(request_wire, &call->request());
  if (!parsed.ok()) {
    call->Refuse("malformed", "", 0, parsed);
    return;
  }
  const inference::ModelInferRequest& req = call->request();
  // The parsed message's memory (protobuf's own estimate, walked once; a
  // pooled message counts the capacity it kept).
  const int64_t request_bytes = static_cast<int64_t>(req.SpaceUsedLong());
  call->request_bytes_ = request_bytes;
  if (!call->GrowOrRefuse(request_bytes, req.model_name(), 0)) return;
  absl::StatusOr<int64_t> version = ParseKServeVersion(req.model_version());
  if (!version.ok()) {
    call->Answer(req.model_name(), 0, version.status());
    return;
  }
  auto found = models_->Find(req.model_name(), *version, "");
  if (!found.ok()) {
    call->Answer(req.model_name(), 0, found.status());
    return;
  }
  call->served = *std::move(found);
  ServedVersion* served = call->served.get();
  absl::Status converted;
  {
    auto tables = engine::LiveTables::ValidationScope(served->live_tables());
    converted = ToEngineRequest(served->instance().model(), req, limits_, &call->view);
  }
  if (!converted.ok()) {
    call->Answer(served->name(), served->version(), converted);
    return;
  }
  const int32_t n = call->view.request.num_candidates;
  // The response's scores count too.
  if (!call->GrowOrRefuse(request_bytes + int64_t{4} * n, served->name(), served->version())) {
    return;
  }
  engine::QueuedRequest item;
  item.scores = PrepareKServeResponse(served->name(), served->version(), req.id(), n,
                                      call->view.raw, &call->response);
  item.request = std::move(call->view.request);
  item.deadline = deadline;
  SubmitAdmitted(call, std::move(item));
}

}  // namespace rankd::server
