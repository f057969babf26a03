#include "engine/generator/model_generator.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor_layout.h"
#include "google/protobuf/text_format.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;

// Counter-based random numbers: value i of a tensor depends only on (seed, i),
// so chunked writing gives the same bytes as a one-shot write.
uint64_t Mix(uint64_t x) { return kernels::HashKey(static_cast<int64_t>(x)); }

double Uniform01(uint64_t seed, uint64_t i) {
  return (Mix(seed ^ Mix(i)) >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

double Normal(uint64_t seed, uint64_t i) {
  // Box-Muller on two independent uniforms.
  const double u1 = 1.0 - Uniform01(seed, 2 * i);
  const double u2 = Uniform01(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t h = Mix(seed + 0x9e3779b97f4a7c15ULL);
  for (char c : name) h = Mix(h ^ static_cast<uint8_t>(c));
  return h;
}

struct Preset {
  const char* name;
  rankd::v1::InteractionKind interaction;
  int dim;
  std::vector<int64_t> rows;
  std::vector<int> bag_sizes;  // empty = 1 each
  std::vector<int> bottom;
  std::vector<int> top;
  int dcn_layers = 0;
  int dcn_rank = 0;
};

const std::vector<int64_t> kMiniSweepRows = {10, 20, 30, 40, 60, 80, 100, 120,
                                             160, 200, 240, 320, 400, 500, 640, 800};

absl::StatusOr<Preset> FindPreset(const GenerateOptions& o) {
  if (o.preset == "mini") {
    const int n = o.num_tables == 0 ? 3 : o.num_tables;
    if (n < 3 || n > 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--num_tables: the mini preset takes 3 to 16 tables, got ", n));
    }
    return Preset{"mini", rankd::v1::DOT, 4,
                  std::vector<int64_t>(kMiniSweepRows.begin(), kMiniSweepRows.begin() + n),
                  {}, {8, 4}, {8, 1}};
  }
  if (o.num_tables != 0) {
    return absl::InvalidArgumentError("--num_tables: only the mini preset takes it");
  }
  if (o.preset == "kaggle") {
    return Preset{"kaggle", rankd::v1::DOT, 16,
                  {1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3,
                   93145, 5683, 8351593, 3194, 27, 14992, 5461306, 10, 5652,
                   2173, 4, 7046547, 18, 15, 286181, 105, 142572},
                  {}, {512, 256, 64, 16}, {512, 256, 1}};
  }
  if (o.preset == "terabyte") {
    return Preset{"terabyte", rankd::v1::DOT, 64,
                  {9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61,
                   9758201, 1333352, 313829, 10, 2208, 11156, 122, 4, 970, 14,
                   9994222, 7267859, 9946608, 415421, 12420, 101, 36},
                  {}, {512, 256, 64}, {512, 512, 256, 1}};
  }
  if (o.preset == "mlperf") {
    return Preset{"mlperf", rankd::v1::DCN_V2, 128,
                  {40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63,
                   40000000, 3067956, 405282, 10, 2209, 11938, 155, 4, 976, 14,
                   40000000, 40000000, 40000000, 590152, 12973, 108, 36},
                  {3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12,
                   100, 27, 10, 3, 1, 1},
                  {512, 256, 128}, {1024, 1024, 512, 256, 1}, 3, 512};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--preset: unknown preset \"", o.preset, "\"; expected one of ",
      absl::StrJoin(PresetNames(), ", ")));
}

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::InternalError(absl::StrCat("cannot create directory ", partial,
                                                ": ", std::strerror(errno)));
      }
    }
    if (i < path.size()) partial += path[i];
  }
  return absl::OkStatus();
}

// Fills a chunk of a tensor given as [elements] of `dtype` from f(i).
template <typename F>
void FillChunk(TensorDtype dtype, int64_t byte_offset, absl::Span<uint8_t> chunk, F f) {
  const int bytes = TensorDtypeBytes(dtype);
  const int64_t first = byte_offset / bytes;
  const int64_t count = static_cast<int64_t>(chunk.size()) / bytes;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = first + k;
    uint8_t* dst = chunk.data() + k * bytes;
    switch (dtype) {
      case TensorDtype::kF32: {
        const float v = static_cast<float>(f(i));
        std::memcpy(dst, &v, 4);
        break;
      }
      case TensorDtype::kF16: {
        const uint16_t h = kernels::FloatToHalfBits(static_cast<float>(f(i)));
        std::memcpy(dst, &h, 2);
        break;
      }
      case TensorDtype::kBF16: {
        const uint16_t h = kernels::FloatToBf16Bits(static_cast<float>(f(i)));
        std::memcpy(dst, &h, 2);
        break;
      }
      default:
        break;  // only float tensors are filled here
    }
  }
}

TensorToWrite RandomTensor(const TensorSpec& spec, uint64_t seed,
                           std::function<double(uint64_t seed, int64_t i)> value) {
  TensorToWrite t;
  t.name = spec.name;
  t.dtype = spec.dtype;
  t.shape = spec.shape;
  const uint64_t s = TensorSeed(seed, spec.name);
  const TensorDtype dtype = spec.dtype;
  t.fill = [s, dtype, value](int64_t byte_offset, absl::Span<uint8_t> chunk) {
    FillChunk(dtype, byte_offset, chunk, [&](int64_t i) { return value(s, i); });
  };
  return t;
}

void AddLinear(const LinearTensors& l, uint64_t seed, std::vector<TensorToWrite>* out) {
  const double in = static_cast<double>(l.weight.shape[1]);
  const double outw = static_cast<double>(l.weight.shape[0]);
  const double w_std = std::sqrt(2.0 / (in + outw));
  const double b_std = std::sqrt(1.0 / outw);
  out->push_back(RandomTensor(l.weight, seed, [w_std](uint64_t s, int64_t i) {
    return w_std * Normal(s, i);
  }));
  out->push_back(RandomTensor(l.bias, seed, [b_std](uint64_t s, int64_t i) {
    return b_std * Normal(s, i);
  }));
}

// Checks an MLP override (`flag` names it in errors): widths in
// [1, kMaxGeneratedWidth], at most kMaxGeneratedLayers of them, the last equal
// to `last` (the embedding dim for the bottom MLP, 1 for the top MLP).
absl::Status CheckMlpOverride(const char* flag, const std::vector<int>& widths, int last) {
  if (widths.size() > kMaxGeneratedLayers) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", widths.size(),
                                                   " layers; at most ", kMaxGeneratedLayers));
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] < 1 || widths[i] > kMaxGeneratedWidth) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": width ", i, " must be in [1, ", kMaxGeneratedWidth, "], got ", widths[i]));
    }
  }
  if (!widths.empty() && widths.back() != last) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": the last width must be ", last, " for this preset, got ", widths.back()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> PresetNames() { return {"mini", "kaggle", "terabyte", "mlperf"}; }

absl::StatusOr<ModelConfig> PresetConfig(const GenerateOptions& o) {
  absl::StatusOr<Preset> preset = FindPreset(o);
  if (!preset.ok()) return preset.status();
  absl::Status mlp = CheckMlpOverride("--bottom_mlp", o.bottom_mlp, preset->dim);
  if (mlp.ok()) mlp = CheckMlpOverride("--top_mlp", o.top_mlp, 1);
  if (!mlp.ok()) return mlp;
  if (!o.bottom_mlp.empty()) preset->bottom = o.bottom_mlp;
  if (!o.top_mlp.empty()) preset->top = o.top_mlp;
  if (!(o.scale > 0.0 && o.scale <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--scale: must be in (0, 1], got ", o.scale));
  }
  const int num_tables = static_cast<int>(preset->rows.size());
  if (o.init != rankd::v1::FILE && o.init != rankd::v1::RANDOM) {
    return absl::InvalidArgumentError("--init: expected file or random");
  }
  if (o.dynamic_tables < 0 || o.dynamic_tables > num_tables) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dynamic_tables: must be in [0, ", num_tables, "], got ", o.dynamic_tables));
  }
  ModelConfig c;
  c.set_name(o.name.empty() ? preset->name : o.name);
  c.set_num_dense(13);
  // The N largest tables become DYNAMIC.
  std::vector<int> order(num_tables);
  for (int i = 0; i < num_tables; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return preset->rows[a] > preset->rows[b]; });
  std::vector<bool> dynamic(num_tables, false);
  for (int i = 0; i < o.dynamic_tables; ++i) dynamic[order[i]] = true;
  for (int t = 0; t < num_tables; ++t) {
    rankd::v1::TableConfig* table = c.add_tables();
    table->set_name(absl::StrCat("t", t));
    table->set_kind(dynamic[t] ? rankd::v1::DYNAMIC : rankd::v1::STATIC);
    table->set_num_rows(std::max<int64_t>(1, std::llround(preset->rows[t] * o.scale)));
    table->set_dim(preset->dim);
    table->set_dtype(o.dtype == rankd::v1::DATA_TYPE_UNSPECIFIED ? rankd::v1::FP32 : o.dtype);
    table->set_pooling(rankd::v1::SUM);
    rankd::v1::SparseFeatureConfig* f = c.add_sparse_features();
    f->set_name(absl::StrCat("cat_", t));
    f->set_table(table->name());
    f->set_typical_ids_per_bag(preset->bag_sizes.empty() ? 1 : preset->bag_sizes[t]);
    if (o.init == rankd::v1::RANDOM) {
      // Scale left 0: the loader's default 1/sqrt(num_rows) is the bound
      // written file tables use too.
      table->mutable_init()->set_kind(rankd::v1::RANDOM);
      table->mutable_init()->set_seed(o.seed);
    }
  }
  for (int w : preset->bottom) c.add_bottom_mlp(w);
  for (int w : preset->top) c.add_top_mlp(w);
  c.mutable_interaction()->set_kind(preset->interaction);
  if (preset->interaction == rankd::v1::DCN_V2) {
    c.mutable_interaction()->set_dcn_num_layers(preset->dcn_layers);
    c.mutable_interaction()->set_dcn_low_rank(preset->dcn_rank);
  }
  ModelConfig check = c;
  absl::Status s = ValidateModelConfig(&check);
  if (!s.ok()) return s;
  return c;
}

absl::Status GenerateModel(const GenerateOptions& o, const std::string& out_dir) {
  absl::StatusOr<ModelConfig> config = PresetConfig(o);
  if (!config.ok()) return config.status();
  ModelConfig resolved = *config;
  absl::Status s = ValidateModelConfig(&resolved);
  if (!s.ok()) return s;
  s = MakeDirs(out_dir);
  if (!s.ok()) return s;

  const ModelTensorLayout layout = ExpectedTensorLayout(resolved);
  std::vector<TensorToWrite> tensors;
  for (size_t t = 0; t < layout.tables.size(); ++t) {
    const TableTensors& tt = layout.tables[t];
    if (!tt.in_file) continue;  // RANDOM: made by the loader
    const double bound = std::sqrt(1.0 / static_cast<double>(tt.weight.shape[0]));
    tensors.push_back(RandomTensor(tt.weight, o.seed, [bound](uint64_t s, int64_t i) {
      return bound * (2.0 * Uniform01(s, i) - 1.0);
    }));
    if (tt.keys.has_value()) {
      // A bijective mix of the row index: unique keys spread over all of int64.
      TensorToWrite keys;
      keys.name = tt.keys->name;
      keys.dtype = TensorDtype::kI64;
      keys.shape = tt.keys->shape;
      const uint64_t s = TensorSeed(o.seed, keys.name);
      keys.fill = [s](int64_t byte_offset, absl::Span<uint8_t> chunk) {
        const int64_t first = byte_offset / 8;
        for (size_t k = 0; k < chunk.size() / 8; ++k) {
          int64_t key = static_cast<int64_t>(Mix(static_cast<uint64_t>(first + k) + s));
          if (key == kernels::kEmptyKey) key = 0;  // the one reserved value
          std::memcpy(chunk.data() + 8 * k, &key, 8);
        }
      };
      tensors.push_back(std::move(keys));
    }
  }
  for (const LinearTensors& l : layout.bottom) AddLinear(l, o.seed, &tensors);
  for (const CrossTensors& x : layout.cross) {
    const double n = static_cast<double>(x.v.shape[1]);
    const double r = static_cast<double>(x.v.shape[0]);
    const double std_vw = std::sqrt(2.0 / (n + r));
    for (const TensorSpec* spec : {&x.v, &x.w}) {
      tensors.push_back(RandomTensor(*spec, o.seed, [std_vw](uint64_t s, int64_t i) {
        return std_vw * Normal(s, i);
      }));
    }
    tensors.push_back(RandomTensor(x.bias, o.seed, [](uint64_t s, int64_t i) {
      return 0.05 * Normal(s, i);
    }));
  }
  for (const LinearTensors& l : layout.top) AddLinear(l, o.seed, &tensors);

  std::string text;
  google::protobuf::TextFormat::PrintToString(*config, &text);
  const std::string config_path = out_dir + "/model.pbtxt";
  {
    std::ofstream f(config_path);
    f << "# Generated by `rankd gen-model --preset " << o.preset << " --scale "
      << o.scale << " --seed " << o.seed
      << (o.init == rankd::v1::RANDOM ? " --init random" : "")
      << "`: random weights in the preset's shapes"
      << (o.init == rankd::v1::RANDOM ? "; table rows are generated at load" : "")
      << ".\n"
      << text;
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", config_path));
  }
  return WriteSafetensors(out_dir + "/weights.safetensors", tensors,
                          {{"generator", "rankd gen-model"},
                           {"preset", o.preset},
                           {"seed", std::to_string(o.seed)},
                           {"scale", std::to_string(o.scale)},
                           {"init", o.init == rankd::v1::RANDOM ? "random" : "file"}});
}

}  // namespace rankd::engine
