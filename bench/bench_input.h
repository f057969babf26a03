// A benchmark's input: a model version and the first ScoreRequest of a
// JSON-lines file (`rankd gen-model`, `rankd gen-requests`), converted as the
// server converts it. The engine request's spans point into `wire`, so the
// three live and move together (hence the unique_ptr).
#ifndef RANKD_BENCH_BENCH_INPUT_H_
#define RANKD_BENCH_BENCH_INPUT_H_

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/model_loader.h"
#include "engine/request.h"
#include "google/protobuf/util/json_util.h"
#include "protos/rankd/v1/ranking.pb.h"
#include "server/request_conversion.h"

namespace rankd::bench {

struct BenchInput {
  std::shared_ptr<const engine::Model> model;
  v1::ScoreRequest wire;
  engine::Request request;  // views of `wire`
};

inline absl::StatusOr<std::unique_ptr<BenchInput>> LoadBenchInput(const std::string& model_dir,
                                                                  const std::string& request_path) {
  auto in = std::make_unique<BenchInput>();
  absl::StatusOr<std::shared_ptr<const engine::Model>> model = engine::LoadModel(model_dir);
  if (!model.ok()) return model.status();
  in->model = *std::move(model);
  std::ifstream file(request_path);
  std::string line;
  if (!std::getline(file, line)) {
    return absl::InvalidArgumentError(absl::StrCat("--request ", request_path, ": no line to read"));
  }
  if (!google::protobuf::util::JsonStringToMessage(line, &in->wire).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--request ", request_path, ": the first line is not a ScoreRequest"));
  }
  absl::StatusOr<engine::Request> request = server::ToEngineRequest(*in->model, in->wire);
  if (!request.ok()) return request.status();
  in->request = *std::move(request);
  return in;
}

}  // namespace rankd::bench

#endif  // RANKD_BENCH_BENCH_INPUT_H_
