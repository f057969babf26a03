// The model repository on disk: `<root>/<name>/<version>/` directories
// (Triton / TF Serving layout) and each model's optional serving.pbtxt, read
// into a snapshot the ModelManager reconciles with what it serves.
//
// Publishing protocol: names starting with '.' are ignored, so a publisher
// writes `<root>/<name>/.<version>.tmp/` and renames it to `<version>` once
// complete; a scan never sees a half-written version that way.
//
// Each version carries a fingerprint of its files (names, sizes, mtimes), so a
// version whose load failed is retried only once its files change.
#ifndef RANKD_SERVER_LIFECYCLE_MODEL_REPOSITORY_H_
#define RANKD_SERVER_LIFECYCLE_MODEL_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "rankd/v1/model_serving.pb.h"

namespace rankd::server {

struct VersionOnDisk {
  std::string directory;
  // Hash of (file name, size, mtime) of every entry of the directory (not
  // recursive); 0 never occurs for a readable directory.
  uint64_t fingerprint = 0;
};

struct ModelOnDisk {
  std::map<int64_t, VersionOnDisk> versions;
  // serving.pbtxt: present, parsed config (when it parsed), the error
  // (when it did not), and its fingerprint (0 = no file).
  bool has_serving_config = false;
  rankd::v1::ModelServingConfig serving_config;
  std::string serving_config_error;
  uint64_t serving_config_fingerprint = 0;
};

// name -> model. Models with no version directory are listed too (with an
// empty `versions`), so a serving.pbtxt error shows before the first version.
using RepositoryScan = std::map<std::string, ModelOnDisk>;

// Scans `root`. Errors only for the root itself (missing, not a directory,
// unreadable), naming it; unreadable model directories are skipped.
// Version directory names are positive decimals without leading zeros.
absl::StatusOr<RepositoryScan> ScanRepository(const std::string& root);

// Fingerprint of one directory's entries (0 when it cannot be listed).
uint64_t DirectoryFingerprint(const std::string& directory);

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_MODEL_REPOSITORY_H_
