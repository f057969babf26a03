// rankd score: batch scoring without a server. Reads ScoreRequest JSON lines,
// writes one ScoreResponse JSON line per request, in order.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model/model_loader.h"
#include "google/protobuf/util/json_util.h"
#include "rankd/v1/ranking.pb.h"
#include "server/request_conversion.h"
#include "server/tools/commands.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, output);
ABSL_FLAG(std::string, input, "-", "score: ScoreRequest JSON lines, - = stdin");
ABSL_FLAG(int, threads, 0, "score: CPU threads (0 = all cores)");
ABSL_FLAG(int, batch_requests, 64, "score: requests scored together in one engine batch");
ABSL_FLAG(bool, keep_going, false,
          "score: report a bad request line and go on (its response is left out) "
          "instead of stopping with an error");

namespace rankd::server {
namespace {

struct Pending {
  int64_t line = 0;
  rankd::v1::ScoreRequest request;
  engine::Request view;
  std::vector<float> scores;
};

// INTERNAL naming the first candidate whose score is NaN or Inf.
absl::Status CheckFiniteScores(const std::vector<float>& scores) {
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      return absl::InternalError(absl::StrCat("score of candidate ", i, " is ", scores[i],
                                              ": the model's float32 arithmetic overflowed on "
                                              "this request; its response is left out"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunScore() {
  const std::string dir = absl::GetFlag(FLAGS_model);
  const int batch_requests = absl::GetFlag(FLAGS_batch_requests);
  if (dir.empty()) {
    std::cerr << "rankd score: --model: required (a model version directory)\n";
    return 2;
  }
  if (batch_requests <= 0) {
    std::cerr << "rankd score: --batch_requests: must be > 0, got " << batch_requests << "\n";
    return 2;
  }
  engine::LoadOptions load;
  load.log = [](const std::string& line) { std::cerr << "rankd score: " << line << "\n"; };
  auto model = engine::LoadModel(dir, VersionFromDirectory(dir), "", load);
  if (!model.ok()) {
    std::cerr << "rankd score: " << model.status().message() << "\n";
    return 1;
  }
  engine::CpuEngine::Options options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  auto engine = engine::CpuEngine::Create(*model, options);
  if (!engine.ok()) {
    std::cerr << "rankd score: " << engine.status().message() << "\n";
    return 2;
  }
  const std::string input = absl::GetFlag(FLAGS_input);
  const std::string output = absl::GetFlag(FLAGS_output);
  std::ifstream in_file;
  std::ofstream out_file;
  if (input != "-") {
    in_file.open(input);
    if (!in_file) {
      std::cerr << "rankd score: --input: cannot read " << input << "\n";
      return 1;
    }
  }
  if (output != "-") {
    out_file.open(output);
    if (!out_file) {
      std::cerr << "rankd score: --output: cannot write " << output << "\n";
      return 1;
    }
  }
  std::istream& in = input == "-" ? std::cin : in_file;
  std::ostream& out = output == "-" ? std::cout : out_file;
  const bool keep_going = absl::GetFlag(FLAGS_keep_going);

  int64_t requests = 0, candidates = 0, failed = 0, line_no = 0;
  double compute_seconds = 0;
  std::vector<std::unique_ptr<Pending>> batch;
  auto flush = [&]() -> bool {
    if (batch.empty()) return true;
    std::vector<const engine::Request*> reqs;
    std::vector<absl::Span<float>> spans;
    for (auto& p : batch) {
      p->scores.assign(p->view.num_candidates, 0.0f);
      reqs.push_back(&p->view);
      spans.push_back(absl::MakeSpan(p->scores));
    }
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = (*engine)->ScoreBatch(reqs, spans, nullptr);
    compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      std::cerr << "rankd score: lines " << batch.front()->line << "-" << batch.back()->line
                << ": " << s.message() << "\n";
      return false;
    }
    for (auto& p : batch) {
      // As the server does: a NaN or Inf score (float32 overflow) is an
      // error for its line, never written out.
      if (absl::Status finite = CheckFiniteScores(p->scores); !finite.ok()) {
        std::cerr << "rankd score: " << (input == "-" ? "stdin" : input) << ":" << p->line
                  << ": " << finite.message() << "\n";
        ++failed;
        if (!keep_going) return false;
        continue;
      }
      rankd::v1::ScoreResponse resp;
      resp.mutable_scores()->Add(p->scores.begin(), p->scores.end());
      resp.set_model((*model)->name);
      resp.set_version((*model)->version);
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(resp, &json);
      out << json << "\n";
      ++requests;
      candidates += p->view.num_candidates;
    }
    batch.clear();
    return true;
  };

  const auto wall_start = std::chrono::steady_clock::now();
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto p = std::make_unique<Pending>();
    p->line = line_no;
    absl::Status s;
    const auto parsed = google::protobuf::util::JsonStringToMessage(line, &p->request);
    if (!parsed.ok()) {
      s = absl::InvalidArgumentError("not a ScoreRequest in proto3 JSON: " +
                                     std::string(parsed.message()));
    }
    if (s.ok() && !p->request.model().empty() && p->request.model() != (*model)->name) {
      s = absl::InvalidArgumentError("model: \"" + p->request.model() +
                                     "\" is not the loaded model \"" + (*model)->name + "\"");
    }
    if (s.ok()) {
      auto view = ToEngineRequest(**model, p->request);
      if (view.ok()) {
        p->view = std::move(*view);
      } else {
        s = view.status();
      }
    }
    if (!s.ok()) {
      std::cerr << "rankd score: " << (input == "-" ? "stdin" : input) << ":" << line_no << ": "
                << s.message() << "\n";
      ++failed;
      if (!keep_going) {
        flush();
        return 1;
      }
      continue;
    }
    batch.push_back(std::move(p));
    if (static_cast<int>(batch.size()) >= batch_requests && !flush()) return 1;
  }
  if (!flush()) return 1;
  out.flush();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::cerr << "rankd score: " << requests << " requests, " << candidates << " candidates, "
            << failed << " failed; " << (*engine)->num_threads() << " threads; compute "
            << compute_seconds << " s (" << (compute_seconds > 0 ? candidates / compute_seconds : 0)
            << " candidates/s), wall " << wall << " s (" << (wall > 0 ? candidates / wall : 0)
            << " candidates/s incl. JSON)\n";
  return (failed > 0 || !out) ? 1 : 0;
}

}  // namespace rankd::server
