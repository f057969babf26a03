// rankctl score: sends ScoreRequest JSON lines to rankd and writes one
// ScoreResponse JSON line per successful request, in input order, keeping up
// to --concurrency calls in flight. --version_label gives the lines that name
// no version a label (lines may carry their own "versionLabel").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/rankctl/commands.h"
#include "client/rankctl/ordered_window.h"
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

using Slot = OrderedWindow<rankd::v1::ScoreResponse>::Slot;
using Window = OrderedWindow<rankd::v1::ScoreResponse>;

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

// Writes finished slots, in input order: a response as one JSON line on
// `out`, an error as one line on stderr naming its input line; counts both.
struct ResponseWriter {
  std::ostream& out;
  const std::string source;  // the input's name in error lines
  int64_t ok = 0, failed = 0, unavailable = 0;

  void Write(const std::vector<std::shared_ptr<Slot>>& slots) {
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
  }
};

// Sends every request line of `in` (blank lines skipped) with at most
// `concurrency` calls in flight, writing results as they complete in order.
void SendLines(std::istream& in, int concurrency, const std::string& version_label,
               client::RankingClient& client, Window& window, ResponseWriter& writer) {
  // Room for the calls in flight plus completed ones behind a slow oldest call.
  const size_t max_slots = 4 * static_cast<size_t>(concurrency) + 16;
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
      client.ScoreAsync(std::shared_ptr<const rankd::v1::ScoreRequest>(std::move(*request)),
                        [&window, raw](absl::StatusOr<rankd::v1::ScoreResponse> result) {
                          window.Complete(raw, std::move(result));
                        });
    }
    writer.Write(window.TakeDone(/*wait_all=*/false));
  }
  writer.Write(window.TakeDone(/*wait_all=*/true));
}

}  // namespace

int RunScore() {
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  if (concurrency < 1) {
    return UsageError("score", absl::StrCat("--concurrency: must be >= 1, got ", concurrency));
  }
  const std::string input = absl::GetFlag(FLAGS_input);
  const std::string output = absl::GetFlag(FLAGS_output);
  if (input.empty()) return UsageError("score", "--input: must not be empty (- = stdin)");
  if (output.empty()) return UsageError("score", "--output: must not be empty (- = stdout)");
  // Before the client: its destructor waits for the completions, which use
  // the window, so the window must outlive it.
  Window window;
  auto client = ClientFromFlags();
  if (!client.ok()) return ClientSetupFailed("score", client.status());
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
  ResponseWriter writer{output == "-" ? std::cout : out_file, input == "-" ? "stdin" : input};

  const auto start = std::chrono::steady_clock::now();
  SendLines(in, concurrency, VersionLabelFlag(), **client, window, writer);
  const bool read_error = in.bad();
  writer.out.flush();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "rankctl score: " << writer.ok << " ok, " << writer.failed << " failed, " << seconds
            << " s\n";
  if (read_error) {
    std::cerr << "rankctl score: --input: read error on " << writer.source << "\n";
    return kExitFailed;
  }
  if (!writer.out) {
    std::cerr << "rankctl score: --output: write error\n";
    return kExitFailed;
  }
  if (writer.unavailable > 0) return kExitUnavailable;
  return writer.failed > 0 ? kExitFailed : kExitOk;
}

}  // namespace rankd::rankctl
