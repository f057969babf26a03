#include "server/lifecycle/serving_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace rankd::server {
namespace {

// Keeps the parser's first error with its position instead of logging it.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstError(const std::string& path) : path_(path) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!text_.empty()) return;
    text_ = line < 0 ? absl::StrCat(path_, ": ", message)
                     : absl::StrCat(path_, ":", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& text() const { return text_; }

 private:
  const std::string path_;
  std::string text_;
};

absl::Status Invalid(const std::string& path, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", why));
}

}  // namespace

absl::Status CheckLabelName(absl::string_view label, absl::string_view field) {
  if (label.empty() || label.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a label is 1 to 64 characters, got ", label.size()));
  }
  for (char c : label) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": label \"", label, "\" may hold only letters, digits, '_', '-' and '.'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<rankd::v1::ModelServingConfig> ParseServingConfig(absl::string_view text,
                                                                 const std::string& path) {
  rankd::v1::ModelServingConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors(path);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(errors.text().empty() ? absl::StrCat(path, ": does not parse")
                                                            : errors.text());
  }
  const rankd::v1::VersionPolicy& policy = config.version_policy();
  if (policy.has_specific()) {
    if (policy.specific().versions().empty()) {
      return Invalid(path, "version_policy.specific.versions", "must list at least one version");
    }
    for (int i = 0; i < policy.specific().versions_size(); ++i) {
      if (policy.specific().versions(i) <= 0) {
        return Invalid(path, absl::StrCat("version_policy.specific.versions[", i, "]"),
                       absl::StrCat("must be > 0, got ", policy.specific().versions(i)));
      }
    }
  }
  for (const auto& [label, version] : config.version_labels()) {
    absl::Status s = CheckLabelName(label, absl::StrCat(path, ": version_labels"));
    if (!s.ok()) return s;
    if (version <= 0) {
      return Invalid(path, absl::StrCat("version_labels[\"", label, "\"]"),
                     absl::StrCat("must be a version > 0, got ", version));
    }
  }
  return config;
}

absl::StatusOr<rankd::v1::ModelServingConfig> ReadServingConfig(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    const std::string what = absl::StrCat(path, ": cannot read: ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(what) : absl::FailedPreconditionError(what);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size > kMaxServingConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size,
                                                   " bytes; a serving config is at most ",
                                                   kMaxServingConfigBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot read"));
  }
  return ParseServingConfig(text.str(), path);
}

std::set<int64_t> SelectVersions(const rankd::v1::VersionPolicy& policy,
                                 const std::set<int64_t>& available) {
  std::set<int64_t> out;
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    for (int64_t v : policy.specific().versions()) {
      if (available.count(v) > 0) out.insert(v);
    }
    return out;
  }
  const uint32_t n = std::max<uint32_t>(1, policy.latest().num_versions());
  for (auto it = available.rbegin(); it != available.rend() && out.size() < n; ++it) {
    out.insert(*it);
  }
  return out;
}

std::string PolicyString(const rankd::v1::VersionPolicy& policy) {
  if (policy.has_all()) return "all";
  if (policy.has_specific()) {
    return absl::StrCat("specific ", absl::StrJoin(policy.specific().versions(), ","));
  }
  return absl::StrCat("latest ", std::max<uint32_t>(1, policy.latest().num_versions()));
}

}  // namespace rankd::server
