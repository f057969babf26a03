// A small, strict reader of embedding delta files (rankctl update --input):
// a safetensors file (https://github.com/huggingface/safetensors: an 8-byte
// little-endian header length N, N bytes of JSON, then the data) holding, per
// table,
//   <table>.ids     I64 [n]          row indices or keys to write
//   <table>.rows    F32|F16|BF16 [n, dim]   their rows
//   <table>.delete  I64 [m]          optional: keys to delete
// One or more tables per file; "__metadata__" is allowed and ignored.
// Anything else is an error naming the tensor and the reason: a header that
// is too large (> 100 MiB), not JSON or not an object; an unknown dtype or
// tensor name; a shape that does not match its dtype's rank or the byte range;
// data offsets outside the file or overlapping; `.rows` without `.ids` (or
// the other way round); ids and rows of different lengths. Never crashes on a
// hostile file (sizes are overflow-checked, JSON nesting is bounded).
#ifndef RANKD_CLIENT_SAFETENSORS_DELTA_H_
#define RANKD_CLIENT_SAFETENSORS_DELTA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/embedding_update.h"

namespace rankd::client {

// Largest JSON header accepted (the safetensors library's own limit).
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100 << 20;

// The tables of a delta file's bytes, by table name. `name` (the file's
// path) prefixes every error. INVALID_ARGUMENT for a malformed file.
absl::StatusOr<std::vector<TableDelta>> ParseDelta(absl::string_view bytes,
                                                   absl::string_view name);

// Reads `path` and parses it: NOT_FOUND / PERMISSION_DENIED-like errors
// (with the path) when it cannot be read.
absl::StatusOr<std::vector<TableDelta>> ReadDeltaFile(const std::string& path);

// A safetensors file of `tables` (the inverse of ParseDelta), for tests and
// tools.
std::string WriteDelta(const std::vector<TableDelta>& tables);

}  // namespace rankd::client

#endif  // RANKD_CLIENT_SAFETENSORS_DELTA_H_
