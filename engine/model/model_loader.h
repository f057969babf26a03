// Loads model versions from disk: `<dir>/model.pbtxt` (text rankd.v1.ModelConfig)
// and `<dir>/weights.safetensors` (tensors named as in docs/model-format.md).
// Every problem is an absl::Status that names the file, the field or tensor,
// and what was expected.
#ifndef RANKD_ENGINE_MODEL_MODEL_LOADER_H_
#define RANKD_ENGINE_MODEL_MODEL_LOADER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/model/model.h"
#include "engine/serving/clock.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Largest model.pbtxt ReadModelConfig reads (a config of thousands of tables
// is well under 1 MiB): a bigger file is refused before it is read.
inline constexpr int64_t kMaxModelConfigBytes = int64_t{16} << 20;

// Parses text-format `path` into a config, fills defaults and validates it
// (ValidateModelConfig). INVALID_ARGUMENT with "<path>:<line>:<col>: ..." for a
// syntax error, or "<path>: <field>: <reason>" for a semantic one; for a
// path that is not a regular file (a FIFO is never opened for reading: see
// regular_file.h) or is over kMaxModelConfigBytes.
absl::StatusOr<rankd::v1::ModelConfig> ReadModelConfig(const std::string& path);

// ReadModelConfig's work after the file is read: parses `text` (a
// model.pbtxt's contents), fills defaults and validates it. Errors are
// prefixed with `source` as ReadModelConfig prefixes them with the path.
// The size limit is the caller's (ReadModelConfig: kMaxModelConfigBytes).
absl::StatusOr<rankd::v1::ModelConfig> ParseModelConfig(absl::string_view text,
                                                        const std::string& source);

// Fills defaults (documented in model_config.proto) and checks the config on
// its own: unique names, widths > 0, features name known tables, DOT/DCN_V2
// dims agree, top MLP ends in 1, etc. Errors name the field, e.g.
// "tables[2].dim: must be > 0, got 0".
absl::Status ValidateModelConfig(rankd::v1::ModelConfig* config);

struct LoadOptions {
  // Threads that fill RANDOM tables, read FILE tables and build hash tables;
  // 0 = every hardware thread (loading is the only thing a starting server
  // does).
  int num_threads = 0;
  // Receives human-readable lines, one call per line, never two at once:
  // progress of big table phases ("loading mlperf v1 table t0 (random rows):
  // 42% (3.10 / 7.40 GB) 5.20 GB/s ETA 0.8 s", at most one per
  // `progress_interval` per phase, plus one when the phase ends) and one
  // summary line per model (bytes, seconds and GB/s per source; only for
  // models whose tables hold at least `progress_min_bytes`). Empty =
  // silent. `rankd serve` logs them at info level.
  std::function<void(const std::string& line)> log;
  // Table phases smaller than this (rows bytes; hash-table bytes for a hash
  // build) print no progress lines, so small models load quietly.
  int64_t progress_min_bytes = int64_t{256} << 20;
  absl::Duration progress_interval = absl::Seconds(2);
  // Time source for progress lines and Model::load_stats; nullptr = the
  // real clock. Tests inject a FakeClock.
  const Clock* clock = nullptr;
  // MemAvailable (bytes) to check the model's host memory against before
  // allocating anything; -1 = read /proc/meminfo. Tests inject a number.
  int64_t mem_available_bytes = -1;
  // false: DYNAMIC tables keep their keys (EmbeddingTable::keys) but get no
  // host hash table (EmbeddingTable::hash stays empty): for a server that
  // only computes on the GPU, which builds its device table from the keys
  // (kernels/cuda/hash_build.h, ~1 G keys/s against ~0.2 G on the host).
  // The CPU engine needs them: keep true for it. Tables with id_policy ERROR
  // always get one (request validation looks keys up on the host).
  bool build_hash_tables = true;
  // Borrowed; null = the load cannot be cancelled. Once it reads true the
  // load stops at its next check (between tables and dense layers, and
  // before every 8 MiB chunk of rows or keys read or generated; a hash
  // build runs to its end first), frees what it allocated and returns
  // CANCELLED naming the model. `rankd serve` sets it on SIGTERM / SIGINT.
  const std::atomic<bool>* cancel = nullptr;
};

// Loads one version directory. `expected_name` (if not empty) must equal the
// config's name. FILE tables' rows and keys are read from the file into host
// memory of the model's own (anonymous, 2 MiB aligned, writable, pinnable);
// RANDOM tables are generated (docs/model-format.md). The returned Model
// never depends on the directory's files again: overwriting, truncating or
// deleting them changes nothing it serves. A file that changes while it is
// being read fails the load (DATA_LOSS naming the file and tensor). Before
// any table memory is allocated, the host bytes the load needs (rows and
// keys, generated or read, hash tables, dense weights) are checked against
// MemAvailable: RESOURCE_EXHAUSTED naming the model, the bytes needed and
// available. Every value read is checked: a NaN or Inf in a FILE table's
// rows (INVALID_ARGUMENT naming the file, tensor, table, row and element)
// or in an MLP / cross-layer tensor (naming the tensor, row and column)
// fails the load, since it would make scores NaN.
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version = 0,
    const std::string& expected_name = "");
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version,
    const std::string& expected_name, const LoadOptions& options);

// One progress line, as LoadOptions::log receives it. `unit` is "B" (shown
// in GB, 1e9) or "keys" (shown in M keys); `done` == `total` gives the end
// line ("... 100% (7.4 GB) in 1.4 s, 5.2 GB/s").
std::string FormatLoadProgress(const std::string& model, int64_t version,
                               const std::string& table,
                               const std::string& phase, const char* unit,
                               int64_t done, int64_t total,
                               absl::Duration elapsed);


}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_LOADER_H_
