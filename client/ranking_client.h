// C++ client of the rankd gRPC API (rankd.v1.Ranking and grpc.health.v1.Health;
// and ModelInfer of the KServe v2 protocol, inference.GRPCInferenceService,
// served on the same port).
//
// One RankingClient owns one gRPC channel; it is thread-safe and meant to be
// shared by all threads of a process (gRPC multiplexes calls over the
// channel's HTTP/2 connection). Errors come back as absl::Status with the
// server's canonical code and message unchanged (client/status_conversion.h).
//
//   rankd::client::RankingClient::Options options;
//   options.target = "rankd.prod:8500";
//   auto client = rankd::client::RankingClient::Create(options);
//   if (!client.ok()) return client.status();
//   absl::StatusOr<rankd::v1::ScoreResponse> scores = (*client)->Score(request);
#ifndef RANKD_CLIENT_RANKING_CLIENT_H_
#define RANKD_CLIENT_RANKING_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/call_options.h"
#include "client/serialized_request.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/security/credentials.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "rankd/v1/ranking.grpc.pb.h"

namespace rankd::client {

using ServingStatus = ::grpc::health::v1::HealthCheckResponse::ServingStatus;

// "SERVING", "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN".
std::string ServingStatusName(ServingStatus status);

class RankingClient {
 public:
  struct Options {
    // gRPC target: "host:port", "dns:///host:port", "unix:///path", ...
    std::string target = "localhost:8500";
    // Deadline of every call that does not set CallOptions::deadline. rankd
    // ranks at a latency SLO: a call that waits longer than this is better
    // failed (DEADLINE_EXCEEDED) than answered late.
    int64_t deadline_ms = 1000;
    // Largest message sent or received. A ScoreRequest of a few thousand
    // candidates with many sparse ids runs to megabytes; gRPC's own receive
    // default (4 MiB) is too small for those.
    int64_t max_message_bytes = 64 << 20;
    // 0: Create() returns at once and the channel connects on the first call
    // (a server that is down fails that call with UNAVAILABLE). > 0: Create()
    // waits up to this long for a connection and returns UNAVAILABLE without
    // one, so a misconfigured target fails at start-up, not on the first call.
    int64_t connect_timeout_ms = 0;
    // > 0: send HTTP/2 keepalive pings after this long without activity, so a
    // dead connection (a peer or middlebox that vanished) is noticed before the
    // next call hits it. The server must permit pings this often (gRPC servers
    // by default answer pings more often than every 5 min with GOAWAY).
    int64_t keepalive_time_ms = 0;
    // How long to wait for a keepalive ping's ack before closing the connection.
    int64_t keepalive_timeout_ms = 20000;
    // Keepalive pings also while no call is in flight.
    bool keepalive_permit_without_calls = false;
    // gRPC load-balancing policy: "" = gRPC's default (pick_first);
    // "round_robin" spreads calls over every address a DNS name resolves to.
    std::string load_balancing_policy;
    // true: this client opens its own connection(s) rather than sharing them
    // with every other channel of the process to the same target (gRPC's global
    // subchannel pool). A load generator needs this to spread load over N
    // connections (N clients).
    bool dedicated_connection = false;
    // Channel credentials; null = plaintext (insecure), rankd's default
    // (client/tls.h makes TLS / mTLS ones from PEM files).
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // Sent as "authorization: Bearer <token>" on every call; "" = none.
    std::string bearer_token;
    // Further gRPC channel args (GRPC_ARG_* names), applied after the above.
    std::map<std::string, int> int_channel_args;
    std::map<std::string, std::string> string_channel_args;
    // How async calls (ScoreAsync, GetModelInfoAsync, InferAsync) are run.
    // 0 (default): gRPC's callback API; their callbacks run on gRPC's threads.
    // N in [1, 64]: N threads of this client's own, each polling one gRPC
    // completion queue (calls spread over them in turn), read the answers and
    // run the callbacks themselves: no hand-off from the thread that read an
    // answer to the one that runs its callback. That shortened round trips
    // where each callback starts the next call (a chain of calls, one at a
    // time), and saves a little CPU; calls started now and then from other
    // threads found the queue's thread asleep and came back later, and under
    // heavy load it served no more calls than the callback API
    // (docs/client.md). The threads, named "rankd-client", live as long as
    // the client.
    int async_threads = 0;
  };

  using CallOptions = ::rankd::client::CallOptions;

  // Validates `options` (INVALID_ARGUMENT naming the field) and creates the
  // channel; see Options::connect_timeout_ms for when it connects.
  static absl::StatusOr<std::unique_ptr<RankingClient>> Create(const Options& options);

  // Cancels async calls still in flight and waits for their callbacks (which
  // see CANCELLED) to return. Must not run inside one of those callbacks.
  ~RankingClient();

  RankingClient(const RankingClient&) = delete;
  RankingClient& operator=(const RankingClient&) = delete;

  // Scores one request (blocking).
  absl::StatusOr<rankd::v1::ScoreResponse> Score(const rankd::v1::ScoreRequest& request,
                                                 const CallOptions& call = {}) const;

  // Describes a served model; version 0 = its newest ready version.
  absl::StatusOr<rankd::v1::ModelInfo> GetModelInfo(absl::string_view model, int64_t version = 0,
                                                    const CallOptions& call = {}) const;
  // Same, from a whole request (e.g. one naming a version_label).
  absl::StatusOr<rankd::v1::ModelInfo> GetModelInfo(const rankd::v1::GetModelInfoRequest& request,
                                                    const CallOptions& call = {}) const;

  // grpc.health.v1.Health/Check. `service` "" = the server as a whole; a model
  // name = that model. A service the server does not know (NOT_FOUND in the
  // health protocol) is answered as SERVICE_UNKNOWN rather than as an error,
  // since it is a definite answer about that service; transport and other
  // failures are errors.
  absl::StatusOr<ServingStatus> Health(absl::string_view service = "",
                                       const CallOptions& call = {}) const;

  // Called once per async call, on a gRPC thread (or one of the client's
  // Options::async_threads): keep it short and never block on another call's
  // completion there.
  using ScoreCallback = std::function<void(absl::StatusOr<rankd::v1::ScoreResponse>)>;

  // Starts Score without blocking (gRPC's callback API, or the client's
  // completion queues: Options::async_threads); `done` runs when it ends (at
  // once, on this thread, with INVALID_ARGUMENT for a null request).
  // The shared_ptr keeps the request alive for the call without a copy, so a
  // load generator can send one prepared request many times.
  void ScoreAsync(std::shared_ptr<const rankd::v1::ScoreRequest> request, ScoreCallback done,
                  const CallOptions& call = {});
  // Same; copies `request`.
  void ScoreAsync(const rankd::v1::ScoreRequest& request, ScoreCallback done,
                  const CallOptions& call = {});
  // Same, sending bytes serialized once (client/serialized_request.h): no
  // serialization on the call, the cheapest way to send one prepared request
  // many times.
  void ScoreAsync(std::shared_ptr<const SerializedScoreRequest> request, ScoreCallback done,
                  const CallOptions& call = {});

  using ModelInfoCallback = std::function<void(absl::StatusOr<rankd::v1::ModelInfo>)>;

  // GetModelInfo without blocking, as ScoreAsync (same deadline, token,
  // tracking and callback rules).
  void GetModelInfoAsync(std::shared_ptr<const rankd::v1::GetModelInfoRequest> request,
                         ModelInfoCallback done, const CallOptions& call = {});

  using InferCallback = std::function<void(absl::StatusOr<inference::ModelInferResponse>)>;

  // KServe v2 ModelInfer without blocking, as ScoreAsync (same deadline,
  // token, tracking and callback rules). client/kserve_request.h makes the
  // request from a ScoreRequest.
  void InferAsync(std::shared_ptr<const inference::ModelInferRequest> request, InferCallback done,
                  const CallOptions& call = {});
  // Same, sending bytes serialized once (as the ScoreAsync overload).
  void InferAsync(std::shared_ptr<const SerializedInferRequest> request, InferCallback done,
                  const CallOptions& call = {});

  // Async calls started and not yet finished.
  int64_t in_flight() const;

  const Options& options() const { return options_; }
  // The underlying channel (connectivity state, custom stubs).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  // A stub of calls that send bytes as they are and parse a typed answer.
  template <typename Response>
  using BytesStub = grpc::TemplatedGenericStub<grpc::ByteBuffer, Response>;

  RankingClient(const Options& options, std::shared_ptr<grpc::Channel> channel);

  // Applies `call` (or Options::deadline_ms) to `context`.
  void Prepare(const CallOptions& call, grpc::ClientContext* context) const;

  // Starts one async call of `method` ("/package.Service/Method") sending
  // `request`'s bytes through `stub`, as StartAsync.
  template <typename Request, typename Response>
  void StartSerialized(BytesStub<Response>* stub, const std::string* method,
                       std::shared_ptr<const SerializedRequest<Request>> request,
                       std::function<void(absl::StatusOr<Response>)> done, const CallOptions& call);

  // Starts one async call through `start(context, request, response,
  // on_done)`, tracked until its completion has run `done`.
  template <typename Request, typename Response, typename Starter>
  void StartAsync(std::shared_ptr<const Request> request,
                  std::function<void(absl::StatusOr<Response>)> done, const CallOptions& call,
                  Starter start);

  const Options options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<rankd::v1::Ranking::Stub> ranking_;
  const std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  const std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
  // Calls that send a request already serialized (as is) and parse a typed
  // answer: Score and ModelInfer.
  const std::unique_ptr<BytesStub<rankd::v1::ScoreResponse>> score_bytes_;
  const std::unique_ptr<BytesStub<inference::ModelInferResponse>> infer_bytes_;

  // Options::async_threads > 0: one completion queue per polling thread
  // (empty otherwise). The destructor shuts them down once no call is left
  // in flight, then joins the threads.
  grpc::CompletionQueue* NextQueue();
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<std::thread> pollers_;
  std::atomic<uint64_t> next_queue_{0};

  // Contexts of async calls in flight (the destructor cancels them); shared
  // with their completions, which may outlive the client by a few instructions.
  struct Tracker;
  const std::shared_ptr<Tracker> tracker_;
};

}  // namespace rankd::client

#endif  // RANKD_CLIENT_RANKING_CLIENT_H_
