#include "engine/updates/snapshot_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor_layout.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"

namespace rankd::engine {
namespace {

absl::Status IoError(const std::string& path, const char* what) {
  return absl::InternalError(absl::StrCat(path, ": ", what, " failed: ", strerror(errno)));
}

absl::Status PWriteAll(int fd, const std::string& path, const void* data, int64_t size,
                       int64_t offset) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = pwrite(fd, p, static_cast<size_t>(std::min<int64_t>(size, 1 << 30)), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path, "write");
    }
    p += n;
    size -= n;
    offset += n;
  }
  return absl::OkStatus();
}

absl::Status WriteSmallFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path, "create");
  absl::Cleanup closer = [fd] { close(fd); };
  if (absl::Status s = PWriteAll(fd, path, text.data(), text.size(), 0); !s.ok()) return s;
  if (fsync(fd) != 0) return IoError(path, "fsync");
  return absl::OkStatus();
}

// One tensor of the file: where its bytes go and where they come from.
struct Planned {
  std::string name;
  TensorDtype dtype;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  int64_t offset = 0;       // in the data section
  const void* data = nullptr;  // dense weights; null for table tensors
};

// The config the snapshot loads with.
rankd::v1::ModelConfig SnapshotConfig(const Model& model, const std::vector<int64_t>& keys) {
  rankd::v1::ModelConfig c = model.config;
  for (int t = 0; t < c.tables_size(); ++t) {
    rankd::v1::TableConfig* tc = c.mutable_tables(t);
    if (tc->kind() == rankd::v1::DYNAMIC) {
      // >= 1: WriteSnapshot refuses an empty table (num_rows must be > 0).
      tc->set_num_rows(keys[t]);
      tc->set_max_keys(std::max(model.tables[t].max_keys, keys[t]));
    }
    tc->mutable_init()->Clear();
    tc->mutable_init()->set_kind(rankd::v1::FILE);
  }
  return c;
}

// Every tensor of the file, in the layout's order; table_weight[t] /
// table_keys[t] index table t's rows / keys (-1: none).
struct SnapshotTensors {
  std::vector<Planned> tensors;
  std::vector<int> table_weight, table_keys;
};

SnapshotTensors PlanTensors(const Model& model, const ModelTensorLayout& layout) {
  SnapshotTensors out;
  std::vector<Planned>& plan = out.tensors;
  auto add = [&plan](const TensorSpec& spec, const void* data) {
    Planned p{spec.name, spec.dtype, spec.shape, TensorDtypeBytes(spec.dtype), 0, data};
    for (int64_t d : spec.shape) p.bytes *= d;
    plan.push_back(p);
  };
  out.table_weight.assign(model.tables.size(), -1);
  out.table_keys.assign(model.tables.size(), -1);
  for (size_t t = 0; t < model.tables.size(); ++t) {
    out.table_weight[t] = static_cast<int>(plan.size());
    add(layout.tables[t].weight, nullptr);
    if (layout.tables[t].keys) {
      out.table_keys[t] = static_cast<int>(plan.size());
      add(*layout.tables[t].keys, nullptr);
    }
  }
  auto add_linear = [&add](const LinearTensors& l, const Linear& w) {
    add(l.weight, w.weight.data());
    add(l.bias, w.bias.data());
  };
  for (size_t i = 0; i < layout.bottom.size(); ++i) add_linear(layout.bottom[i], model.bottom[i]);
  for (size_t i = 0; i < layout.cross.size(); ++i) {
    add(layout.cross[i].v, model.cross[i].v.data());
    add(layout.cross[i].w, model.cross[i].w.data());
    add(layout.cross[i].bias, model.cross[i].bias.data());
  }
  for (size_t i = 0; i < layout.top.size(); ++i) add_linear(layout.top[i], model.top[i]);
  return out;
}

// Sets each tensor's offset (safetensors layout: packed, by decreasing
// element size, stable) and returns the header, padded to 8 bytes; *data_bytes:
// the data section's size.
std::string LayOutSafetensors(std::vector<Planned>* plan, int64_t* data_bytes) {
  std::vector<int> order(plan->size());
  for (size_t i = 0; i < plan->size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [plan](int a, int b) {
    return TensorDtypeBytes((*plan)[a].dtype) > TensorDtypeBytes((*plan)[b].dtype);
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  int64_t offset = 0;
  for (int i : order) {
    Planned& p = (*plan)[i];
    p.offset = offset;
    header[p.name] = {{"dtype", TensorDtypeName(p.dtype)},
                      {"shape", p.shape},
                      {"data_offsets", {offset, offset + p.bytes}}};
    offset += p.bytes;
  }
  std::string head = header.dump();
  head.append((8 - (8 + head.size()) % 8) % 8, ' ');
  *data_bytes = offset;
  return head;
}

// Streams each table's rows (and keys) from the store to their places in
// the file, checking the counts against the plan.
absl::Status WriteTables(int fd, const std::string& path, const Model& model,
                         const TableStore& store, const SnapshotTensors& planned,
                         int64_t data_start) {
  for (size_t t = 0; t < model.tables.size(); ++t) {
    const EmbeddingTable& table = model.tables[t];
    const Planned& rows = planned.tensors[planned.table_weight[t]];
    const Planned* keys =
        planned.table_keys[t] >= 0 ? &planned.tensors[planned.table_keys[t]] : nullptr;
    int64_t written = 0;  // rows so far
    const int64_t limit = rows.shape[0];
    absl::Status s = store.ReadTable(static_cast<int>(t), [&](absl::Span<const int64_t> k,
                                                              absl::Span<const uint8_t> r)
                                                              -> absl::Status {
      const int64_t n = static_cast<int64_t>(r.size()) / table.row_bytes();
      if (written + n > limit) {
        return absl::InternalError(absl::StrCat("table ", table.name, ": more rows (",
                                                written + n, ") than the ", limit, " counted"));
      }
      absl::Status w = PWriteAll(fd, path, r.data(), r.size(),
                                 data_start + rows.offset + written * table.row_bytes());
      if (w.ok() && keys != nullptr) {
        w = PWriteAll(fd, path, k.data(), k.size() * 8, data_start + keys->offset + written * 8);
      }
      written += n;
      return w;
    });
    if (!s.ok()) return s;
    if (written != limit) {
      return absl::InternalError(absl::StrCat("table ", table.name, ": ", written,
                                              " rows read, ", limit, " counted"));
    }
  }
  return absl::OkStatus();
}

// weights.safetensors: header, dense tensors, then the store's tables; synced.
// Returns the file's size.
absl::StatusOr<int64_t> WriteWeights(const std::string& dir, const Model& model,
                                     const TableStore& store, SnapshotTensors planned) {
  int64_t data_bytes = 0;
  const std::string head = LayOutSafetensors(&planned.tensors, &data_bytes);
  const int64_t data_start = 8 + static_cast<int64_t>(head.size());
  const std::string path = dir + "/weights.safetensors";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path, "create");
  absl::Cleanup closer = [fd] { close(fd); };
  const uint64_t head_len = head.size();
  uint8_t len_le[8];
  for (int b = 0; b < 8; ++b) len_le[b] = static_cast<uint8_t>(head_len >> (8 * b));
  absl::Status s = PWriteAll(fd, path, len_le, 8, 0);
  if (s.ok()) s = PWriteAll(fd, path, head.data(), head.size(), 8);
  for (const Planned& p : planned.tensors) {
    if (s.ok() && p.data != nullptr) s = PWriteAll(fd, path, p.data, p.bytes, data_start + p.offset);
  }
  if (s.ok()) s = WriteTables(fd, path, model, store, planned, data_start);
  if (s.ok() && fsync(fd) != 0) s = IoError(path, "fsync");
  if (!s.ok()) return s;
  return data_start + data_bytes;
}

// update_positions.json; returns its text.
absl::StatusOr<std::string> WritePositions(const std::string& dir,
                                           const std::vector<ProducerPosition>& positions) {
  nlohmann::json pos = nlohmann::json::array();
  for (const ProducerPosition& p : positions) {
    pos.push_back({{"producer_id", p.producer_id},
                   {"table", p.table},
                   {"last_sequence", p.last_sequence},
                   {"last_timestamp_unix_us", p.last_timestamp_unix_us}});
  }
  std::string text = nlohmann::json{{"positions", pos}}.dump(1) + "\n";
  absl::Status s = WriteSmallFile(dir + "/update_positions.json", text);
  if (!s.ok()) return s;
  return text;
}

}  // namespace

absl::StatusOr<SnapshotStats> WriteSnapshot(const Model& model, const TableStore& store,
                                            const std::vector<int64_t>& dynamic_keys,
                                            const std::vector<ProducerPosition>& positions,
                                            const std::string& dir) {
  const absl::Time start = absl::Now();
  for (size_t t = 0; t < model.tables.size(); ++t) {
    if (model.tables[t].dynamic && dynamic_keys[t] <= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "table ", model.tables[t].name,
          " holds no key: a model file needs at least one row per table"));
    }
  }
  const rankd::v1::ModelConfig config = SnapshotConfig(model, dynamic_keys);
  const ModelTensorLayout layout = ExpectedTensorLayout(config);
  if (layout.tables.size() != model.tables.size() || layout.bottom.size() != model.bottom.size() ||
      layout.cross.size() != model.cross.size() || layout.top.size() != model.top.size()) {
    // Only a model built in memory (not loaded from a config) gets here.
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", model.name, " version ", model.version,
        ": its config does not describe its tensors (a model built in memory), so it cannot be "
        "written as a model directory"));
  }

  absl::StatusOr<int64_t> weight_bytes = WriteWeights(dir, model, store, PlanTensors(model, layout));
  if (!weight_bytes.ok()) return weight_bytes.status();
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  absl::Status s = WriteSmallFile(dir + "/model.pbtxt", text);
  if (!s.ok()) return s;
  absl::StatusOr<std::string> pos_text = WritePositions(dir, positions);
  if (!pos_text.ok()) return pos_text.status();
  SnapshotStats stats;
  stats.bytes = *weight_bytes + static_cast<int64_t>(text.size() + pos_text->size());
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return stats;
}

absl::StatusOr<std::vector<ProducerPosition>> ReadUpdatePositions(const std::string& dir) {
  const std::string path = dir + "/update_positions.json";
  std::ifstream in(path);
  std::vector<ProducerPosition> out;
  if (!in) return out;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("positions") ||
      !j["positions"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object with a \"positions\" array"));
  }
  for (size_t i = 0; i < j["positions"].size(); ++i) {
    const nlohmann::json& p = j["positions"][i];
    if (!p.is_object() || !p.contains("producer_id") || !p["producer_id"].is_string() ||
        !p.contains("table") || !p["table"].is_string() || !p.contains("last_sequence") ||
        !p["last_sequence"].is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": positions[", i, "]: want producer_id, table (strings) and last_sequence"));
    }
    ProducerPosition pp;
    pp.producer_id = p["producer_id"].get<std::string>();
    pp.table = p["table"].get<std::string>();
    pp.last_sequence = p["last_sequence"].get<uint64_t>();
    if (p.contains("last_timestamp_unix_us") && p["last_timestamp_unix_us"].is_number_integer()) {
      pp.last_timestamp_unix_us = p["last_timestamp_unix_us"].get<int64_t>();
    }
    out.push_back(std::move(pp));
  }
  return out;
}

}  // namespace rankd::engine
