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

// A Score call answered through its Rpc's writer.
class RankingCqFront::CqScoreCall final : public RankingService::ScoreCall {
 public:
  CqScoreCall(RequestBudget::Hold hold, int64_t max_bytes, grpc::ByteBuffer* response_wire,
              Metrics* metrics, Metrics::Protocol protocol, absl::Time arrival, Rpc* rpc)
      : ScoreCall(std::move(hold), max_bytes, response_wire, metrics, protocol, arrival),
        rpc_(rpc) {}

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
    if (method == Method::kScore) {
      front->async_service_.RequestScore(&context_, &request_, &writer_, queue, queue, &arrived_);
    } else {
      front->async_service_.RequestGetModelInfo(&context_, &request_, &writer_, queue, queue,
                                                &arrived_);
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
    if (method_ == Method::kModelInfo) {
      Finish(front_->service_->AnswerModelInfo(&request_, &response_));
      return;
    }
    const absl::Time arrival = absl::Now();
    RankingService* service = front_->service_;
    absl::StatusOr<RequestBudget::Hold> hold =
        service->AdmitScore(static_cast<int64_t>(request_.Length()), arrival);
    if (!hold.ok()) {
      // Refused unread: its bytes go back to gRPC's memory quota now, not
      // when the call is deleted.
      request_.Clear();
      Finish(ToGrpcStatus(hold.status()));
      return;
    }
    call_.reset(service->NewScoreCall<CqScoreCall>(*std::move(hold), &response_, arrival, this));
    // The call may be answered (Finish) from here on, on any thread; it is
    // deleted only on this thread, after both of its tags came back (so not
    // before RunScore answered it, wherever that runs).
    const absl::Time deadline = ToAbslDeadline(context_.deadline());
    if (static_cast<int64_t>(request_.Length()) <= front_->options_.inline_bytes) {
      service->RunScore(call_.get(), &request_, deadline);
      return;
    }
    front_->parse_threads_->Run([service, call = call_.get(), request = &request_, deadline] {
      service->RunScore(call, request, deadline);
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
  // The admitted Score call (after AdmitScore); null for GetModelInfo and
  // refused calls.
  std::unique_ptr<RankingService::ScoreCall> call_;
};

void RankingCqFront::CqScoreCall::Send(const grpc::Status& status) { rpc_->Finish(status); }

absl::StatusOr<std::unique_ptr<RankingCqFront>> RankingCqFront::Create(
    RankingService* service, const Options& options, grpc::ServerBuilder* builder) {
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
      new RankingCqFront(service, options, *std::move(parse_threads), builder));
}

RankingCqFront::RankingCqFront(RankingService* service, const Options& options,
                               std::unique_ptr<engine::CompletionExecutor> parse_threads,
                               grpc::ServerBuilder* builder)
    : service_(service), options_(options), parse_threads_(std::move(parse_threads)) {
  builder->RegisterService(&async_service_);
  for (int i = 0; i < options_.threads; ++i) queues_.push_back(builder->AddCompletionQueue());
}

void RankingCqFront::Start() {
  for (const auto& queue : queues_) {
    for (int i = 0; i < options_.calls_ahead; ++i) {
      new Rpc(this, queue.get(), Method::kScore);
      new Rpc(this, queue.get(), Method::kModelInfo);
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
