// ListModelVersions: scans `<root>/<name>/<version>/` (Triton / TF Serving
// layout).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/model/model_loader.h"

namespace rankd::engine {
namespace {

namespace fs = std::filesystem;

// Positive decimal without sign or leading zeros, so "7" and "007" cannot
// both claim version 7.
bool ParseVersion(const std::string& s, int64_t* version) {
  if (s.empty() || s[0] == '0') return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s, version) && *version > 0;
}

bool IsDirectory(const fs::directory_entry& entry) {
  std::error_code ec;
  return entry.is_directory(ec) && !ec;  // follows symlinks
}

}  // namespace

absl::StatusOr<std::vector<ModelVersionPath>> ListModelVersions(
    const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat(root, ": model root does not exist"));
  }
  if (!fs::is_directory(root, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(root, ": model root is not a directory"));
  }
  std::vector<ModelVersionPath> out;
  fs::directory_iterator models(root, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, ": cannot list: ", ec.message()));
  }
  // increment(ec), not range-for: the range form throws on I/O errors.
  for (; !ec && models != fs::directory_iterator(); models.increment(ec)) {
    const fs::directory_entry& model = *models;
    const std::string name = model.path().filename().string();
    // Hidden entries (.git, editors' temp dirs) are not models.
    if (name.empty() || name[0] == '.' || !IsDirectory(model)) continue;
    std::error_code vec;
    fs::directory_iterator versions(model.path(), vec);
    // An unreadable model directory is skipped like any non-model entry.
    for (; !vec && versions != fs::directory_iterator();
         versions.increment(vec)) {
      const fs::directory_entry& v = *versions;
      int64_t version = 0;
      if (!ParseVersion(v.path().filename().string(), &version) ||
          !IsDirectory(v)) {
        continue;
      }
      out.push_back(ModelVersionPath{name, version, v.path().string()});
    }
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, ": cannot list: ", ec.message()));
  }
  std::sort(out.begin(), out.end(),
            [](const ModelVersionPath& a, const ModelVersionPath& b) {
              return a.name != b.name ? a.name < b.name : a.version < b.version;
            });
  return out;
}

}  // namespace rankd::engine
