#include "loadtest/traffic/request_file.h"

#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace rankd::loadtest {

absl::StatusOr<RequestPool> ReadRequestFiles(const std::vector<std::string>& paths) {
  RequestPool pool;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      auto req = std::make_shared<rankd::v1::ScoreRequest>();
      const auto status = google::protobuf::util::JsonStringToMessage(line, req.get());
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", n, ": not a ScoreRequest in proto3 JSON: ", status.ToString()));
      }
      pool.push_back(std::move(req));
    }
    if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  if (pool.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no request in ", paths.size(), " file(s)"));
  }
  return pool;
}

}  // namespace rankd::loadtest
