// safetensors writer (model generation, tests, tools). Streams tensor bytes so
// a multi-GB table never has to exist twice in memory.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/safetensors.h"
#include "nlohmann/json.hpp"

namespace rankd::engine {
namespace {

// `fill` callbacks see chunks of at most this many bytes (a multiple of every
// dtype size, so a chunk never splits an element).
constexpr int64_t kFillChunkBytes = int64_t{64} << 20;

absl::Status IoError(const std::string& path, const char* what) {
  return absl::InternalError(
      absl::StrCat(path, ": ", what, " failed: ", strerror(errno)));
}

absl::StatusOr<int64_t> TensorBytes(const TensorToWrite& t) {
  __int128 n = TensorDtypeBytes(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "': negative dimension ", d));
    }
    n *= d;
    if (n > std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "': too large"));
    }
  }
  return static_cast<int64_t>(n);
}

absl::Status WriteAll(std::FILE* f, const std::string& path, const void* data,
                      int64_t size) {
  if (size > 0 && std::fwrite(data, 1, static_cast<size_t>(size), f) !=
                      static_cast<size_t>(size)) {
    return IoError(path, "write");
  }
  return absl::OkStatus();
}

// The tensors in layout order: decreasing element size (stable, so equal
// sizes keep the caller's order). Tensors must be contiguous for the
// safetensors Python package (it rejects gaps), and with this order every
// tensor still starts at a multiple of its element size, given the 8-byte
// aligned data start. The Python writer uses the same rule. Rejects empty,
// reserved and repeated names and a tensor with both data and fill.
absl::StatusOr<std::vector<const TensorToWrite*>> LayoutOrder(
    const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<const TensorToWrite*> order;
  std::set<std::string> names;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid tensor name '", t.name, "'"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": duplicate tensor name '", t.name, "'"));
    }
    if (t.data != nullptr && t.fill) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", t.name, "': set either data or fill, not both"));
    }
    order.push_back(&t);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const TensorToWrite* a, const TensorToWrite* b) {
                     return TensorDtypeBytes(a->dtype) > TensorDtypeBytes(b->dtype);
                   });
  return order;
}

// The header of tensors laid out in `order`, and what writing their data needs.
struct Header {
  std::string text;            // JSON, padded with spaces to a multiple of 8 bytes
  std::vector<int64_t> sizes;  // bytes of each tensor, in layout order
  int64_t max_fill_bytes = 0;  // largest tensor written through `fill`
};

absl::StatusOr<Header> MakeHeader(const std::string& path,
                                  const std::vector<const TensorToWrite*>& order,
                                  const std::map<std::string, std::string>& metadata) {
  Header h;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  int64_t offset = 0;
  for (const TensorToWrite* t : order) {
    absl::StatusOr<int64_t> size = TensorBytes(*t);
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", size.status().message()));
    }
    if (*size > 0 && t->data == nullptr && !t->fill) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", t->name, "': neither data nor fill given"));
    }
    if (t->fill) h.max_fill_bytes = std::max(h.max_fill_bytes, *size);
    header[t->name] = {{"dtype", TensorDtypeName(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + *size}}};
    h.sizes.push_back(*size);
    offset += *size;
  }
  h.text = header.dump();
  // Spaces are valid JSON whitespace; they make the data section start on an
  // 8-byte boundary of the file (other readers, e.g. the Python package,
  // map it and read tensors in place).
  h.text.append((8 - h.text.size() % 8) % 8, ' ');
  return h;
}

// Writes the 8-byte length, the header and every tensor's bytes to f.
absl::Status WriteContents(std::FILE* f, const std::string& path,
                           const std::vector<const TensorToWrite*>& order, const Header& h) {
  uint8_t len_bytes[8];
  const uint64_t len = h.text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(len >> (8 * i));
  if (absl::Status s = WriteAll(f, path, len_bytes, 8); !s.ok()) return s;
  if (absl::Status s = WriteAll(f, path, h.text.data(), h.text.size()); !s.ok()) return s;
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(h.max_fill_bytes, kFillChunkBytes)));
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorToWrite& t = *order[i];
    const int64_t size = h.sizes[i];
    if (!t.fill) {
      if (absl::Status s = WriteAll(f, path, t.data, size); !s.ok()) return s;
      continue;
    }
    for (int64_t done_bytes = 0; done_bytes < size;) {
      const int64_t n = std::min(kFillChunkBytes, size - done_bytes);
      absl::Span<uint8_t> span(chunk.data(), static_cast<size_t>(n));
      t.fill(done_bytes, span);
      if (absl::Status s = WriteAll(f, path, span.data(), n); !s.ok()) return s;
      done_bytes += n;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::vector<const TensorToWrite*>> order = LayoutOrder(path, tensors);
  if (!order.ok()) return order.status();
  absl::StatusOr<Header> header = MakeHeader(path, *order, metadata);
  if (!header.ok()) return header.status();

  // Written beside the target and renamed: readers (a server polling the model
  // root) never see a half-written file.
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return IoError(tmp, "open");
  bool done = false;
  absl::Cleanup cleanup = [&] {
    if (f != nullptr) std::fclose(f);
    if (!done) std::remove(tmp.c_str());
  };
  if (absl::Status s = WriteContents(f, tmp, *order, *header); !s.ok()) return s;
  if (std::fflush(f) != 0) return IoError(tmp, "flush");
  // Durable before the rename, or a crash could leave an empty file under the
  // final name.
  if (fsync(fileno(f)) != 0) return IoError(tmp, "fsync");
  const int close_rc = std::fclose(f);
  f = nullptr;
  if (close_rc != 0) return IoError(tmp, "close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError(path, "rename");
  }
  done = true;
  return absl::OkStatus();
}

}  // namespace rankd::engine
