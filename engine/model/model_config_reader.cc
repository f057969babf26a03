// ReadModelConfig: model.pbtxt -> validated rankd.v1.ModelConfig.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/error_list.h"
#include "engine/model/model_config_validation.h"
#include "engine/model/model_loader.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace rankd::engine {
namespace {

// Protobuf's default collector logs to stderr and the caller only learns
// "failed"; this one keeps each message with its (1-based) position.
class CollectingErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  CollectingErrorCollector(const std::string& path, ErrorList* errors)
      : path_(path), errors_(errors) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    // line < 0: an error without a position.
    if (line < 0) {
      errors_->Addf(path_, ": ", message);
    } else {
      errors_->Addf(path_, ":", line + 1, ":", column + 1, ": ", message);
    }
  }

 private:
  const std::string& path_;
  ErrorList* errors_;
};

}  // namespace

absl::StatusOr<rankd::v1::ModelConfig> ReadModelConfig(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    const std::string what = absl::StrCat(path, ": cannot open: ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(what)
                         : absl::FailedPreconditionError(what);
  }
  // A directory would "open" and read as an empty, hence invalid, config.
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot open: ", strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": read failed"));
  }

  rankd::v1::ModelConfig config;
  {
    // Syntax errors read "<path>:<line>:<col>: <message>", like a compiler.
    ErrorList syntax_errors;
    CollectingErrorCollector collector(path, &syntax_errors);
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&collector);
    if (!parser.ParseFromString(text.str(), &config)) {
      if (syntax_errors.empty()) syntax_errors.Addf(path, ": cannot parse");
      return syntax_errors.ToStatus();
    }
  }
  ErrorList errors(path);
  CheckModelConfig(&config, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return config;
}

}  // namespace rankd::engine
