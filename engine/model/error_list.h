// Collects every problem found in a config or weights file, so one load
// attempt reports all of them (like a compiler) instead of one per retry.
#ifndef RANKD_ENGINE_MODEL_ERROR_LIST_H_
#define RANKD_ENGINE_MODEL_ERROR_LIST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rankd::engine {

class ErrorList {
 public:
  // Each reported line is "<prefix>: <message>" (or the message alone
  // without a prefix).
  explicit ErrorList(std::string prefix = "") : prefix_(std::move(prefix)) {}

  void Add(std::string message) { errors_.push_back(std::move(message)); }
  template <typename... Args>
  void Addf(const Args&... parts) {
    errors_.push_back(absl::StrCat(parts...));
  }
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }

  // OK when empty, else INVALID_ARGUMENT with one line per error, capped so a
  // completely wrong file does not produce a megabyte of status text.
  absl::Status ToStatus(size_t max_lines = 20) const {
    if (errors_.empty()) return absl::OkStatus();
    std::vector<std::string> lines;
    for (size_t i = 0; i < errors_.size() && i < max_lines; ++i) {
      lines.push_back(prefix_.empty() ? errors_[i]
                                      : absl::StrCat(prefix_, ": ", errors_[i]));
    }
    if (errors_.size() > max_lines) {
      lines.push_back(absl::StrCat("... and ", errors_.size() - max_lines,
                                   " more errors"));
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }

 private:
  std::string prefix_;
  std::vector<std::string> errors_;
};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_ERROR_LIST_H_
