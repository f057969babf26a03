#include "client/safetensors_delta.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace rankd::client {
namespace {

using json = nlohmann::json;

// Deepest JSON nesting a valid header has: {"t": {"shape": [..]}} is 3.
constexpr int kMaxJsonDepth = 8;

struct Tensor {
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // in the data section
};

// The brackets outside strings never nest deeper than kMaxJsonDepth, so
// parsing (and destroying) the JSON stays shallow whatever the file holds.
bool ShallowEnough(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

int64_t DtypeSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status TensorError(absl::string_view file, absl::string_view tensor,
                         absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor \"", tensor, "\": ", why));
}

// One header entry, checked against the data section's size.
absl::StatusOr<Tensor> ParseTensor(absl::string_view file, const std::string& name,
                                   const json& entry, int64_t data_bytes) {
  if (!entry.is_object()) return TensorError(file, name, "header entry is not an object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return TensorError(file, name, absl::StrCat("unknown header field \"", key, "\""));
    }
  }
  Tensor t;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return TensorError(file, name, "no \"dtype\" string");
  }
  t.dtype = dtype->get<std::string>();
  const int64_t elem = DtypeSize(t.dtype);
  if (elem == 0) return TensorError(file, name, absl::StrCat("unknown dtype \"", t.dtype, "\""));
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array() || shape->size() > 8) {
    return TensorError(file, name, "no \"shape\" array (of at most 8 dimensions)");
  }
  int64_t elements = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return TensorError(file, name, "shape holds something other than sizes >= 0");
    }
    const int64_t size = d.get<int64_t>();
    if (size > 0 && elements > (INT64_MAX / 8) / size) {
      return TensorError(file, name, "shape too large");
    }
    elements *= size;
    t.shape.push_back(size);
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_integer() || !(*offsets)[1].is_number_integer()) {
    return TensorError(file, name, "no \"data_offsets\" [begin, end]");
  }
  t.begin = (*offsets)[0].get<int64_t>();
  t.end = (*offsets)[1].get<int64_t>();
  if (t.begin < 0 || t.end < t.begin || t.end > data_bytes) {
    return TensorError(file, name,
                       absl::StrCat("data_offsets [", t.begin, ", ", t.end,
                                    "] are outside the file's data (", data_bytes, " bytes)"));
  }
  if (t.end - t.begin != elements * elem) {
    return TensorError(file, name,
                       absl::StrCat(t.dtype, " ", ShapeText(t.shape), " is ", elements * elem,
                                    " bytes, but data_offsets span ", t.end - t.begin));
  }
  return t;
}

std::vector<int64_t> Int64s(absl::string_view data, const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>((t.end - t.begin) / 8));
  if (!out.empty()) std::memcpy(out.data(), data.data() + t.begin, out.size() * 8);
  return out;
}

void AppendU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The header of a safetensors file `name`: its tensors, checked (entries,
// bounds in the data section, no two sharing bytes); *data: the data section.
absl::StatusOr<std::map<std::string, Tensor>> ParseTensors(absl::string_view bytes,
                                                           absl::string_view name,
                                                           absl::string_view* data) {
  if (bytes.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": not a safetensors file: ", bytes.size(), " bytes, shorter than its header length"));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes = (header_bytes << 8) | static_cast<unsigned char>(bytes[i]);
  }
  if (header_bytes > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": header length ", header_bytes,
                                                   " is over the limit of ",
                                                   kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_bytes > bytes.size() - 8) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": header length ", header_bytes,
                                                   " runs past the end of the file (",
                                                   bytes.size(), " bytes)"));
  }
  const absl::string_view header_text = bytes.substr(8, header_bytes);
  *data = bytes.substr(8 + header_bytes);
  if (!ShallowEnough(header_text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": header: JSON nested deeper than ", kMaxJsonDepth));
  }
  json header = json::parse(header_text.begin(), header_text.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": header is not valid JSON"));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": header is not a JSON object"));
  }

  std::map<std::string, Tensor> tensors;
  for (const auto& [tensor_name, entry] : header.items()) {
    if (tensor_name == "__metadata__") {
      if (!entry.is_object()) {
        return TensorError(name, tensor_name, "must be an object of strings");
      }
      continue;
    }
    auto t = ParseTensor(name, tensor_name, entry, static_cast<int64_t>(data->size()));
    if (!t.ok()) return t.status();
    tensors.emplace(tensor_name, std::move(*t));
  }
  // No two tensors share bytes.
  std::vector<std::pair<const Tensor*, const std::string*>> by_offset;
  for (const auto& [n, t] : tensors) {
    if (t.end > t.begin) by_offset.push_back({&t, &n});
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.first->begin < b.first->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i].first->begin < by_offset[i - 1].first->end) {
      return TensorError(name, *by_offset[i].second,
                         absl::StrCat("data overlaps tensor \"", *by_offset[i - 1].second, "\""));
    }
  }

  return tensors;
}

// The tensors grouped by table (<table>.ids / .rows / .delete), each group
// checked: ids and rows together, as many rows as ids, known dtypes.
absl::StatusOr<std::vector<TableDelta>> GroupByTable(absl::string_view name,
                                                     const std::map<std::string, Tensor>& tensors,
                                                     absl::string_view data) {
  std::map<std::string, TableDelta> tables;
  std::map<std::string, const Tensor*> rows_of;
  for (const auto& [tensor_name, t] : tensors) {
    const size_t dot = tensor_name.rfind('.');
    const std::string table = dot == std::string::npos ? "" : tensor_name.substr(0, dot);
    const std::string part = dot == std::string::npos ? "" : tensor_name.substr(dot + 1);
    if (table.empty() || (part != "ids" && part != "rows" && part != "delete")) {
      return TensorError(name, tensor_name,
                         "not <table>.ids, <table>.rows or <table>.delete");
    }
    TableDelta& delta = tables[table];
    delta.table = table;
    if (part == "ids" || part == "delete") {
      if (t.dtype != "I64" || t.shape.size() != 1) {
        return TensorError(name, tensor_name,
                           absl::StrCat("must be I64 [n], got ", t.dtype, " ", ShapeText(t.shape)));
      }
      (part == "ids" ? delta.ids : delta.delete_keys) = Int64s(data, t);
    } else {
      if (t.dtype == "F32") {
        delta.dtype = RowDtype::kF32;
      } else if (t.dtype == "F16") {
        delta.dtype = RowDtype::kF16;
      } else if (t.dtype == "BF16") {
        delta.dtype = RowDtype::kBF16;
      } else {
        return TensorError(name, tensor_name,
                           absl::StrCat("dtype ", t.dtype, ": rows must be F32, F16 or BF16"));
      }
      if (t.shape.size() != 2 || t.shape[1] < 1) {
        return TensorError(name, tensor_name,
                           absl::StrCat("must be [n, dim] with dim >= 1, got ", ShapeText(t.shape)));
      }
      delta.dim = t.shape[1];
      delta.row_bytes = std::string(data.substr(t.begin, t.end - t.begin));
      rows_of[table] = &t;
    }
  }
  std::vector<TableDelta> out;
  for (auto& [table, delta] : tables) {
    const bool has_ids = tensors.count(table + ".ids") > 0;
    auto rows = rows_of.find(table);
    if (rows != rows_of.end() && !has_ids) {
      return TensorError(name, table + ".rows", absl::StrCat("no \"", table, ".ids\" for it"));
    }
    if (rows == rows_of.end() && has_ids) {
      return TensorError(name, table + ".ids", absl::StrCat("no \"", table, ".rows\" for it"));
    }
    if (rows != rows_of.end() &&
        rows->second->shape[0] != static_cast<int64_t>(delta.ids.size())) {
      return TensorError(name, table + ".rows",
                         absl::StrCat(ShapeText(rows->second->shape), " rows for ",
                                      delta.ids.size(), " ids in \"", table, ".ids\""));
    }
    out.push_back(std::move(delta));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": no tables (want <table>.ids, <table>.rows, <table>.delete)"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<TableDelta>> ParseDelta(absl::string_view bytes,
                                                   absl::string_view name) {
  absl::string_view data;
  absl::StatusOr<std::map<std::string, Tensor>> tensors = ParseTensors(bytes, name, &data);
  if (!tensors.ok()) return tensors.status();
  return GroupByTable(name, *tensors, data);
}

absl::StatusOr<std::vector<TableDelta>> ReadDeltaFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  const std::string bytes = std::move(buffer).str();
  return ParseDelta(bytes, path);
}

std::string WriteDelta(const std::vector<TableDelta>& tables) {
  json header = json::object();
  std::string data;
  auto add = [&](const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                 const char* bytes, size_t size) {
    header[name] = {{"dtype", dtype},
                    {"shape", shape},
                    {"data_offsets", {data.size(), data.size() + size}}};
    data.append(bytes, size);
  };
  for (const TableDelta& t : tables) {
    if (!t.ids.empty() || !t.row_bytes.empty()) {
      add(t.table + ".ids", "I64", {static_cast<int64_t>(t.ids.size())},
          reinterpret_cast<const char*>(t.ids.data()), t.ids.size() * 8);
      add(t.table + ".rows", std::string(RowDtypeName(t.dtype)),
          {static_cast<int64_t>(t.ids.size()), t.dim}, t.row_bytes.data(), t.row_bytes.size());
    }
    if (!t.delete_keys.empty()) {
      add(t.table + ".delete", "I64", {static_cast<int64_t>(t.delete_keys.size())},
          reinterpret_cast<const char*>(t.delete_keys.data()), t.delete_keys.size() * 8);
    }
  }
  std::string text = header.dump();
  std::string out;
  AppendU64(text.size(), &out);
  out += text;
  out += data;
  return out;
}

}  // namespace rankd::client
