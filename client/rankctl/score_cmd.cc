// rankctl score: sends ScoreRequest JSON lines to rankd and writes one
// ScoreResponse JSON line per successful request, in input order, keeping up
// to --concurrency calls in flight. --version_label gives the lines that name
// no version a label (lines may carry their own "versionLabel").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/rankctl/commands.h"
#include "google/protobuf/util/json_util.h"
#include "rankd/v1/ranking.pb.h"

ABSL_FLAG(std::string, input, "-",
          "score: ScoreRequest JSON lines, - = stdin; update: the delta file (safetensors: "
          "<table>.ids I64 [n], <table>.rows F32/F16/BF16 [n, dim], optional <table>.delete "
          "I64 [m]; required)");
ABSL_FLAG(std::string, output, "-", "score: ScoreResponse JSON lines, - = stdout");
ABSL_FLAG(int, concurrency, 1, "score: requests in flight at once (responses stay in input order)");

namespace rankd::rankctl {
namespace {

// One input line, from parsing to output.
struct Slot {
  int64_t line = 0;
  bool done = false;
  absl::StatusOr<rankd::v1::ScoreResponse> result;
};

// The lines between the oldest one not yet written and the newest one read.
// Completions (on gRPC threads) only fill in slots; the main thread writes
// them, oldest first, so output order is input order whatever the order of
// completion.
class Window {
 public:
  // Blocks until fewer than `max_in_flight` calls are in flight and fewer than
  // `max_slots` lines are held (a slow oldest call must not let completed
  // responses pile up without bound).
  void WaitForRoom(int max_in_flight, size_t max_slots) {
    absl::MutexLock lock(&mu_);
    while (in_flight_ >= max_in_flight || slots_.size() >= max_slots) cv_.Wait(&mu_);
  }
  void Push(std::shared_ptr<Slot> slot, bool call) {
    absl::MutexLock lock(&mu_);
    if (call) ++in_flight_;
    slots_.push_back(std::move(slot));
  }
  void Complete(Slot* slot, absl::StatusOr<rankd::v1::ScoreResponse> result) {
    absl::MutexLock lock(&mu_);
    slot->result = std::move(result);
    slot->done = true;
    --in_flight_;
    cv_.Signal();
  }
  // Takes the finished slots at the front; with `wait_all`, first waits until
  // no call is in flight.
  std::vector<std::shared_ptr<Slot>> TakeDone(bool wait_all) {
    absl::MutexLock lock(&mu_);
    while (wait_all && in_flight_ > 0) cv_.Wait(&mu_);
    std::vector<std::shared_ptr<Slot>> done;
    while (!slots_.empty() && slots_.front()->done) {
      done.push_back(std::move(slots_.front()));
      slots_.pop_front();
    }
    return done;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
};

// Gives `request` the version label `label` (--version_label; "" = leave the
// request as it is). A line that names a version, or another label, conflicts
// with the flag: INVALID_ARGUMENT rather than silently one or the other.
absl::Status ApplyVersionLabel(const std::string& label, rankd::v1::ScoreRequest* request) {
  if (label.empty()) return absl::OkStatus();
  if (request->version() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--version_label=", label, ", but the line names version ", request->version()));
  }
  if (!request->version_label().empty() && request->version_label() != label) {
    return absl::InvalidArgumentError(absl::StrCat("--version_label=", label,
                                                   ", but the line names versionLabel \"",
                                                   request->version_label(), "\""));
  }
  request->set_version_label(label);
  return absl::OkStatus();
}

// One input line as a request, with --version_label applied; INVALID_ARGUMENT
// (one line of text) when it is not a ScoreRequest or conflicts with the flag.
absl::StatusOr<std::shared_ptr<rankd::v1::ScoreRequest>> ParseLine(
    const std::string& line, const std::string& version_label) {
  auto request = std::make_shared<rankd::v1::ScoreRequest>();
  const auto parsed = google::protobuf::util::JsonStringToMessage(line, request.get());
  if (!parsed.ok()) {
    // The parser's message goes on to quote the line over several lines;
    // one error line per input line is kept, and the line number says which.
    const std::string why(parsed.message());
    return absl::InvalidArgumentError(
        absl::StrCat("not a ScoreRequest in proto3 JSON: ", why.substr(0, why.find('\n'))));
  }
  if (absl::Status s = ApplyVersionLabel(version_label, request.get()); !s.ok()) return s;
  return request;
}

}  // namespace

int RunScore() {
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  if (concurrency < 1) {
    std::cerr << "rankctl score: --concurrency: must be >= 1, got " << concurrency << "\n";
    return kExitUsage;
  }
  const std::string input = absl::GetFlag(FLAGS_input);
  const std::string output = absl::GetFlag(FLAGS_output);
  if (input.empty()) {
    std::cerr << "rankctl score: --input: must not be empty (- = stdin)\n";
    return kExitUsage;
  }
  if (output.empty()) {
    std::cerr << "rankctl score: --output: must not be empty (- = stdout)\n";
    return kExitUsage;
  }
  // Before the client: its destructor waits for the completions, which use
  // the window, so the window must outlive it.
  Window window;
  auto client = ClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("score", client.status());
  const std::string version_label = VersionLabelFlag();
  std::ifstream in_file;
  std::ofstream out_file;
  if (input != "-") {
    in_file.open(input);
    if (!in_file) {
      std::cerr << "rankctl score: --input: cannot read " << input << "\n";
      return kExitFailed;
    }
  }
  if (output != "-") {
    out_file.open(output);
    if (!out_file) {
      std::cerr << "rankctl score: --output: cannot write " << output << "\n";
      return kExitFailed;
    }
  }
  std::istream& in = input == "-" ? std::cin : in_file;
  std::ostream& out = output == "-" ? std::cout : out_file;
  const std::string source = input == "-" ? "stdin" : input;

  int64_t ok = 0, failed = 0, unavailable = 0;
  auto write = [&](const std::vector<std::shared_ptr<Slot>>& slots) {
    for (const auto& slot : slots) {
      if (!slot->result.ok()) {
        std::cerr << "rankctl score: " << source << ":" << slot->line << ": "
                  << DescribeError(slot->result.status()) << "\n";
        ++failed;
        if (absl::IsUnavailable(slot->result.status())) ++unavailable;
        continue;
      }
      std::string json;
      const auto printed = google::protobuf::util::MessageToJsonString(*slot->result, &json);
      if (!printed.ok()) {
        std::cerr << "rankctl score: " << source << ":" << slot->line
                  << ": cannot print the ScoreResponse as JSON: " << printed.message() << "\n";
        ++failed;
        continue;
      }
      out << json << "\n";
      ++ok;
    }
  };

  // Room for the calls in flight plus completed ones behind a slow oldest call.
  const size_t max_slots = 4 * static_cast<size_t>(concurrency) + 16;
  const auto start = std::chrono::steady_clock::now();
  int64_t line_no = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto slot = std::make_shared<Slot>();
    slot->line = line_no;
    absl::StatusOr<std::shared_ptr<rankd::v1::ScoreRequest>> request =
        ParseLine(line, version_label);
    window.WaitForRoom(concurrency, max_slots);
    if (!request.ok()) {
      slot->done = true;
      slot->result = request.status();
      window.Push(std::move(slot), /*call=*/false);
    } else {
      Slot* raw = slot.get();
      window.Push(std::move(slot), /*call=*/true);
      (*client)->ScoreAsync(std::shared_ptr<const rankd::v1::ScoreRequest>(std::move(*request)),
                            [&window, raw](absl::StatusOr<rankd::v1::ScoreResponse> result) {
                              window.Complete(raw, std::move(result));
                            });
    }
    write(window.TakeDone(/*wait_all=*/false));
  }
  const bool read_error = in.bad();
  write(window.TakeDone(/*wait_all=*/true));
  out.flush();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "rankctl score: " << ok << " ok, " << failed << " failed, " << seconds << " s\n";
  if (read_error) {
    std::cerr << "rankctl score: --input: read error on " << source << "\n";
    return kExitFailed;
  }
  if (!out) {
    std::cerr << "rankctl score: --output: write error\n";
    return kExitFailed;
  }
  if (unavailable > 0) return kExitUnavailable;
  return failed > 0 ? kExitFailed : kExitOk;
}

}  // namespace rankd::rankctl
