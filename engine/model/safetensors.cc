// safetensors reader: maps the file read-only and validates the header before
// handing out any pointer into it, so a corrupt or truncated file is an error
// at load time instead of a crash (or silent garbage) while serving.
#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace rankd::engine {
namespace {

using json = nlohmann::json;

struct DtypeEntry {
  TensorDtype dtype;
  const char* name;
  int bytes;
};

// The dtypes of the safetensors spec that rankd can meet in a model file.
constexpr DtypeEntry kDtypes[] = {
    {TensorDtype::kF32, "F32", 4},   {TensorDtype::kF16, "F16", 2},
    {TensorDtype::kBF16, "BF16", 2}, {TensorDtype::kF64, "F64", 8},
    {TensorDtype::kI64, "I64", 8},   {TensorDtype::kI32, "I32", 4},
    {TensorDtype::kI16, "I16", 2},   {TensorDtype::kI8, "I8", 1},
    {TensorDtype::kU8, "U8", 1},     {TensorDtype::kBool, "BOOL", 1},
};

std::optional<TensorDtype> ParseDtype(const std::string& name) {
  for (const DtypeEntry& e : kDtypes) {
    if (name == e.name) return e.dtype;
  }
  return std::nullopt;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The header is little-endian whatever the host is.
uint64_t ReadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status TensorError(const std::string& path, const std::string& name,
                         const std::string& what) {
  return Invalid(path, absl::StrCat("tensor '", name, "': ", what));
}

// Reads a JSON array of non-negative integers (shape or data_offsets).
absl::Status ReadIntArray(const std::string& path, const std::string& name,
                          const json& entry, const char* key,
                          std::vector<int64_t>* out) {
  auto it = entry.find(key);
  if (it == entry.end()) {
    return TensorError(path, name, absl::StrCat("missing \"", key, "\""));
  }
  if (!it->is_array()) {
    return TensorError(path, name,
                       absl::StrCat("\"", key, "\" must be an array of integers, got ",
                                    it->dump()));
  }
  out->clear();
  for (const json& v : *it) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return TensorError(path, name,
                           absl::StrCat("\"", key, "\" value ", u, " is too large"));
      }
      out->push_back(static_cast<int64_t>(u));
    } else if (v.is_number_integer()) {
      const int64_t s = v.get<int64_t>();
      if (s < 0) {
        return TensorError(path, name,
                           absl::StrCat("negative ", key, " value ", s, " in ",
                                        it->dump()));
      }
      out->push_back(s);
    } else {
      return TensorError(path, name,
                         absl::StrCat("\"", key, "\" must hold integers, got ",
                                      it->dump()));
    }
  }
  return absl::OkStatus();
}

// Number of bytes product(shape) * element_bytes, or nullopt on overflow.
std::optional<int64_t> ShapeBytes(absl::Span<const int64_t> shape,
                                  int element_bytes) {
  __int128 n = element_bytes;
  for (int64_t d : shape) {
    n *= d;
    if (n > std::numeric_limits<int64_t>::max()) return std::nullopt;
  }
  return static_cast<int64_t>(n);
}

struct ParsedEntry {
  std::string name;
  TensorInfo info;
  int64_t begin = 0;
  int64_t end = 0;
};

absl::Status ParseEntry(const std::string& path, const std::string& name,
                        const json& entry, int64_t data_size,
                        ParsedEntry* out) {
  if (!entry.is_object()) {
    return TensorError(path, name,
                       absl::StrCat("entry must be an object {dtype, shape, "
                                    "data_offsets}, got ",
                                    entry.dump()));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return TensorError(path, name, "missing or non-string \"dtype\"");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  std::optional<TensorDtype> dtype = ParseDtype(dtype_name);
  if (!dtype) {
    return TensorError(path, name,
                       absl::StrCat("unknown dtype \"", dtype_name,
                                    "\" (expected one of F32, F16, BF16, F64, "
                                    "I64, I32, I16, I8, U8, BOOL)"));
  }
  std::vector<int64_t> shape;
  if (absl::Status s = ReadIntArray(path, name, entry, "shape", &shape);
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> offsets;
  if (absl::Status s = ReadIntArray(path, name, entry, "data_offsets", &offsets);
      !s.ok()) {
    return s;
  }
  if (offsets.size() != 2 || offsets[0] > offsets[1]) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets must be [begin, end] with "
                                    "begin <= end, got ",
                                    ShapeString(offsets)));
  }
  const int elem = TensorDtypeBytes(*dtype);
  std::optional<int64_t> want = ShapeBytes(shape, elem);
  const int64_t have = offsets[1] - offsets[0];
  if (!want || *want != have) {
    return TensorError(
        path, name,
        absl::StrCat("data_offsets ", ShapeString(offsets), " span ", have,
                     " bytes, but ", dtype_name, " ", ShapeString(shape),
                     " needs ", want ? absl::StrCat(*want) : "more than 2^63",
                     " bytes"));
  }
  if (offsets[1] > data_size) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets ", ShapeString(offsets),
                                    " end beyond the data section of ",
                                    data_size, " bytes"));
  }
  out->name = name;
  out->info.dtype = *dtype;
  out->info.shape = std::move(shape);
  out->info.size_bytes = have;
  out->begin = offsets[0];
  out->end = offsets[1];
  return absl::OkStatus();
}

absl::Status ParseMetadata(const std::string& path, const json& meta,
                           std::map<std::string, std::string>* out) {
  if (!meta.is_object()) {
    return Invalid(path, absl::StrCat("\"__metadata__\" must be an object of "
                                      "strings, got ",
                                      meta.dump()));
  }
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (!it.value().is_string()) {
      return Invalid(path, absl::StrCat("\"__metadata__\" value of \"", it.key(),
                                        "\" must be a string, got ",
                                        it.value().dump()));
    }
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return absl::OkStatus();
}

// Tensors may not share bytes: a crafted file could otherwise alias a table
// with, e.g., its keys. Empty tensors occupy no bytes and are skipped.
absl::Status CheckNoOverlap(const std::string& path,
                            std::vector<const ParsedEntry*> entries) {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const ParsedEntry* e) {
                                 return e->begin == e->end;
                               }),
                entries.end());
  std::sort(entries.begin(), entries.end(),
            [](const ParsedEntry* a, const ParsedEntry* b) {
              return a->begin != b->begin ? a->begin < b->begin
                                          : a->name < b->name;
            });
  for (size_t i = 1; i < entries.size(); ++i) {
    const ParsedEntry& prev = *entries[i - 1];
    const ParsedEntry& cur = *entries[i];
    if (prev.end > cur.begin) {
      return Invalid(
          path, absl::StrCat("tensors '", prev.name, "' (bytes ", prev.begin,
                             "..", prev.end, ") and '", cur.name, "' (bytes ",
                             cur.begin, "..", cur.end, ") overlap"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* TensorDtypeName(TensorDtype d) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == d) return e.name;
  }
  return "?";
}

int TensorDtypeBytes(TensorDtype d) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == d) return e.bytes;
  }
  return 0;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(map_, static_cast<size_t>(map_size_));
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat(path, ": cannot open: ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(what)
                         : absl::FailedPreconditionError(what);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot stat: ", strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Invalid(path, "not a regular file");
  }
  const int64_t file_size = st.st_size;
  if (file_size < 8) {
    close(fd);
    return Invalid(path, absl::StrCat("file is ", file_size,
                                      " bytes, shorter than the 8-byte header "
                                      "length (truncated?)"));
  }
  void* map = mmap(nullptr, static_cast<size_t>(file_size), PROT_READ,
                   MAP_SHARED, fd, 0);
  const int map_err = errno;
  // The mapping keeps the file's pages reachable; the descriptor is not needed.
  close(fd);
  if (map == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": mmap of ", file_size,
                     " bytes failed: ", strerror(map_err)));
  }
  // From here the file object owns the mapping, so every return unmaps it.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = file_size;
  const uint8_t* bytes = static_cast<const uint8_t*>(map);

  const uint64_t header_len = ReadLe64(bytes);
  if (header_len > static_cast<uint64_t>(file_size - 8)) {
    return Invalid(path, absl::StrCat("header length ", header_len,
                                      " is beyond the file: only ",
                                      file_size - 8,
                                      " bytes follow the 8-byte length "
                                      "(truncated or not a safetensors file?)"));
  }
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  json root;
  try {
    root = json::parse(header, header + header_len);
  } catch (const json::exception& e) {
    // Kept inside: exceptions never cross into callers (DESIGN.md).
    return Invalid(path, absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return Invalid(path, absl::StrCat("header must be a JSON object, got ",
                                      root.type_name()));
  }

  const uint8_t* data = bytes + 8 + header_len;
  const int64_t data_size = file_size - 8 - static_cast<int64_t>(header_len);
  std::vector<ParsedEntry> entries;
  entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (absl::Status s = ParseMetadata(path, it.value(), &file->metadata_);
          !s.ok()) {
        return s;
      }
      continue;
    }
    ParsedEntry entry;
    if (absl::Status s = ParseEntry(path, it.key(), it.value(), data_size, &entry);
        !s.ok()) {
      return s;
    }
    entries.push_back(std::move(entry));
  }
  std::vector<const ParsedEntry*> ptrs;
  for (const ParsedEntry& e : entries) ptrs.push_back(&e);
  if (absl::Status s = CheckNoOverlap(path, std::move(ptrs)); !s.ok()) return s;

  for (ParsedEntry& e : entries) {
    e.info.data = data + e.begin;
    file->tensors_.emplace(e.name, std::move(e.info));
  }
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const TensorInfo*> SafetensorsFile::Get(
    const std::string& name, TensorDtype dtype,
    absl::Span<const int64_t> shape) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path_, ": tensor '", name, "' not found (expected ",
                     TensorDtypeName(dtype), " ", ShapeString(shape), ")"));
  }
  if (t->dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", name, "': expected dtype ", TensorDtypeName(dtype),
        ", got ", TensorDtypeName(t->dtype)));
  }
  if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": tensor '", name, "': expected shape ",
                     ShapeString(shape), ", got ", ShapeString(t->shape)));
  }
  return t;
}

}  // namespace rankd::engine
