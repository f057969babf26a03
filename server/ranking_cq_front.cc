#include "server/ranking_cq_front.h"

#include <pthread.h>

#include <memory>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "server/grpc_deadline.h"
#include "server/status_mapping.h"

namespace rankd::server {

// KServe v2 with ModelInfer on the queues (raw async) and the other
// methods, which answer at once, on the callback API, delegated to
// KServeService.
namespace kq = inference;
using KServeMixedBase = kq::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    kq::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        kq::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            kq::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                kq::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    kq::GRPCInferenceService::WithRawMethod_ModelInfer<
                        kq::GRPCInferenceService::Service>>>>>>;

class RankingCqFront::KServeOnQueues final : public KServeMixedBase {
 public:
  explicit KServeOnQueues(KServeService* impl) : impl_(impl) {}
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* c, const grpc::ByteBuffer* q,
                                       grpc::ByteBuffer* r) override {
    return impl_->ServerLive(c, q, r);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* c,
                                        const grpc::ByteBuffer* q, grpc::ByteBuffer* r) override {
    return impl_->ServerReady(c, q, r);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* c, const grpc::ByteBuffer* q,
                                       grpc::ByteBuffer* r) override {
    return impl_->ModelReady(c, q, r);
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* c,
                                           const grpc::ByteBuffer* q,
                                           grpc::ByteBuffer* r) override {
    return impl_->ServerMetadata(c, q, r);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* c,
                                          const grpc::ByteBuffer* q,
                                          grpc::ByteBuffer* r) override {
    return impl_->ModelMetadata(c, q, r);
  }

 private:
  KServeService* const impl_;
};

// A Score or ModelInfer call (`Base`) answered through its Rpc's writer.
template <typename Base>
class RankingCqFront::CqCall final : public Base {
 public:
  CqCall(RequestBudget::Hold hold, int64_t max_bytes, grpc::ByteBuffer* response_wire,
         Metrics* metrics, Metrics::Protocol protocol, absl::Time arrival, Rpc* rpc)
      : Base(std::move(hold), max_bytes, response_wire, metrics, protocol, arrival), rpc_(rpc) {}

 private:
  void Send(const grpc::Status& status) override;

  Rpc* const rpc_;
};

// One requested call, from its request to its deletion. Every event of it
// (tags below) is handled on its queue's thread; Finish may be called from
// any thread, once.
class RankingCqFront::Rpc {
 public:
  // Requests a call of `method` on `queue`.
  Rpc(RankingCqFront* front, grpc::ServerCompletionQueue* queue, Method method)
      : front_(front), queue_(queue), method_(method) {
    // Before the request: gRPC reports the call done (answered or
    // cancelled) on this tag.
    context_.AsyncNotifyWhenDone(&done_);
    switch (method) {
      case Method::kScore:
        front->async_service_.RequestScore(&context_, &request_, &writer_, queue, queue,
                                           &arrived_);
        return;
      case Method::kModelInfo:
        front->async_service_.RequestGetModelInfo(&context_, &request_, &writer_, queue, queue,
                                                  &arrived_);
        return;
      case Method::kModelInfer:
        front->kserve_service_->RequestModelInfer(&context_, &request_, &writer_, queue, queue,
                                                  &arrived_);
        return;
    }
  }

  // Handles the event a queue returned (`tag`, `ok` as Next gave them).
  static void Handle(void* tag, bool ok) {
    auto* t = static_cast<Tag*>(tag);
    switch (t->event) {
      case Event::kArrived:
        t->rpc->OnArrived(ok);
        return;
      case Event::kWritten:
        t->rpc->written_ = true;
        t->rpc->DeleteWhenFinished();
        return;
      case Event::kDone:
        t->rpc->OnDone();
        return;
    }
  }

  // Writes the answer: `status`, with the response message when OK.
  void Finish(const grpc::Status& status) {
    if (status.ok()) {
      writer_.Finish(response_, status, &written_tag_);
    } else {
      writer_.FinishWithError(status, &written_tag_);
    }
  }

 private:
  enum class Event { kArrived, kWritten, kDone };
  struct Tag {
    Rpc* rpc;
    Event event;
  };

  void OnArrived(bool ok) {
    if (!ok) {  // the server is shutting down: no call came, none will
      delete this;
      return;
    }
    front_->RequestAnother(queue_, method_);
    switch (method_) {
      case Method::kModelInfo:
        Finish(front_->service_->AnswerModelInfo(&request_, &response_));
        return;
      case Method::kScore: {
        RankingService* ranking = front_->service_;
        Admit(ranking, &RankingService::AdmitScore, &RankingService::RunScore,
              [&](RequestBudget::Hold hold, absl::Time arrival) {
                return ranking->NewScoreCall<CqCall<RankingService::ScoreCall>>(
                    std::move(hold), &response_, arrival, this);
              });
        return;
      }
      case Method::kModelInfer: {
        KServeService* kserve = front_->kserve_;
        Admit(kserve, &KServeService::AdmitInfer, &KServeService::RunInfer,
              [&](RequestBudget::Hold hold, absl::Time arrival) {
                return kserve->NewInferCall<CqCall<KServeService::InferCall>>(
                    std::move(hold), &response_, arrival, this);
              });
        return;
      }
    }
  }

  // Admits the arrived request with `admit`, makes its call with `make`
  // and runs it with `run` (on the parse threads when it is large); a
  // refusal is answered here.
  template <typename Service, typename Call, typename Make>
  void Admit(Service* service,
             absl::StatusOr<RequestBudget::Hold> (Service::*admit)(int64_t, absl::Time),
             void (Service::*run)(Call*, grpc::ByteBuffer*, absl::Time), Make make) {
    const absl::Time arrival = absl::Now();
    const int64_t wire_bytes = static_cast<int64_t>(request_.Length());
    absl::StatusOr<RequestBudget::Hold> hold = (service->*admit)(wire_bytes, arrival);
    if (!hold.ok()) {
      // Refused unread: its bytes go back to gRPC's memory quota now, not
      // when the call is deleted.
      request_.Clear();
      Finish(ToGrpcStatus(hold.status()));
      return;
    }
    Call* call = make(*std::move(hold), arrival);
    call_.reset(call);
    // The call may be answered (Finish) from here on, on any thread; it is
    // deleted only on this thread, after both of its tags came back (so not
    // before `run` answered it, wherever that runs).
    const absl::Time deadline = ToAbslDeadline(context_.deadline());
    if (wire_bytes <= front_->options_.inline_bytes) {
      (service->*run)(call, &request_, deadline);
      return;
    }
    front_->parse_threads_->Run([service, run, call, request = &request_, deadline] {
      (service->*run)(call, request, deadline);
    });
  }

  void OnDone() {
    done_seen_ = true;
    if (call_ != nullptr && context_.IsCancelled()) {
      call_->cancelled.store(true, std::memory_order_relaxed);
    }
    DeleteWhenFinished();
  }

  void DeleteWhenFinished() {
    if (written_ && done_seen_) delete this;
  }

  RankingCqFront* const front_;
  grpc::ServerCompletionQueue* const queue_;
  const Method method_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer_{&context_};
  Tag arrived_{this, Event::kArrived};
  Tag written_tag_{this, Event::kWritten};
  Tag done_{this, Event::kDone};
  bool written_ = false;
  bool done_seen_ = false;
  // The admitted Score or ModelInfer call; null for GetModelInfo and
  // refused calls.
  std::unique_ptr<AdmittedCall> call_;
};

template <typename Base>
void RankingCqFront::CqCall<Base>::Send(const grpc::Status& status) {
  rpc_->Finish(status);
}

absl::StatusOr<std::unique_ptr<RankingCqFront>> RankingCqFront::Create(
    RankingService* service, KServeService* kserve, const Options& options,
    grpc::ServerBuilder* builder) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RankingCqFront options: threads must be >= 1, got ", options.threads));
  }
  if (options.calls_ahead < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RankingCqFront options: calls_ahead must be >= 1, got ", options.calls_ahead));
  }
  if (options.inline_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RankingCqFront options: inline_bytes must be >= 0, got ", options.inline_bytes));
  }
  engine::CompletionExecutor::Options parse;
  parse.num_threads = options.threads;
  parse.thread_name = "rankd-rpc-parse";
  absl::StatusOr<std::unique_ptr<engine::CompletionExecutor>> parse_threads =
      engine::CompletionExecutor::Create(parse);
  if (!parse_threads.ok()) return parse_threads.status();
  return absl::WrapUnique(
      new RankingCqFront(service, kserve, options, *std::move(parse_threads), builder));
}

RankingCqFront::RankingCqFront(RankingService* service, KServeService* kserve,
                               const Options& options,
                               std::unique_ptr<engine::CompletionExecutor> parse_threads,
                               grpc::ServerBuilder* builder)
    : service_(service),
      kserve_(kserve),
      options_(options),
      parse_threads_(std::move(parse_threads)) {
  builder->RegisterService(&async_service_);
  if (kserve != nullptr) {
    kserve_service_ = std::make_unique<KServeOnQueues>(kserve);
    builder->RegisterService(kserve_service_.get());
  }
  for (int i = 0; i < options_.threads; ++i) queues_.push_back(builder->AddCompletionQueue());
}

void RankingCqFront::Start() {
  for (const auto& queue : queues_) {
    for (int i = 0; i < options_.calls_ahead; ++i) {
      new Rpc(this, queue.get(), Method::kScore);
      new Rpc(this, queue.get(), Method::kModelInfo);
      if (kserve_ != nullptr) new Rpc(this, queue.get(), Method::kModelInfer);
    }
  }
  for (const auto& queue : queues_) threads_.emplace_back(&RankingCqFront::Poll, this, queue.get());
}

void RankingCqFront::RequestAnother(grpc::ServerCompletionQueue* queue, Method method) {
  absl::ReaderMutexLock lock(&stop_mu_);
  // A queue that is shut down takes no request (gRPC aborts on one).
  if (!stopping_) new Rpc(this, queue, method);
}

void RankingCqFront::Poll(grpc::ServerCompletionQueue* queue) {
  pthread_setname_np(pthread_self(), "rankd-rpc");
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) Rpc::Handle(tag, ok);
}

RankingCqFront::~RankingCqFront() {
  // Parses still queued answer their calls, which needs the queues.
  parse_threads_->Shutdown();
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  for (const auto& queue : queues_) queue->Shutdown();
  for (std::thread& t : threads_) t.join();
  if (threads_.empty()) {  // never started: drain here
    void* tag = nullptr;
    bool ok = false;
    for (const auto& queue : queues_) {
      while (queue->Next(&tag, &ok)) Rpc::Handle(tag, ok);
    }
  }
}

}  // namespace rankd::server
