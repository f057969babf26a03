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

// --input and --output ("-" = stdin / stdout), opened.
struct ScoreStreams {
  std::ifstream in_file;
  std::ofstream out_file;
  std::istream* in = nullptr;
  std::ostream* out = nullptr;
};

// Opens --input and --output into `streams`; false after printing which
// cannot be opened.
bool OpenStreams(const std::string& input, const std::string& output, ScoreStreams* streams) {
  if (input != "-") {
    streams->in_file.open(input);
    if (!streams->in_file) {
      std::cerr << "rankd score: --input: cannot read " << input << "\n";
      return false;
    }
  }
  if (output != "-") {
    streams->out_file.open(output);
    if (!streams->out_file) {
      std::cerr << "rankd score: --output: cannot write " << output << "\n";
      return false;
    }
  }
  streams->in = input == "-" ? &std::cin : &streams->in_file;
  streams->out = output == "-" ? &std::cout : &streams->out_file;
  return true;
}

// One input line as a request for `model`: parsed from proto3 JSON, its
// model name (if any) checked, and its engine view made. INVALID_ARGUMENT
// (or ToEngineRequest's error) saying what is wrong.
absl::Status ParseRequestLine(const std::string& line, const engine::Model& model, Pending* p) {
  absl::Status s;
  const auto parsed = google::protobuf::util::JsonStringToMessage(line, &p->request);
  if (!parsed.ok()) {
    s = absl::InvalidArgumentError("not a ScoreRequest in proto3 JSON: " +
                                   std::string(parsed.message()));
  }
  if (s.ok() && !p->request.model().empty() && p->request.model() != model.name) {
    s = absl::InvalidArgumentError("model: \"" + p->request.model() +
                                   "\" is not the loaded model \"" + model.name + "\"");
  }
  if (s.ok()) {
    auto view = ToEngineRequest(model, p->request);
    if (view.ok()) {
      p->view = std::move(*view);
    } else {
      s = view.status();
    }
  }
  return s;
}

// Scores parsed requests in batches on the CPU engine and writes one
// ScoreResponse JSON line per request, in input order; counts what it did.
class BatchScorer {
 public:
  BatchScorer(const engine::Model& model, engine::CpuEngine* engine, std::ostream* out,
              std::string input_name, bool keep_going)
      : model_(model),
        engine_(engine),
        out_(out),
        input_name_(std::move(input_name)),
        keep_going_(keep_going) {}

  void Add(std::unique_ptr<Pending> p) { batch_.push_back(std::move(p)); }
  size_t batch_size() const { return batch_.size(); }
  // A request line that could not be scored (printed by the caller).
  void CountFailed() { ++failed_; }

  // Scores the batch gathered and writes its responses. False after printing
  // why when the batch fails, or a score is not finite without --keep_going.
  bool Flush() {
    if (batch_.empty()) return true;
    std::vector<const engine::Request*> reqs;
    std::vector<absl::Span<float>> spans;
    for (auto& p : batch_) {
      p->scores.assign(p->view.num_candidates, 0.0f);
      reqs.push_back(&p->view);
      spans.push_back(absl::MakeSpan(p->scores));
    }
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = engine_->ScoreBatch(reqs, spans, nullptr);
    compute_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      std::cerr << "rankd score: lines " << batch_.front()->line << "-" << batch_.back()->line
                << ": " << s.message() << "\n";
      return false;
    }
    for (auto& p : batch_) {
      // As the server does: a NaN or Inf score (float32 overflow) is an
      // error for its line, never written out.
      if (absl::Status finite = CheckFiniteScores(p->scores); !finite.ok()) {
        std::cerr << "rankd score: " << input_name_ << ":" << p->line << ": " << finite.message()
                  << "\n";
        ++failed_;
        if (!keep_going_) return false;
        continue;
      }
      rankd::v1::ScoreResponse resp;
      resp.mutable_scores()->Add(p->scores.begin(), p->scores.end());
      resp.set_model(model_.name);
      resp.set_version(model_.version);
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(resp, &json);
      *out_ << json << "\n";
      ++requests_;
      candidates_ += p->view.num_candidates;
    }
    batch_.clear();
    return true;
  }

  // The closing line on stderr: counts, compute rate, and the wall-clock
  // rate since `wall_start` (JSON parsing and writing included).
  void PrintSummary(std::chrono::steady_clock::time_point wall_start) const {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    std::cerr << "rankd score: " << requests_ << " requests, " << candidates_ << " candidates, "
              << failed_ << " failed; " << engine_->num_threads() << " threads; compute "
              << compute_seconds_ << " s ("
              << (compute_seconds_ > 0 ? candidates_ / compute_seconds_ : 0)
              << " candidates/s), wall " << wall << " s (" << (wall > 0 ? candidates_ / wall : 0)
              << " candidates/s incl. JSON)\n";
  }

  int64_t failed() const { return failed_; }

 private:
  const engine::Model& model_;
  engine::CpuEngine* const engine_;
  std::ostream* const out_;
  const std::string input_name_;  // in error lines: --input, or "stdin"
  const bool keep_going_;
  std::vector<std::unique_ptr<Pending>> batch_;
  int64_t requests_ = 0, candidates_ = 0, failed_ = 0;
  double compute_seconds_ = 0;
};

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
  ScoreStreams streams;
  if (!OpenStreams(input, absl::GetFlag(FLAGS_output), &streams)) return 1;
  const std::string input_name = input == "-" ? "stdin" : input;
  const bool keep_going = absl::GetFlag(FLAGS_keep_going);
  BatchScorer scorer(**model, engine->get(), streams.out, input_name, keep_going);

  const auto wall_start = std::chrono::steady_clock::now();
  std::string line;
  int64_t line_no = 0;
  while (std::getline(*streams.in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto p = std::make_unique<Pending>();
    p->line = line_no;
    if (absl::Status s = ParseRequestLine(line, **model, p.get()); !s.ok()) {
      std::cerr << "rankd score: " << input_name << ":" << line_no << ": " << s.message() << "\n";
      scorer.CountFailed();
      if (!keep_going) {
        scorer.Flush();
        return 1;
      }
      continue;
    }
    scorer.Add(std::move(p));
    if (static_cast<int>(scorer.batch_size()) >= batch_requests && !scorer.Flush()) return 1;
  }
  if (!scorer.Flush()) return 1;
  streams.out->flush();
  scorer.PrintSummary(wall_start);
  return (scorer.failed() > 0 || !*streams.out) ? 1 : 0;
}

}  // namespace rankd::server
