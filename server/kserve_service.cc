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

// One admitted ModelInfer RPC (admitted_call.h): the parsed request (the
// engine request views it) and the response the workers write the scores into.
class KServeService::InferCall : public AdmittedCall {
 public:
  using AdmittedCall::AdmittedCall;

  // The request and response live on this arena, which starts in a block
  // inside the call: their many small parts (a message, a shape and a
  // string per tensor) are not each a heap allocation made on a gRPC thread
  // and freed on another, which contends in malloc as threads multiply.
  static constexpr size_t kArenaBlock = 4096;
  alignas(16) char arena_block[kArenaBlock];
  google::protobuf::Arena arena{arena_block, kArenaBlock};
  inference::ModelInferRequest& request =
      *google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(&arena);
  inference::ModelInferResponse& response =
      *google::protobuf::Arena::CreateMessage<inference::ModelInferResponse>(&arena);
  KServeRequest view;
};

KServeService::KServeService(const ModelManager* models, Metrics* metrics, RequestBudget* budget,
                             Options options)
    : models_(models),
      metrics_(metrics),
      budget_(budget),
      limits_(options.limits),
      platform_(std::move(options.platform)) {}

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

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request_wire,
                                                    grpc::ByteBuffer* response_wire) {
  const absl::Time arrival = absl::Now();
  absl::StatusOr<RequestBudget::Hold> hold =
      AdmitWireBytes(budget_, metrics_, Metrics::Protocol::kKServe,
                     static_cast<int64_t>(request_wire->Length()), arrival);
  if (!hold.ok()) return FinishRefused(context, hold.status());
  auto* reactor = new ReactorCall<InferCall>(*std::move(hold), budget_->max_bytes(), response_wire,
                                   metrics_, Metrics::Protocol::kKServe, arrival);
  absl::Status parsed =
      ParseRequest(const_cast<grpc::ByteBuffer*>(request_wire), &reactor->request);
  if (!parsed.ok()) {
    reactor->Refuse("malformed", "", 0, parsed);
    return reactor;
  }
  const inference::ModelInferRequest& req = reactor->request;
  // The parsed message's memory (protobuf's own estimate, walked once).
  const int64_t request_bytes = static_cast<int64_t>(req.SpaceUsedLong());
  if (!reactor->GrowOrRefuse(request_bytes, req.model_name(), 0)) return reactor;
  absl::StatusOr<int64_t> version = ParseKServeVersion(req.model_version());
  if (!version.ok()) {
    reactor->Answer(req.model_name(), 0, version.status());
    return reactor;
  }
  auto found = models_->Find(req.model_name(), *version, "");
  if (!found.ok()) {
    reactor->Answer(req.model_name(), 0, found.status());
    return reactor;
  }
  reactor->served = *std::move(found);
  ServedVersion* served = reactor->served.get();
  absl::Status converted;
  {
    // Validation looks keys up in dynamic tables (id_policy ERROR): not while
    // an update rewrites their hash slots.
    engine::LiveTables* live = served->live_tables();
    engine::LiveTables::BatchScope tables(
        live != nullptr && live->validation_reads_tables() ? live : nullptr);
    converted = ToEngineRequest(served->instance().model(), req, limits_, &reactor->view);
  }
  if (!converted.ok()) {
    reactor->Answer(served->name(), served->version(), converted);
    return reactor;
  }
  const int32_t n = reactor->view.request.num_candidates;
  // The response's scores count too.
  if (!reactor->GrowOrRefuse(request_bytes + int64_t{4} * n, served->name(),
                             served->version())) {
    return reactor;
  }
  engine::QueuedRequest item;
  item.scores = PrepareKServeResponse(served->name(), served->version(), req.id(), n,
                                      reactor->view.raw, &reactor->response);
  item.request = std::move(reactor->view.request);
  item.deadline = ToAbslDeadline(context->deadline());
  SubmitAdmitted(reactor, std::move(item));
  return reactor;
}

}  // namespace rankd::server
