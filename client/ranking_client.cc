#include "client/ranking_client.h"

#include <pthread.h>

#include <climits>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/connect.h"
#include "client/option_checks.h"
#include "client/status_conversion.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace rankd::client {

// Async calls in flight, by id. Shared with every call's completion so that
// the client's destructor may return (and free its members) while the last
// completion is still unlocking `mu`. A completion destroys its call (and so
// the ClientContext, which holds the channel) before it removes its entry: once
// the destructor sees no entry, no gRPC object of this client is left on a
// completion thread, and the channel's last reference, with gRPC's library
// shutdown when nothing else uses gRPC, goes on the destructor's thread. (Were
// it left to a completion thread, gRPC shuts down on a detached thread of its
// own, which a process that exits right after the client's destruction kills
// mid-way: SIGABRT.) The destructor holds the contexts weakly and cancels the
// ones still alive outside the lock: a cancellation may run the call's
// completion inline, and that takes the lock.
struct RankingClient::Tracker {
  absl::Mutex mu;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  std::map<uint64_t, std::weak_ptr<grpc::ClientContext>> contexts ABSL_GUARDED_BY(mu);
};

namespace {

absl::Status Validate(const RankingClient::Options& o) {
  if (o.target.empty()) return absl::InvalidArgumentError("target: must not be empty");
  // gRPC takes message limits and keepalive times as int.
  return FirstError({
      CheckAbove("deadline_ms", o.deadline_ms, 0),
      CheckInRange("max_message_bytes", o.max_message_bytes, 1, INT_MAX),
      CheckAtLeast("connect_timeout_ms", o.connect_timeout_ms, 0),
      CheckInRange("keepalive_time_ms", o.keepalive_time_ms, 0, INT_MAX),
      CheckInRange("keepalive_timeout_ms", o.keepalive_timeout_ms, 1, INT_MAX),
      CheckInRange("async_threads", o.async_threads, 0, 64),
  });
}

grpc::ChannelArguments ChannelArgs(const RankingClient::Options& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  if (o.keepalive_time_ms > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(o.keepalive_time_ms));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(o.keepalive_timeout_ms));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, o.keepalive_permit_without_calls ? 1 : 0);
    // Otherwise the client stops pinging after 2 pings without data and an
    // idle connection is no longer checked.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (!o.load_balancing_policy.empty()) args.SetLoadBalancingPolicyName(o.load_balancing_policy);
  if (o.dedicated_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  for (const auto& [key, value] : o.int_channel_args) args.SetInt(key, value);
  for (const auto& [key, value] : o.string_channel_args) args.SetString(key, value);
  return args;
}

// One async call on a completion queue (Options::async_threads): its reader
// and final status until a polling thread takes its tag from the queue.
class QueuedCall {
 public:
  virtual ~QueuedCall() = default;
  // Runs the call's completion and deletes the call. `ok` is false only for
  // a call the queue could not finish (its status then says so).
  virtual void Complete(bool ok) = 0;
};

template <typename Response>
class QueuedUnary final : public QueuedCall {
 public:
  explicit QueuedUnary(std::function<void(grpc::Status)> on_done) : on_done_(std::move(on_done)) {}

  // Starts the call; its completion may run (and delete this) on a polling
  // thread before Start returns, so nothing here follows Finish.
  void Start(std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> rpc, Response* response) {
    rpc_ = std::move(rpc);
    rpc_->StartCall();
    rpc_->Finish(response, &status_, this);
  }

  void Complete(bool ok) override {
    const grpc::Status status =
        ok ? status_ : grpc::Status(grpc::StatusCode::UNKNOWN, "completion queue: call not finished");
    // The reader lives in the call's arena, which the context (freed by
    // on_done) owns: it goes first.
    rpc_.reset();
    std::function<void(grpc::Status)> on_done = std::move(on_done_);
    delete this;
    on_done(status);
  }

 private:
  std::function<void(grpc::Status)> on_done_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> rpc_;
  grpc::Status status_;
};

template <typename Response>
void StartQueued(std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> rpc,
                 Response* response, std::function<void(grpc::Status)> on_done) {
  (new QueuedUnary<Response>(std::move(on_done)))->Start(std::move(rpc), response);
}

// A polling thread: completes every call of `queue` until it is shut down
// and drained.
void Poll(grpc::CompletionQueue* queue) {
  pthread_setname_np(pthread_self(), "rankd-client");
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) static_cast<QueuedCall*>(tag)->Complete(ok);
}

}  // namespace

std::string ServingStatusName(ServingStatus status) {
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(status);
}

absl::StatusOr<std::unique_ptr<RankingClient>> RankingClient::Create(const Options& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenChannel(
      options.target, options.credentials, ChannelArgs(options), options.connect_timeout_ms);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<RankingClient>(new RankingClient(options, *std::move(channel)));
}

RankingClient::RankingClient(const Options& options, std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      ranking_(rankd::v1::Ranking::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)),
      kserve_(inference::GRPCInferenceService::NewStub(channel_)),
      score_bytes_(std::make_unique<BytesStub<rankd::v1::ScoreResponse>>(channel_)),
      infer_bytes_(std::make_unique<BytesStub<inference::ModelInferResponse>>(channel_)),
      tracker_(std::make_shared<Tracker>()) {
  for (int i = 0; i < options_.async_threads; ++i) {
    queues_.push_back(std::make_unique<grpc::CompletionQueue>());
    pollers_.emplace_back(Poll, queues_.back().get());
  }
}

RankingClient::~RankingClient() {
  std::vector<std::shared_ptr<grpc::ClientContext>> contexts;
  {
    absl::MutexLock lock(&tracker_->mu);
    for (const auto& entry : tracker_->contexts) {
      if (auto context = entry.second.lock()) contexts.push_back(std::move(context));
    }
  }
  // A context whose call already ended ignores the cancel.
  for (const auto& context : contexts) context->TryCancel();
  contexts.clear();
  absl::MutexLock lock(&tracker_->mu);
  tracker_->mu.Await(absl::Condition(
      +[](std::map<uint64_t, std::weak_ptr<grpc::ClientContext>>* contexts) {
        return contexts->empty();
      },
      &tracker_->contexts));
  // No call is left on the queues: they drain at once.
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& poller : pollers_) poller.join();
}

grpc::CompletionQueue* RankingClient::NextQueue() {
  return queues_[next_queue_.fetch_add(1, std::memory_order_relaxed) % queues_.size()].get();
}

void RankingClient::Prepare(const CallOptions& call, grpc::ClientContext* context) const {
  ApplyCallOptions(call, absl::Milliseconds(options_.deadline_ms), context, options_.bearer_token);
}

absl::StatusOr<rankd::v1::ScoreResponse> RankingClient::Score(
    const rankd::v1::ScoreRequest& request, const CallOptions& call) const {
  grpc::ClientContext context;
  Prepare(call, &context);
  return CallUnary(*ranking_, &rankd::v1::Ranking::Stub::Score, &context, request);
}

absl::StatusOr<rankd::v1::ModelInfo> RankingClient::GetModelInfo(absl::string_view model,
                                                                 int64_t version,
                                                                 const CallOptions& call) const {
  rankd::v1::GetModelInfoRequest request;
  request.set_model(std::string(model));
  request.set_version(version);
  return GetModelInfo(request, call);
}

absl::StatusOr<rankd::v1::ModelInfo> RankingClient::GetModelInfo(
    const rankd::v1::GetModelInfoRequest& request, const CallOptions& call) const {
  grpc::ClientContext context;
  Prepare(call, &context);
  return CallUnary(*ranking_, &rankd::v1::Ranking::Stub::GetModelInfo, &context, request);
}

absl::StatusOr<ServingStatus> RankingClient::Health(absl::string_view service,
                                                    const CallOptions& call) const {
  grpc::ClientContext context;
  Prepare(call, &context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN;
  }
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status();
}

void RankingClient::ScoreAsync(const rankd::v1::ScoreRequest& request, ScoreCallback done,
                               const CallOptions& call) {
  ScoreAsync(std::make_shared<const rankd::v1::ScoreRequest>(request), std::move(done), call);
}

template <typename Request, typename Response, typename Starter>
void RankingClient::StartAsync(std::shared_ptr<const Request> request,
                               std::function<void(absl::StatusOr<Response>)> done,
                               const CallOptions& call, Starter start) {
  if (request == nullptr) {
    done(absl::InvalidArgumentError("request: null"));
    return;
  }
  // Everything the call needs until its completion, which frees it.
  struct Call {
    std::shared_ptr<grpc::ClientContext> context = std::make_shared<grpc::ClientContext>();
    std::shared_ptr<const Request> request;
    Response response;
    std::function<void(absl::StatusOr<Response>)> done;
    std::shared_ptr<Tracker> tracker;
  };
  auto* c = new Call;
  c->request = std::move(request);
  c->done = std::move(done);
  c->tracker = tracker_;
  Prepare(call, c->context.get());
  uint64_t id = 0;
  {
    // Registered before the call starts, and the lock released: gRPC may run
    // the completion inline.
    absl::MutexLock lock(&tracker_->mu);
    id = tracker_->next_id++;
    tracker_->contexts.emplace(id, c->context);
  }
  start(c->context.get(), c->request.get(), &c->response, [c, id](grpc::Status status) {
    std::unique_ptr<Call> owned(c);
    if (status.ok()) {
      owned->done(std::move(owned->response));
    } else {
      owned->done(FromGrpcStatus(status));
    }
    // The call (context, channel reference, user callback) goes first; only
    // then may the client's destructor return (see Tracker).
    const std::shared_ptr<Tracker> tracker = owned->tracker;
    owned.reset();
    absl::MutexLock lock(&tracker->mu);
    tracker->contexts.erase(id);
  });
}

void RankingClient::ScoreAsync(std::shared_ptr<const rankd::v1::ScoreRequest> request,
                               ScoreCallback done, const CallOptions& call) {
  StartAsync<rankd::v1::ScoreRequest, rankd::v1::ScoreResponse>(
      std::move(request), std::move(done), call,
      [this](grpc::ClientContext* context, const rankd::v1::ScoreRequest* req,
             rankd::v1::ScoreResponse* resp, std::function<void(grpc::Status)> on_done) {
        if (queues_.empty()) {
          ranking_->async()->Score(context, req, resp, std::move(on_done));
        } else {
          StartQueued(ranking_->PrepareAsyncScore(context, *req, NextQueue()), resp,
                      std::move(on_done));
        }
      });
}

template <typename Request, typename Response>
void RankingClient::StartSerialized(BytesStub<Response>* stub, const std::string* method,
                                    std::shared_ptr<const SerializedRequest<Request>> request,
                                    std::function<void(absl::StatusOr<Response>)> done,
                                    const CallOptions& call) {
  StartAsync<SerializedRequest<Request>, Response>(
      std::move(request), std::move(done), call,
      [this, stub, method](grpc::ClientContext* context, const SerializedRequest<Request>* req,
                           Response* resp, std::function<void(grpc::Status)> on_done) {
        if (queues_.empty()) {
          stub->UnaryCall(context, *method, grpc::StubOptions(), &req->bytes(), resp,
                          std::move(on_done));
        } else {
          StartQueued(stub->PrepareUnaryCall(context, *method, req->bytes(), NextQueue()), resp,
                      std::move(on_done));
        }
      });
}

void RankingClient::ScoreAsync(std::shared_ptr<const SerializedScoreRequest> request,
                               ScoreCallback done, const CallOptions& call) {
  // The method's full name, as the generated stub sends it.
  static const std::string* const kMethod =
      new std::string(absl::StrCat("/", rankd::v1::Ranking::service_full_name(), "/Score"));
  StartSerialized(score_bytes_.get(), kMethod, std::move(request), std::move(done), call);
}

void RankingClient::GetModelInfoAsync(
    std::shared_ptr<const rankd::v1::GetModelInfoRequest> request, ModelInfoCallback done,
    const CallOptions& call) {
  StartAsync<rankd::v1::GetModelInfoRequest, rankd::v1::ModelInfo>(
      std::move(request), std::move(done), call,
      [this](grpc::ClientContext* context, const rankd::v1::GetModelInfoRequest* req,
             rankd::v1::ModelInfo* resp, std::function<void(grpc::Status)> on_done) {
        if (queues_.empty()) {
          ranking_->async()->GetModelInfo(context, req, resp, std::move(on_done));
        } else {
          StartQueued(ranking_->PrepareAsyncGetModelInfo(context, *req, NextQueue()), resp,
                      std::move(on_done));
        }
      });
}

void RankingClient::InferAsync(std::shared_ptr<const inference::ModelInferRequest> request,
                               InferCallback done, const CallOptions& call) {
  StartAsync<inference::ModelInferRequest, inference::ModelInferResponse>(
      std::move(request), std::move(done), call,
      [this](grpc::ClientContext* context, const inference::ModelInferRequest* req,
             inference::ModelInferResponse* resp, std::function<void(grpc::Status)> on_done) {
        if (queues_.empty()) {
          kserve_->async()->ModelInfer(context, req, resp, std::move(on_done));
        } else {
          StartQueued(kserve_->PrepareAsyncModelInfer(context, *req, NextQueue()), resp,
                      std::move(on_done));
        }
      });
}

void RankingClient::InferAsync(std::shared_ptr<const SerializedInferRequest> request,
                               InferCallback done, const CallOptions& call) {
  static const std::string* const kMethod = new std::string(
      absl::StrCat("/", inference::GRPCInferenceService::service_full_name(), "/ModelInfer"));
  StartSerialized(infer_bytes_.get(), kMethod, std::move(request), std::move(done), call);
}

int64_t RankingClient::in_flight() const {
  absl::MutexLock lock(&tracker_->mu);
  return static_cast<int64_t>(tracker_->contexts.size());
}

}  // namespace rankd::client
