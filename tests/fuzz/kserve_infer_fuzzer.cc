// Fuzz target: a KServe v2 inference request, as the REST body (JSON, read
// by server/http/kserve_json.h's SAX parser) or as ModelInferRequest bytes
// (the gRPC front end), -> conversion and validation against loaded models
// (server/kserve_conversion.h) -> scoring on the CPU engine. The input's
// first byte picks the form: even, the rest is a JSON body; odd, protobuf
// bytes. The JSON parser and the conversion are what stand between a client
// and the engine's indexing, so every request they accept is scored: an id
// let through out of range, a length that disagrees with the ids or a
// tensor shorter than its shape is an ASan report. Refusals must be
// INVALID_ARGUMENT; accepted requests give one score per candidate, each in
// [0, 1] when finite (the engine's final sigmoid).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/request_validation.h"
#include "inference/grpc_predict_v2.pb.h"
#include "server/http/kserve_json.h"
#include "server/kserve_conversion.h"
#include "tests/fuzz/fuzz_models.h"
#include "tests/fuzz/quiet_protobuf.h"

namespace {

struct Target {
  std::shared_ptr<rankd::engine::Model> model;
  std::unique_ptr<rankd::engine::CpuEngine> engine;
};

std::vector<Target>* Targets() {
  static std::vector<Target>* targets = [] {
    auto* t = new std::vector<Target>;
    for (const auto& spec : rankd::fuzz::ScoreModelSpecs()) {
      Target target;
      target.model = rankd::engine::testing::MakeRandomModel(spec);
      // One thread: the engine runs the request on the calling thread.
      auto engine = rankd::engine::CpuEngine::Create(target.model, {1, 256});
      if (!engine.ok()) std::abort();
      target.engine = std::move(*engine);
      t->push_back(std::move(target));
    }
    return t;
  }();
  return targets;
}

void RequireInvalidArgument(const absl::Status& s, const char* step) {
  if (s.code() == absl::StatusCode::kInvalidArgument) return;
  std::fprintf(stderr, "%s error is not INVALID_ARGUMENT: %s\n", step, s.ToString().c_str());
  std::abort();
}

// Converts `request` for every model, with and without a magnitude bound,
// and scores what the conversion accepts.
void ConvertAndScore(const inference::ModelInferRequest& request) {
  // The server's limits keep a single input cheap (a real server sets them
  // from flags).
  rankd::engine::RequestLimits limits;
  limits.max_candidates = 256;
  limits.max_ids_per_feature = 4096;
  for (const float max_abs : {0.0f, 1e4f}) {
    limits.max_abs_input = max_abs;
    for (Target& t : *Targets()) {
      rankd::server::KServeRequest converted;
      absl::Status s = rankd::server::ToEngineRequest(*t.model, request, limits, &converted);
      if (!s.ok()) {
        RequireInvalidArgument(s, "conversion");
        continue;
      }
      absl::StatusOr<std::vector<float>> scores = t.engine->Score(converted.request);
      if (!scores.ok()) {
        std::fprintf(stderr, "a converted request failed to score: %s\n",
                     scores.status().ToString().c_str());
        std::abort();
      }
      if (static_cast<int64_t>(scores->size()) != converted.request.num_candidates) std::abort();
      for (float score : *scores) {
        if (std::isfinite(score) && (score < 0.0f || score > 1.0f)) {
          std::fprintf(stderr, "score %g outside [0, 1]\n", score);
          std::abort();
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankd::fuzz::QuietProtobufLogs();
  if (size == 0) return 0;
  const bool wire = (data[0] & 1) != 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  inference::ModelInferRequest request;
  if (wire) {
    if (!request.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return 0;
  } else {
    absl::Status parsed = rankd::server::ParseKServeInferJson(rest, &request);
    if (!parsed.ok()) {
      RequireInvalidArgument(parsed, "JSON");
      return 0;
    }
  }
  ConvertAndScore(request);
  return 0;
}
