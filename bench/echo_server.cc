// echo_server: rankd.v1.Ranking with no model behind it, the ceiling of
// what gRPC lets a server do on a machine. Score is parsed and answered at
// once with num_candidates zeros (GetModelInfo with a name), on the same
// raw-message path as rankd, through either gRPC API rankd can use:
//   --mode callback  the callback API (rankd serve --rpc_threads -1);
//   --mode async     the completion-queue API, --threads threads, each
//                    queue polled by --threads_per_queue of them (1: rankd's
//                    RankingCqFront without its engine).
// Driven by serve_bench like rankd (docs/benchmarks.md, "The gRPC front"),
// it tells how much of a served request's cost is gRPC's alone. Serves for
// --seconds, then exits.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "grpcpp/grpcpp.h"
#include "rankd/v1/ranking.grpc.pb.h"
#include "server/raw_messages.h"
#include "server/status_mapping.h"

ABSL_FLAG(std::string, mode, "callback", "callback | async");
ABSL_FLAG(int, port, 8500, "port on 127.0.0.1");
ABSL_FLAG(int, threads, 4, "async: polling threads");
ABSL_FLAG(int, threads_per_queue, 1, "async: threads polling each completion queue");
ABSL_FLAG(int, prepost, 64, "async: calls requested ahead per CQ per method");
ABSL_FLAG(double, seconds, 30, "serve this long");

namespace {

using rankd::server::ParseRequest;
using rankd::server::SerializeResponse;
using rankd::server::ToGrpcStatus;

grpc::Status Answer(grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  rankd::v1::ScoreRequest r;
  if (absl::Status s = ParseRequest(req, &r); !s.ok()) return ToGrpcStatus(s);
  rankd::v1::ScoreResponse out;
  out.mutable_scores()->Resize(std::max(0, r.num_candidates()), 0.0f);
  out.set_model(r.model());
  out.set_version(1);
  return ToGrpcStatus(SerializeResponse(out, resp));
}

grpc::Status Info(grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  rankd::v1::GetModelInfoRequest r;
  if (absl::Status s = ParseRequest(req, &r); !s.ok()) return ToGrpcStatus(s);
  rankd::v1::ModelInfo info;
  info.set_name(r.model());
  info.set_version(1);
  info.set_backend("echo");
  return ToGrpcStatus(SerializeResponse(info, resp));
}

class CallbackRanking final
    : public rankd::v1::Ranking::WithRawCallbackMethod_Score<
          rankd::v1::Ranking::WithRawCallbackMethod_GetModelInfo<rankd::v1::Ranking::Service>> {
 public:
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* c, const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override {
    auto* r = c->DefaultReactor();
    r->Finish(Answer(const_cast<grpc::ByteBuffer*>(req), resp));
    return r;
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* c,
                                         const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override {
    auto* r = c->DefaultReactor();
    r->Finish(Info(const_cast<grpc::ByteBuffer*>(req), resp));
    return r;
  }
};

using AsyncRanking = rankd::v1::Ranking::WithRawMethod_Score<
    rankd::v1::Ranking::WithRawMethod_GetModelInfo<rankd::v1::Ranking::Service>>;

// One requested call of the async mode, deleted once its answer is written.
struct Call {
  bool score;
  bool finishing = false;
  grpc::ServerContext ctx;
  grpc::ByteBuffer req, resp;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer{&ctx};
};

void Request(AsyncRanking* s, grpc::ServerCompletionQueue* cq, bool score) {
  auto* c = new Call{score};
  if (score) {
    s->RequestScore(&c->ctx, &c->req, &c->writer, cq, cq, c);
  } else {
    s->RequestGetModelInfo(&c->ctx, &c->req, &c->writer, cq, cq, c);
  }
}

void Prepost(AsyncRanking* s, grpc::ServerCompletionQueue* cq, int prepost) {
  for (int i = 0; i < prepost; ++i) {
    Request(s, cq, true);
    Request(s, cq, false);
  }
}

// A call's events come one after the other (the answer is written only
// after its arrival was handled), so threads sharing a queue need no lock.
void Poll(AsyncRanking* s, grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
    auto* c = static_cast<Call*>(tag);
    if (c->finishing || !ok) {
      delete c;
      continue;
    }
    Request(s, cq, c->score);
    c->finishing = true;
    grpc::Status st = c->score ? Answer(&c->req, &c->resp) : Info(&c->req, &c->resp);
    c->writer.Finish(c->resp, st, c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "callback" && mode != "async") {
    std::fprintf(stderr, "echo_server: --mode must be callback or async, got %s\n", mode.c_str());
    return 2;
  }
  const int threads_per_queue = absl::GetFlag(FLAGS_threads_per_queue);
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_prepost) < 1 ||
      threads_per_queue < 1) {
    std::fprintf(stderr, "echo_server: --threads, --threads_per_queue, --prepost must be >= 1\n");
    return 2;
  }
  const int queues = std::max(1, absl::GetFlag(FLAGS_threads) / threads_per_queue);
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:" + std::to_string(absl::GetFlag(FLAGS_port)),
                     grpc::InsecureServerCredentials());
  CallbackRanking cb;
  AsyncRanking as;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  if (mode == "callback") {
    b.RegisterService(&cb);
  } else {
    b.RegisterService(&as);
    for (int i = 0; i < queues; ++i) cqs.push_back(b.AddCompletionQueue());
  }
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "echo_server: cannot listen on port %d\n", absl::GetFlag(FLAGS_port));
    return 1;
  }
  std::vector<std::thread> threads;
  for (auto& cq : cqs) Prepost(&as, cq.get(), absl::GetFlag(FLAGS_prepost));
  for (int t = 0; t < static_cast<int>(cqs.size()) * threads_per_queue; ++t) {
    threads.emplace_back(Poll, &as, cqs[t % cqs.size()].get());
  }
  std::fprintf(stderr, "echo_server (%s) listening\n", mode.c_str());
  std::this_thread::sleep_for(std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds)));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Exits without draining the queues: a call that arrived just before the
  // shutdown would request another on a queue being shut down.
  std::fflush(nullptr);
  _exit(0);
}
