// The host work of one request in each gRPC front end, without the network or
// the engine: rankd's Score (parse the ScoreRequest, convert it to an engine
// request, make and serialize the response) against KServe's ModelInfer (the
// same request as raw tensors: parse, size for admission, convert, make and
// serialize the response). Prints nanoseconds per request for each step, so a
// difference between the front ends' server CPU can be traced to a step.
//   bazel run -c opt //bench:front_end_bench -- --candidates 1 --iterations 200000
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "client/kserve_request.h"
#include "engine/testing/test_models.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/kserve_conversion.h"
#include "server/message_pool.h"
#include "server/raw_messages.h"
#include "server/request_conversion.h"

ABSL_FLAG(int, candidates, 1, "candidates per request");
ABSL_FLAG(int, features, 3, "sparse features (one id per bag)");
ABSL_FLAG(int, num_dense, 13, "dense features");
ABSL_FLAG(int, iterations, 200000, "requests per measurement");

namespace {

using Clock = std::chrono::steady_clock;

grpc::ByteBuffer Wire(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Runs `step` `n` times and prints its mean time.
void Time(const char* name, int n, const std::function<void()>& step) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) step();
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
  std::printf("  %-44s %8.0f ns\n", name, ns);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int b = absl::GetFlag(FLAGS_candidates);
  const int n = absl::GetFlag(FLAGS_iterations);
  rankd::engine::testing::RandomModelSpec spec;
  spec.num_dense = absl::GetFlag(FLAGS_num_dense);
  spec.table_rows.assign(absl::GetFlag(FLAGS_features), 1000);
  auto model = rankd::engine::testing::MakeRandomModel(spec);

  rankd::v1::ScoreRequest score;
  score.set_model(model->name);
  score.set_num_candidates(b);
  for (int i = 0; i < b * spec.num_dense; ++i) score.add_dense(0.25f * (i % 7));
  for (size_t f = 0; f < model->features.size(); ++f) {
    auto* s = score.add_sparse();
    s->set_name(model->features[f].name);
    for (int i = 0; i < b; ++i) {
      s->add_ids((i * 31 + f) % 1000);
      s->add_lengths(1);
    }
  }
  auto infer = rankd::client::ToModelInferRequest(score, /*raw=*/true);
  if (!infer.ok()) {
    std::fprintf(stderr, "%s\n", infer.status().ToString().c_str());
    return 1;
  }
  const std::string score_wire = score.SerializeAsString();
  const std::string infer_wire = infer->SerializeAsString();
  std::printf("%d candidates, %d dense, %zu features; wire: Score %zu B, ModelInfer %zu B\n", b,
              spec.num_dense, model->features.size(), score_wire.size(), infer_wire.size());

  // Each call parses into a message of its own. The server takes one from
  // its pool (server/message_pool.h), parsed into before, whose repeated
  // fields keep their capacity; a fresh message (on the heap, or on a
  // CallArena as ModelInfer's were) grows every field as it is read.
  std::printf("rankd Score:\n");
  Time("parse into a fresh heap message", n, [&] {
    rankd::v1::ScoreRequest fresh;
    grpc::ByteBuffer w = Wire(score_wire);
    (void)rankd::server::ParseRequest(&w, &fresh);
  });
  Time("parse into a fresh CallArena", n, [&] {
    rankd::server::CallArena arena;
    grpc::ByteBuffer w = Wire(score_wire);
    (void)rankd::server::ParseRequest(&w, arena.Create<rankd::v1::ScoreRequest>());
  });
  rankd::server::MessagePool<rankd::v1::ScoreRequest> pool({});
  Time("parse into a pooled message (the server)", n, [&] {
    std::unique_ptr<rankd::v1::ScoreRequest> m = pool.Take();
    grpc::ByteBuffer w = Wire(score_wire);
    (void)rankd::server::ParseRequest(&w, m.get());
    pool.Give(std::move(m), 0);
  });
  rankd::v1::ScoreRequest parsed_score;
  {
    grpc::ByteBuffer w = Wire(score_wire);
    if (!rankd::server::ParseRequest(&w, &parsed_score).ok()) std::abort();
  }
  Time("convert (ToEngineRequest)", n, [&] {
    auto r = rankd::server::ToEngineRequest(*model, parsed_score);
    if (!r.ok()) std::abort();
  });
  Time("response (scores, serialize)", n, [&] {
    rankd::v1::ScoreResponse response;
    response.mutable_scores()->Resize(b, 0.5f);
    response.set_model(model->name);
    response.set_version(1);
    grpc::ByteBuffer out;
    (void)rankd::server::SerializeResponse(response, &out);
  });

  std::printf("KServe ModelInfer (raw contents):\n");
  Time("parse into a fresh CallArena", n, [&] {
    rankd::server::CallArena arena;
    grpc::ByteBuffer w = Wire(infer_wire);
    (void)rankd::server::ParseRequest(&w, arena.Create<inference::ModelInferRequest>());
  });
  rankd::server::MessagePool<inference::ModelInferRequest> infer_pool({});
  Time("parse into a pooled message (the server)", n, [&] {
    std::unique_ptr<inference::ModelInferRequest> m = infer_pool.Take();
    grpc::ByteBuffer w = Wire(infer_wire);
    (void)rankd::server::ParseRequest(&w, m.get());
    infer_pool.Give(std::move(m), 0);
  });
  inference::ModelInferRequest parsed_infer;
  {
    grpc::ByteBuffer w = Wire(infer_wire);
    if (!rankd::server::ParseRequest(&w, &parsed_infer).ok()) std::abort();
  }
  Time("size for admission (SpaceUsedLong)", n, [&] {
    volatile size_t bytes = parsed_infer.SpaceUsedLong();
    (void)bytes;
  });
  Time("convert (ToEngineRequest)", n, [&] {
    rankd::server::KServeRequest view;
    if (!rankd::server::ToEngineRequest(*model, parsed_infer, {}, &view).ok()) std::abort();
  });
  Time("response (PrepareKServeResponse, serialize)", n, [&] {
    inference::ModelInferResponse response;
    absl::Span<float> scores =
        rankd::server::PrepareKServeResponse(model->name, 1, parsed_infer.id(), b, true, &response);
    for (float& s : scores) s = 0.5f;
    grpc::ByteBuffer out;
    (void)rankd::server::SerializeResponse(response, &out);
  });
  return 0;
}
