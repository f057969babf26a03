// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
// from the same fixtures the fuzzers use (fuzz_models.h), so seeds are valid
// inputs that reach deep into each target. Run after changing a fixture:
//   bazel run //tests/fuzz:write_seeds -- $PWD/tests/fuzz/corpus
// Each seed is also checked here to be accepted (converted, parsed, loaded
// or applied); a seed the target refuses at its first step would only test
// the error path, so it fails the run instead.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/safetensors_delta.h"
#include "engine/generator/model_generator.h"
#include "engine/model/model_loader.h"
#include "engine/updates/host_table_store.h"
#include "engine/updates/live_tables.h"
#include "google/protobuf/text_format.h"
#include "inference/grpc_predict_v2.pb.h"
#include "rankd/v1/model_control.pb.h"
#include "rankd/v1/ranking.pb.h"
#include "server/http/kserve_json.h"
#include "server/kserve_conversion.h"
#include "server/lifecycle/update_message.h"
#include "server/request_conversion.h"
#include "tests/fuzz/fuzz_models.h"

namespace rankd::fuzz {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "write_seeds: %s\n", what.c_str());
  std::exit(1);
}

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Die("cannot write " + (dir / name).string());
}

rankd::v1::ScoreRequest ToWire(const engine::Model& model,
                               const engine::testing::OwnedRequest& r) {
  rankd::v1::ScoreRequest w;
  w.set_model(model.name);
  w.set_num_candidates(r.num_candidates);
  for (float v : r.dense) w.add_dense(v);
  for (size_t f = 0; f < model.features.size(); ++f) {
    auto* s = w.add_sparse();
    s->set_name(model.features[f].name);
    for (int64_t id : r.ids[f]) s->add_ids(id);
    for (int32_t l : r.lengths[f]) s->add_lengths(l);
    if (f < r.weights.size()) {
      for (float x : r.weights[f]) s->add_weights(x);
    }
  }
  return w;
}

// The request of seed `variant` (0: one candidate; 1: five, weighted; 2:
// five, every feature one shared bag) for a model of `model_spec`; a ZERO
// id-policy model also gets ids that do not resolve.
engine::testing::RandomRequestSpec SeedRequestSpec(
    const engine::testing::RandomModelSpec& model_spec, int variant, uint64_t seed) {
  engine::testing::RandomRequestSpec rs;
  rs.seed = seed;
  rs.num_candidates = variant == 0 ? 1 : 5;
  rs.weighted = variant == 1;
  rs.share_all_bags = variant == 2;
  if (model_spec.id_policy == rankd::v1::ZERO) rs.unresolved_fraction = 0.3;
  return rs;
}

void ScoreRequestSeeds(const fs::path& dir) {
  const auto specs = ScoreModelSpecs();
  for (size_t m = 0; m < specs.size(); ++m) {
    auto model = engine::testing::MakeRandomModel(specs[m]);
    for (int variant = 0; variant < 3; ++variant) {
      const auto wire =
          ToWire(*model, engine::testing::MakeRandomRequest(
                             *model, SeedRequestSpec(specs[m], variant, 100 + variant)));
      auto converted = server::ToEngineRequest(*model, wire);
      if (!converted.ok()) Die("score seed refused: " + converted.status().ToString());
      Write(dir, absl::StrCat("model", m, "_v", variant), wire.SerializeAsString());
    }
  }
}

// One KServe v2 input tensor as a REST body's JSON object.
template <typename T>
std::string JsonTensor(const std::string& name, const char* datatype,
                       const std::vector<int64_t>& shape, const std::vector<T>& data) {
  std::string out =
      absl::StrCat("{\"name\": ", server::JsonString(name), ", \"datatype\": \"", datatype,
                   "\", \"shape\": [", absl::StrJoin(shape, ", "), "], \"data\": [");
  for (size_t i = 0; i < data.size(); ++i) {
    if (i > 0) out += ", ";
    if constexpr (std::is_same_v<T, float>) {
      server::AppendFloat(data[i], &out);
    } else {
      absl::StrAppend(&out, data[i]);
    }
  }
  return out + "]}";
}

// `r` as a KServe v2 REST inference body for `model`.
std::string KServeJsonBody(const engine::Model& model, const engine::testing::OwnedRequest& r) {
  std::vector<std::string> inputs;
  if (model.num_dense > 0) {
    inputs.push_back(JsonTensor("dense", "FP32", {r.num_candidates, model.num_dense}, r.dense));
  }
  for (size_t f = 0; f < model.features.size(); ++f) {
    const std::string& name = model.features[f].name;
    inputs.push_back(JsonTensor(name, "INT64", {static_cast<int64_t>(r.ids[f].size())}, r.ids[f]));
    inputs.push_back(JsonTensor(name + ".lengths", "INT32",
                                {static_cast<int64_t>(r.lengths[f].size())}, r.lengths[f]));
    if (f < r.weights.size() && !r.weights[f].empty()) {
      inputs.push_back(JsonTensor(name + ".weights", "FP32",
                                  {static_cast<int64_t>(r.weights[f].size())}, r.weights[f]));
    }
  }
  return absl::StrCat("{\"id\": \"seed\", \"inputs\": [", absl::StrJoin(inputs, ", "),
                      "], \"outputs\": [{\"name\": \"scores\"}]}");
}

// `typed` with every input's contents moved to raw_input_contents.
inference::ModelInferRequest ToRawContents(const inference::ModelInferRequest& typed) {
  inference::ModelInferRequest raw = typed;
  for (auto& input : *raw.mutable_inputs()) {
    const auto& c = input.contents();
    std::string bytes;
    auto append = [&bytes](const void* p, size_t n) {
      bytes.append(static_cast<const char*>(p), n);
    };
    for (float v : c.fp32_contents()) append(&v, sizeof(v));
    for (int64_t v : c.int64_contents()) append(&v, sizeof(v));
    for (int32_t v : c.int_contents()) append(&v, sizeof(v));
    input.clear_contents();
    raw.add_raw_input_contents(std::move(bytes));
  }
  return raw;
}

// Seeds of kserve_infer_fuzzer: the first byte picks the form (0: JSON body,
// 1: ModelInferRequest bytes), as the fuzzer reads it.
void KServeInferSeeds(const fs::path& dir) {
  const auto specs = ScoreModelSpecs();
  for (size_t m = 0; m < specs.size(); ++m) {
    auto model = engine::testing::MakeRandomModel(specs[m]);
    for (int variant = 0; variant < 3; ++variant) {
      const std::string body =
          KServeJsonBody(*model, engine::testing::MakeRandomRequest(
                                     *model, SeedRequestSpec(specs[m], variant, 200 + variant)));
      inference::ModelInferRequest typed;
      if (absl::Status s = server::ParseKServeInferJson(body, &typed); !s.ok()) {
        Die("kserve JSON seed refused: " + s.ToString());
      }
      const inference::ModelInferRequest raw = ToRawContents(typed);
      for (const inference::ModelInferRequest* request :
           std::vector<const inference::ModelInferRequest*>{&typed, &raw}) {
        server::KServeRequest converted;
        if (absl::Status s = server::ToEngineRequest(*model, *request, {}, &converted); !s.ok()) {
          Die("kserve seed refused: " + s.ToString());
        }
      }
      const std::string name = absl::StrCat("model", m, "_v", variant);
      Write(dir, name + "_json", std::string(1, '\0') + body);
      Write(dir, name + "_typed", std::string(1, '\1') + typed.SerializeAsString());
      Write(dir, name + "_raw", std::string(1, '\1') + raw.SerializeAsString());
    }
  }
}

void ModelConfigSeeds(const fs::path& dir) {
  Write(dir, "fuzz.pbtxt", FuzzModelConfigText());
  for (const std::string& preset : engine::PresetNames()) {
    for (int dynamic = 0; dynamic <= 1; ++dynamic) {
      engine::GenerateOptions o;
      o.preset = preset;
      o.dynamic_tables = dynamic;
      auto config = engine::PresetConfig(o);
      if (!config.ok()) Die(config.status().ToString());
      std::string text;
      google::protobuf::TextFormat::PrintToString(*config, &text);
      if (auto parsed = engine::ParseModelConfig(text, preset); !parsed.ok()) {
        Die("config seed refused: " + parsed.status().ToString());
      }
      Write(dir, absl::StrCat(preset, dynamic ? "_dynamic" : "", ".pbtxt"), text);
    }
  }
}

void SafetensorsSeeds(const fs::path& dir) {
  const std::string weights = FuzzWeightsBytes();
  // Checked by loading it with the config, as the fuzzer does.
  const fs::path tmp = fs::temp_directory_path() / "rankd_write_seeds_model";
  fs::create_directories(tmp);
  Write(tmp, "model.pbtxt", FuzzModelConfigText());
  Write(tmp, "weights.safetensors", weights);
  engine::LoadOptions options;
  options.num_threads = 1;
  auto model = engine::LoadModel(tmp.string(), 1, "fuzz", options);
  fs::remove_all(tmp);
  if (!model.ok()) Die("weights seed refused: " + model.status().ToString());
  Write(dir, "fuzz_model.safetensors", weights);
}

// One record of the update fuzzer's input: 2-byte length, message.
std::string Record(const rankd::v1::EmbeddingUpdate& msg) {
  const std::string bytes = msg.SerializeAsString();
  if (bytes.size() > 0xffff) Die("update seed too long");
  return std::string{static_cast<char>(bytes.size() & 0xff),
                     static_cast<char>(bytes.size() >> 8)} + bytes;
}

void UpdateSeeds(const fs::path& dir) {
  auto model = MakeUpdateModel();
  const engine::EmbeddingTable& t1 = model->tables[1];
  const int64_t* keys1 = reinterpret_cast<const int64_t*>(t1.keys.data);
  std::vector<std::pair<std::string, std::vector<rankd::v1::EmbeddingUpdate>>> seeds;

  rankd::v1::EmbeddingUpdate stat;  // static rows, fp32
  stat.set_table("t0");
  for (int64_t id : {0, 5}) stat.add_ids(id);
  for (int i = 0; i < 2 * model->tables[0].dim; ++i) stat.add_rows(0.25f * (i + 1));
  seeds.push_back({"static_rows", {stat}});

  rankd::v1::EmbeddingUpdate ins;  // dynamic: update a stored key, insert a new one
  ins.set_table("t1");
  ins.add_ids(keys1[0]);
  ins.add_ids(123456789);
  for (int i = 0; i < 2 * t1.dim; ++i) ins.add_rows(-0.5f + 0.1f * i);
  ins.set_producer_id("trainer");
  ins.set_sequence(1);
  rankd::v1::EmbeddingUpdate del;  // then delete one, re-send the first (duplicate)
  del.set_table("t1");
  del.add_delete_keys(keys1[1]);
  del.add_delete_keys(42);
  seeds.push_back({"dynamic_insert_delete", {ins, del, ins}});

  rankd::v1::EmbeddingUpdate raw;  // raw little-endian rows into the LFU table
  raw.set_table("t2");
  const int dim2 = model->tables[2].dim;
  std::string bytes;
  for (int64_t k : {7, 8, 9}) {
    raw.add_ids(k);
    for (int i = 0; i < dim2; ++i) bytes += std::string("\x00\x00\x80\x3f", 4);  // fp32 1.0
  }
  raw.set_raw_rows(bytes);
  seeds.push_back({"raw_rows", {raw}});

  // Past max_keys in two messages (one may not exceed it): evictions.
  std::vector<rankd::v1::EmbeddingUpdate> fills(2);
  for (int m = 0; m < 2; ++m) {
    fills[m].set_table("t1");
    for (int64_t k = 0; k < kUpdateMaxKeys / 2 + 4; ++k) {
      fills[m].add_ids(1000 * (m + 1) + k);
      for (int i = 0; i < t1.dim; ++i) fills[m].add_rows(0.01f * k);
    }
  }
  seeds.push_back({"evict", fills});

  for (const auto& [name, messages] : seeds) {
    auto m = MakeUpdateModel();
    engine::LiveTables live(m, {std::make_shared<engine::HostTableStore>(m)});
    std::string input;
    for (const auto& msg : messages) {
      auto applied = server::ApplyUpdateMessage(msg, "fuzz", 1, &live);
      if (!applied.ok()) Die("update seed " + name + " refused: " + applied.status().ToString());
      input += Record(msg);
    }
    Write(dir, name, input);
  }
}

// delta_fuzzer seeds: delta files as rankctl update reads them, each checked
// to parse back to its tables.
void DeltaSeeds(const fs::path& dir) {
  client::TableDelta f32;
  f32.table = "t_user";
  f32.ids = {3, 1, 2, 9};
  f32.dim = 2;
  f32.row_bytes = std::string(4 * 2 * 4, '\x3f');
  f32.delete_keys = {7, 8};
  client::TableDelta f16;
  f16.table = "emb.t_item";
  f16.dtype = client::RowDtype::kF16;
  f16.ids = {5, 6};
  f16.dim = 3;
  f16.row_bytes = "abcdefghijkl";
  client::TableDelta bf16 = f16;
  bf16.table = "t_bf16";
  bf16.dtype = client::RowDtype::kBF16;
  client::TableDelta deletes_only;
  deletes_only.table = "t_gone";
  deletes_only.delete_keys = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                              18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33};
  const std::vector<std::pair<std::string, std::vector<client::TableDelta>>> files = {
      {"f32.safetensors", {f32}},
      {"three_dtypes.safetensors", {f32, f16, bf16}},
      {"deletes_only.safetensors", {deletes_only}},
  };
  for (const auto& [name, tables] : files) {
    const std::string bytes = client::WriteDelta(tables);
    absl::StatusOr<std::vector<client::TableDelta>> parsed = client::ParseDelta(bytes, name);
    if (!parsed.ok() || parsed->size() != tables.size()) {
      Die("delta seed " + name + " does not parse back: " + parsed.status().ToString());
    }
    Write(dir, name, bytes);
  }
}

// update_log_fuzzer scripts (its file comment has the format): records of
// the given spec bytes (bits 0-5 a length, bit 6 a payload that starts with
// a whole record) appended, then the damage ops in `damage`. Every script
// gets past the target's first step (its records are appended before any
// damage); some damage is meant to be refused by Open (corrupt_middle,
// bad_version), which the target checks.
std::string UpdateLogScript(const std::vector<int>& specs, const std::string& damage) {
  std::string out(1, static_cast<char>(specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    out += static_cast<char>(specs[i]);
    out += std::string(specs[i] % 64, static_cast<char>('a' + i));
    out += static_cast<char>(i);  // target version
  }
  return out + damage;
}

// The end offset of record `i` of UpdateLogScript(specs, ...).
int64_t RecordEnd(const std::vector<int>& specs, size_t i) {
  int64_t end = 16;
  for (size_t r = 0; r <= i; ++r) {
    const int n = specs[r] % 64;
    end += 24 + ((specs[r] & 0x40) != 0 ? 24 + 2 * n : n);
  }
  return end;
}

// An offset as a script's 2 little-endian bytes.
std::string Offset16(int64_t offset) {
  return std::string{static_cast<char>(offset & 0xff), static_cast<char>((offset >> 8) & 0xff)};
}

void UpdateLogSeeds(const fs::path& dir) {
  const std::vector<int> four = {10, 0, 63, 5};
  Write(dir, "empty", UpdateLogScript({}, ""));
  Write(dir, "clean", UpdateLogScript(four, ""));
  // op 1: truncate 5 bytes into the last record (a crash mid-append).
  Write(dir, "torn_tail",
        UpdateLogScript(four, std::string(1, '\1') + Offset16(RecordEnd(four, 2) + 5)));
  // op 0: overwrite 3 bytes of record 1's header (valid records follow).
  Write(dir, "corrupt_middle",
        UpdateLogScript(four, std::string(1, '\0') + Offset16(RecordEnd(four, 0) + 2) + "\3xyz"));
  // op 2: 20 bytes of garbage after the last record.
  Write(dir, "garbage_tail",
        UpdateLogScript({7, 9}, std::string(1, '\2') + "\x14" + std::string(20, '\x5a')));
  // op 1: truncate the last record, whose payload starts with a whole
  // record, just after that inner record (a crash mid-append).
  const std::vector<int> nested = {10, 20, 0x40 | 30};
  const int64_t after_inner = RecordEnd(nested, 1) + 24 + 24 + 30 + 10;
  Write(dir, "torn_record_holding_a_record",
        UpdateLogScript(nested, std::string(1, '\1') + Offset16(after_inner)));
  // op 0 at offset 8: the file header's format version.
  Write(dir, "bad_version", UpdateLogScript({4}, std::string("\0\x08\0\1\x09", 5)));
}

}  // namespace
}  // namespace rankd::fuzz

int main(int argc, char** argv) {
  if (argc != 2) rankd::fuzz::Die("usage: write_seeds CORPUS_DIR");
  const std::filesystem::path root = argv[1];
  rankd::fuzz::ScoreRequestSeeds(root / "score_request_fuzzer");
  rankd::fuzz::KServeInferSeeds(root / "kserve_infer_fuzzer");
  rankd::fuzz::ModelConfigSeeds(root / "model_config_fuzzer");
  rankd::fuzz::SafetensorsSeeds(root / "safetensors_fuzzer");
  rankd::fuzz::UpdateSeeds(root / "update_fuzzer");
  rankd::fuzz::UpdateLogSeeds(root / "update_log_fuzzer");
  rankd::fuzz::DeltaSeeds(root / "delta_fuzzer");
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
