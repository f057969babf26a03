// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {...}}, then the tensor bytes.
// The reader maps the file read-only and checks every entry: dtype known,
// shape non-negative, byte size = product(shape) * dtype size, offsets inside
// the data section, no two tensors overlapping.
#ifndef RANKD_ENGINE_MODEL_SAFETENSORS_H_
#define RANKD_ENGINE_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace rankd::engine {

enum class TensorDtype { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "I64", ... as written in safetensors headers.
const char* TensorDtypeName(TensorDtype d);
int TensorDtypeBytes(TensorDtype d);

struct TensorInfo {
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t size_bytes = 0;
};

// Read-only mapping of one file. Thread-safe after Open (immutable).
class SafetensorsFile {
 public:
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(
      const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // nullptr if absent.
  const TensorInfo* Find(const std::string& name) const;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Checks dtype and shape of a present tensor; NOT_FOUND if absent.
  // Messages: "<path>: tensor 'bot_l.0.weight': expected shape [512, 13], got [512, 12]".
  absl::StatusOr<const TensorInfo*> Get(const std::string& name,
                                        TensorDtype dtype,
                                        absl::Span<const int64_t> shape) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  int64_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors atomically: to `path.tmp`, then renamed. The data section
// starts 8-byte aligned and tensors are packed without gaps (the safetensors
// Python package rejects gaps) in order of decreasing element size, ties in
// the order given, so each tensor is aligned to its element size.
// A tensor comes either from `data` or, for tensors too big to hold in memory
// twice (full-size tables), from `fill`, which is called with consecutive
// chunks (byte offset into the tensor, chunk to fill) until the tensor is done.
struct TensorToWrite {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // product(shape) * dtype size bytes
  std::function<void(int64_t byte_offset, absl::Span<uint8_t> chunk)> fill;
};
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_SAFETENSORS_H_
