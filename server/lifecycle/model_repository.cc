#include "server/lifecycle/model_repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/lifecycle/serving_config.h"

namespace rankd::server {
namespace {

namespace fs = std::filesystem;

// Positive decimal without sign or leading zeros, so "7" and "007" cannot both
// claim version 7.
bool ParseVersion(const std::string& s, int64_t* version) {
  if (s.empty() || s[0] == '0' || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s, version) && *version > 0;
}

bool IsDirectory(const fs::directory_entry& entry) {
  std::error_code ec;
  return entry.is_directory(ec) && !ec;  // follows symlinks
}

// (size, mtime in ns) of a path, following symlinks; zeros when it is gone.
std::pair<int64_t, int64_t> SizeAndMtime(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {0, 0};
  return {static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

void ReadServingConfigInto(const std::string& model_dir, ModelOnDisk* model) {
  const std::string path = absl::StrCat(model_dir, "/serving.pbtxt");
  const auto [size, mtime] = SizeAndMtime(path);
  absl::StatusOr<rankd::v1::ModelServingConfig> config = ReadServingConfig(path);
  if (absl::IsNotFound(config.status())) return;
  model->has_serving_config = true;
  model->serving_config_fingerprint = absl::HashOf(path, size, mtime) | 1;
  if (config.ok()) {
    model->serving_config = *std::move(config);
  } else {
    model->serving_config_error = std::string(config.status().message());
  }
}

}  // namespace

uint64_t DirectoryFingerprint(const std::string& directory) {
  std::error_code ec;
  fs::directory_iterator it(directory, ec);
  if (ec) return 0;
  std::vector<std::string> names;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return 0;
  std::sort(names.begin(), names.end());  // listing order is not stable
  uint64_t h = absl::HashOf(directory);
  for (const std::string& name : names) {
    const auto [size, mtime] = SizeAndMtime(absl::StrCat(directory, "/", name));
    h = absl::HashOf(h, name, size, mtime);
  }
  return h | 1;  // never 0
}

absl::StatusOr<RepositoryScan> ScanRepository(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    return absl::NotFoundError(absl::StrCat(root, ": model root does not exist"));
  }
  if (!fs::is_directory(root, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(root, ": model root is not a directory"));
  }
  RepositoryScan scan;
  fs::directory_iterator models(root, ec);
  // increment(ec), not range-for: the range form throws on I/O errors.
  for (; !ec && models != fs::directory_iterator(); models.increment(ec)) {
    const fs::directory_entry& model = *models;
    const std::string name = model.path().filename().string();
    // Hidden entries (.git, a publisher's temporary directories) are not models.
    if (name.empty() || name[0] == '.' || !IsDirectory(model)) continue;
    ModelOnDisk& out = scan[name];
    ReadServingConfigInto(model.path().string(), &out);
    std::error_code vec;
    fs::directory_iterator versions(model.path(), vec);
    for (; !vec && versions != fs::directory_iterator(); versions.increment(vec)) {
      int64_t version = 0;
      if (!ParseVersion(versions->path().filename().string(), &version) ||
          !IsDirectory(*versions)) {
        continue;  // ".3.tmp", serving.pbtxt, notes: not versions
      }
      const std::string dir = versions->path().string();
      const uint64_t fingerprint = DirectoryFingerprint(dir);
      if (fingerprint == 0) continue;  // removed or unreadable since listed
      out.versions[version] = VersionOnDisk{dir, fingerprint};
    }
  }
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(root, ": cannot list: ", ec.message()));
  }
  return scan;
}

}  // namespace rankd::server
