// ReadModelConfig: model.pbtxt -> validated rankd.v1.ModelConfig.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/error_list.h"
#include "engine/model/model_config_validation.h"
#include "engine/model/model_loader.h"
#include "engine/model/regular_file.h"
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

// The whole file behind `fd` (retrying on EINTR).
absl::StatusOr<std::string> ReadAll(const std::string& path, int fd) {
  std::string text;
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": read failed: ", strerror(errno)));
    }
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<rankd::v1::ModelConfig> ReadModelConfig(const std::string& path) {
  // Regular files only: a directory would read as an empty (invalid)
  // config, a FIFO would block the load, a device might never end.
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  if (st.st_size > kMaxModelConfigBytes) {
    close(*fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes; a model config is at most ",
                     kMaxModelConfigBytes, " bytes (not a model.pbtxt?)"));
  }
  absl::StatusOr<std::string> text = ReadAll(path, *fd);
  close(*fd);
  if (!text.ok()) return text.status();

  return ParseModelConfig(*text, path);
}

absl::StatusOr<rankd::v1::ModelConfig> ParseModelConfig(absl::string_view text,
                                                        const std::string& source) {
  rankd::v1::ModelConfig config;
  {
    // Syntax errors read "<source>:<line>:<col>: <message>", like a compiler.
    ErrorList syntax_errors;
    CollectingErrorCollector collector(source, &syntax_errors);
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&collector);
    if (!parser.ParseFromString(std::string(text), &config)) {
      if (syntax_errors.empty()) syntax_errors.Addf(source, ": cannot parse");
      return syntax_errors.ToStatus();
    }
  }
  ErrorList errors(source);
  CheckModelConfig(&config, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return config;
}

}  // namespace rankd::engine
