// rankd.v1.Ranking (Score, GetModelInfo) and KServe v2's ModelInfer served
// through gRPC's completion-queue API on threads of rankd's own, instead of
// the callback API (KServe's other methods, which answer at once, stay on
// the callback API). gRPC's performance guide says the callback API "is currently slower
// for truly high-QPS workloads": on gRPC 1.51 a callback call is received on
// gRPC's polling threads and its events pass through its executor, one more
// thread hop per event. Here each thread owns one completion queue and
// handles every event of the calls requested on it (arrival, the answer
// written, the call done) itself. The handlers are RankingService's and
// KServeService's, so admission, validation, routing, metrics and answers
// are the same bytes for bytes; docs/benchmarks.md ("The gRPC front") has
// what it changes.
//
// Each queue keeps Options::calls_ahead calls of each method requested:
// when one arrives its thread requests the next before it handles it.
// Score: AdmitScore, then RunScore (answers from the worker thread through
// ServerAsyncResponseWriter::Finish, which may be called from any thread);
// ModelInfer likewise (AdmitInfer, RunInfer). A request of more than
// Options::inline_bytes on the wire is parsed and validated on one of
// `threads` parse threads instead: every call of a connection arrives on the
// same queue, so parsing on the queue's thread would put a few connections'
// large requests on one thread, and a large message would hold up the other
// calls of its queue (their admission and refusals stay immediate this way;
// under a flood of large messages a refusal answered late may still be cut
// off by gRPC's memory quota).
// GetModelInfo is answered on the queue's thread. A call's cancellation
// (the client gave up, its deadline passed) is seen when gRPC reports the
// call done (ServerContext::AsyncNotifyWhenDone) and sets the call's
// `cancelled`, which the batcher polls.
//
// Ownership: borrows the services (they must outlive the front). Owns the
// queues, the threads and every requested call; a call is deleted by its
// queue's thread once its answer is written and gRPC reports it done, which
// returns its admission hold.
// Threading / lifecycle: create with the builder before BuildAndStart
// (it registers the service and adds the queues), Start once the server is
// built, and shut the server down (grpc::Server::Shutdown, or its
// destructor, which waits until every call is answered) before destroying
// the front, whose destructor shuts the queues down, drains them and joins
// the threads (gRPC's required order: an answer written after its queue is
// shut down aborts the process).
#ifndef RANKD_SERVER_RANKING_CQ_FRONT_H_
#define RANKD_SERVER_RANKING_CQ_FRONT_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/serving/completion_executor.h"
#include "grpcpp/server_builder.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/kserve_service.h"
#include "server/ranking_service.h"

namespace rankd::server {

class RankingCqFront {
 public:
  struct Options {
    // Threads, one completion queue each (>= 1). Each handles the arrivals
    // of its queue's calls, so this bounds how many requests are parsed,
    // validated and submitted at once.
    int threads = 4;
    // Calls of each method each queue keeps requested (>= 1): how many may
    // arrive on a queue at once before gRPC holds the next until its thread
    // requests another.
    int calls_ahead = 32;
    // Requests larger than this (wire bytes) are parsed on the parse
    // threads, smaller ones on the queue's thread (>= 0). A connection's
    // calls all arrive on one queue, so a few clients sending large requests
    // would otherwise load one thread with all their parsing.
    int64_t inline_bytes = 8 << 10;
  };

  // Registers both services with `builder` (KServe's with ModelInfer on
  // the queues; `kserve` may be null: KServe is then not served by it) and
  // adds the queues; INVALID_ARGUMENT naming the field for bad options (then
  // `builder` is untouched).
  static absl::StatusOr<std::unique_ptr<RankingCqFront>> Create(RankingService* service,
                                                                 KServeService* kserve,
                                                                 const Options& options,
                                                                 grpc::ServerBuilder* builder);
  ~RankingCqFront();
  RankingCqFront(const RankingCqFront&) = delete;
  RankingCqFront& operator=(const RankingCqFront&) = delete;

  // Requests the first calls and starts the threads; once, after the
  // builder's BuildAndStart succeeded.
  void Start();

 private:
  // The generated service with both methods taken over as raw async ones.
  using AsyncRanking = rankd::v1::Ranking::WithRawMethod_Score<
      rankd::v1::Ranking::WithRawMethod_GetModelInfo<rankd::v1::Ranking::Service>>;
  class KServeOnQueues;
  enum class Method { kScore, kModelInfo, kModelInfer };
  class Rpc;
  template <typename Base>
  class CqCall;

  RankingCqFront(RankingService* service, KServeService* kserve, const Options& options,
                 std::unique_ptr<engine::CompletionExecutor> parse_threads,
                 grpc::ServerBuilder* builder);

  // Keeps `queue` stocked: requests a call of `method` in place of one that
  // arrived, unless the queues are being shut down.
  void RequestAnother(grpc::ServerCompletionQueue* queue, Method method);
  void Poll(grpc::ServerCompletionQueue* queue);

  RankingService* const service_;
  KServeService* const kserve_;  // null: KServe is not on the queues
  const Options options_;
  // RunScore of large requests; shut down before the queues.
  std::unique_ptr<engine::CompletionExecutor> parse_threads_;
  AsyncRanking async_service_;
  std::unique_ptr<KServeOnQueues> kserve_service_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  // Set (writer side) before the queues are shut down; RequestAnother holds
  // the reader side, so no request reaches a queue that is shut down.
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_RANKING_CQ_FRONT_H_
