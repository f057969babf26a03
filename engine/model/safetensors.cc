// safetensors reader: reads and validates the header with pread, then reads
// tensor bytes on demand into the caller's memory. It never maps the file: a
// mapping would tie what a model serves to the file (a truncated file faults
// with SIGBUS, an overwritten one changes scores), while a read is a copy,
// and a file that changes under a read is an error, never a crash.
#include "engine/model/safetensors.h"

#include <fcntl.h>
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
#include "absl/strings/string_view.h"
#include "engine/model/error_text.h"
#include "engine/model/regular_file.h"
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

// The Rust safetensors crate refuses headers larger than this; so does
// rankd, so a corrupt length never makes it allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// pread until `bytes` are read, the file ends or a read fails; *got = bytes
// read. Returns errno of the failed read, 0 otherwise (EOF included).
int PreadFully(int fd, void* dst, int64_t bytes, int64_t offset,
               int64_t* got) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  *got = 0;
  while (*got < bytes) {
    // Linux moves at most 0x7ffff000 bytes a call: ask for at most 1 GiB.
    const size_t want =
        static_cast<size_t>(std::min<int64_t>(bytes - *got, int64_t{1} << 30));
    const ssize_t n = pread(fd, p + *got, want, offset + *got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;  // end of file
    *got += n;
  }
  return 0;
}

// Reads exactly `bytes` at `offset`. A file that ends early has changed
// since it was opened (its size was checked then): DATA_LOSS, as is a failed
// read (EIO). `what` names the part: "the header", "tensor 'x'".
absl::Status ReadExactly(const std::string& path, const std::string& what,
                         int fd, void* dst, int64_t bytes, int64_t offset) {
  int64_t got = 0;
  if (const int err = PreadFully(fd, dst, bytes, offset, &got); err != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", what, ": cannot read ", bytes,
                     " bytes at file offset ", offset, ": ", strerror(err)));
  }
  if (got < bytes) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", what, ": file changed or truncated while loading (got ",
        got, " of ", bytes, " bytes at file offset ", offset, ")"));
  }
  return absl::OkStatus();
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// A name from the header, as error messages quote it (at most
// kMaxQuotedBytes: a crafted file may hold megabyte-long names).
std::string Name(absl::string_view name) { return TruncateForError(name); }

// A JSON value from the header, as error messages quote it: compact and at
// most kMaxQuotedBytes. Recursion in dump() is bounded because the header's
// nesting was checked before it was parsed (CheckJsonDepth).
std::string Quote(const json& value) { return TruncateForError(value.dump()); }

absl::Status TensorError(const std::string& path, const std::string& name,
                         const std::string& what) {
  return Invalid(path, absl::StrCat("tensor '", Name(name), "': ", what));
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
                                    Quote(*it)));
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
                                        Quote(*it)));
      }
      out->push_back(s);
    } else {
      return TensorError(path, name,
                         absl::StrCat("\"", key, "\" must hold integers, got ",
                                      Quote(v)));
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
                                    Quote(entry)));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return TensorError(path, name, "missing or non-string \"dtype\"");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  std::optional<TensorDtype> dtype = ParseDtype(dtype_name);
  if (!dtype) {
    return TensorError(path, name,
                       absl::StrCat("unknown dtype \"", Name(dtype_name),
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
                                      Quote(meta)));
  }
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (!it.value().is_string()) {
      return Invalid(path, absl::StrCat("\"__metadata__\" value of \"",
                                        Name(it.key()),
                                        "\" must be a string, got ",
                                        Quote(it.value())));
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
          path, absl::StrCat("tensors '", Name(prev.name), "' (bytes ", prev.begin,
                             "..", prev.end, ") and '", Name(cur.name), "' (bytes ",
                             cur.begin, "..", cur.end, ") overlap"));
    }
  }
  return absl::OkStatus();
}

// The JSON text of the header: the 8-byte little-endian length, then that
// many bytes, both read with pread. `file_size` is the size at open.
absl::Status ReadHeaderText(const std::string& path, int fd, int64_t file_size,
                            std::string* header) {
  uint8_t len_bytes[8];
  if (absl::Status s =
          ReadExactly(path, "the header length", fd, len_bytes, 8, 0);
      !s.ok()) {
    return s;
  }
  const uint64_t header_len = ReadLe64(len_bytes);
  if (header_len > static_cast<uint64_t>(file_size - 8)) {
    return Invalid(path, absl::StrCat("header length ", header_len,
                                      " is beyond the file: only ",
                                      file_size - 8,
                                      " bytes follow the 8-byte length "
                                      "(truncated or not a safetensors file?)"));
  }
  if (header_len > kMaxHeaderBytes) {
    return Invalid(path, absl::StrCat("header length ", header_len,
                                      " is over the format's limit of ",
                                      kMaxHeaderBytes,
                                      " bytes (not a safetensors file?)"));
  }
  header->resize(static_cast<size_t>(header_len));
  return ReadExactly(path, "the header", fd, header->data(),
                     static_cast<int64_t>(header_len), 8);
}

// Refuses a header whose arrays and objects nest deeper than
// kSafetensorsMaxJsonDepth, before it is parsed: turning a deep value into
// text (dump) recurses once per level, so an array nested 100,000 deep in a
// 200 KB header overflowed the stack in an error path (SIGSEGV). A scan of
// the text that skips strings (with their escapes) finds the depth without
// recursing; malformed JSON is left to the parser.
absl::Status CheckJsonDepth(const std::string& path, absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kSafetensorsMaxJsonDepth) {
        return Invalid(path, absl::StrCat(
            "header nests arrays and objects more than ",
            kSafetensorsMaxJsonDepth, " levels deep (at byte ", i,
            " of the header; the limit is ", kSafetensorsMaxJsonDepth,
            ", a safetensors header needs 3): not a safetensors file?"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

// Checks every entry of the parsed header against the data section
// [data_start, data_start + data_size) of the file and fills `tensors` and
// `metadata`.
absl::Status ParseHeader(const std::string& path, const json& root,
                         int64_t data_start, int64_t data_size,
                         std::map<std::string, TensorInfo>* tensors,
                         std::map<std::string, std::string>* metadata) {
  if (!root.is_object()) {
    return Invalid(path, absl::StrCat("header must be a JSON object, got ",
                                      root.type_name()));
  }
  std::vector<ParsedEntry> entries;
  entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (absl::Status s = ParseMetadata(path, it.value(), metadata); !s.ok()) {
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
    e.info.name = e.name;
    e.info.file_offset = data_start + e.begin;
    tensors->emplace(e.name, std::move(e.info));
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
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  // A FIFO or a device is refused before anything is read from it (a FIFO
  // blocked the load forever; /dev/zero would never end).
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  // From here the file object owns the descriptor, so every return closes it.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->fd_ = *fd;
  const int64_t file_size = st.st_size;
  if (file_size < 8) {
    return Invalid(path, absl::StrCat("file is ", file_size,
                                      " bytes, shorter than the 8-byte header "
                                      "length (truncated?)"));
  }

  std::string header;
  if (absl::Status s = ReadHeaderText(path, *fd, file_size, &header); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckJsonDepth(path, header); !s.ok()) return s;
  json root;
  try {
    root = json::parse(header.begin(), header.end());
  } catch (const json::exception& e) {
    // Kept inside: exceptions never cross into callers (DESIGN.md). The
    // parser's message quotes the last token read, which can be the whole
    // header: bounded like any quoted text.
    return Invalid(path, absl::StrCat("header is not valid JSON: ",
                                      TruncateForError(e.what(), 2 * kMaxQuotedBytes)));
  }
  const int64_t data_start = 8 + static_cast<int64_t>(header.size());
  if (absl::Status s = ParseHeader(path, root, data_start,
                                   file_size - data_start, &file->tensors_,
                                   &file->metadata_);
      !s.ok()) {
    return s;
  }
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

absl::Status SafetensorsFile::ReadTensor(const TensorInfo& t,
                                         int64_t byte_offset, int64_t bytes,
                                         void* dst) const {
  if (byte_offset < 0 || bytes < 0 || byte_offset > t.size_bytes ||
      bytes > t.size_bytes - byte_offset) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": tensor '", Name(t.name), "': cannot read ", bytes,
                     " bytes at byte ", byte_offset, " of a ", t.size_bytes,
                     "-byte tensor"));
  }
  if (bytes == 0) return absl::OkStatus();
  return ReadExactly(path_, absl::StrCat("tensor '", Name(t.name), "'"), fd_, dst,
                     bytes, t.file_offset + byte_offset);
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
