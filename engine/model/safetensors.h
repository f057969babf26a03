// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {...}}, then the tensor bytes.
// The reader reads the header with pread (it never maps the file) and checks
// every entry: dtype known, shape non-negative, byte size = product(shape) *
// dtype size, offsets inside the data section, no two tensors overlapping.
// Only regular files are opened (a FIFO or a device would block the read or
// never end), and hostile headers fail cleanly: nesting is bounded
// (kSafetensorsMaxJsonDepth) and error messages quote at most
// kMaxQuotedBytes of any name or value (error_text.h).
// Tensor bytes are read on demand (ReadTensor) into memory the caller owns,
// so nothing read from the file can change or fault when the file is later
// overwritten, truncated or deleted.
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

// Deepest nesting of JSON arrays and objects a header may have. The format
// needs 3 (the header object, a tensor's entry, its shape); a deeper header
// is refused before it is parsed (INVALID_ARGUMENT naming the file and this
// limit), since handling a deep value recurses once per level.
inline constexpr int kSafetensorsMaxJsonDepth = 64;

struct TensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  // Absolute offset of the tensor's first byte in the file (8 + header
  // length + data_offsets[0]). Not necessarily aligned to the element size
  // (files from other writers may leave tensors unaligned).
  int64_t file_offset = 0;
  int64_t size_bytes = 0;
};

// One open safetensors file: its validated header and an open descriptor
// (O_CLOEXEC, closed by the destructor) to read tensor bytes from.
// Thread-safe after Open: ReadTensor uses pread, which has no shared file
// position, so threads may read different parts of one tensor at once.
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

  // Reads bytes [byte_offset, byte_offset + bytes) of tensor `t` (one of
  // this file's tensors()) into `dst`, retrying on EINTR and short reads.
  // OUT_OF_RANGE if the range is not inside the tensor; DATA_LOSS naming the
  // path and tensor if the file ends early ("file changed or truncated while
  // loading") or the read fails (EIO).
  absl::Status ReadTensor(const TensorInfo& t, int64_t byte_offset,
                          int64_t bytes, void* dst) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  int fd_ = -1;  // O_CLOEXEC; closed by the destructor
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
