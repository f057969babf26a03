// LoadModel: one version directory -> Model. The config is validated first,
// then every tensor the config implies is checked against the file (and the
// file against the config) before anything is built, so a bad export fails
// with the full list of what is wrong.
#include "engine/model/model_loader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/error_list.h"
#include "engine/model/model_shapes.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor_layout.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string ExpectedShapes(const TensorSpec& spec) {
  std::string s = ShapeString(spec.shape);
  if (spec.allow_trailing_one) {
    std::vector<int64_t> alt = spec.shape;
    alt.push_back(1);
    absl::StrAppend(&s, " or ", ShapeString(alt));
  }
  return s;
}

bool ShapeMatches(const TensorSpec& spec, const std::vector<int64_t>& shape) {
  if (shape == spec.shape) return true;
  if (!spec.allow_trailing_one || shape.size() != spec.shape.size() + 1) {
    return false;
  }
  return shape.back() == 1 &&
         std::equal(spec.shape.begin(), spec.shape.end(), shape.begin());
}

// A file exported for the other naming convention (or with a wrapper's
// prefix) is the likeliest cause of a wholesale mismatch: say so first, ahead
// of the list of names it produces.
std::string ConventionHint(const ModelConfig& config,
                           const std::vector<std::string>& unused) {
  const bool dcn = config.interaction().kind() == rankd::v1::DCN_V2;
  const std::string kind =
      rankd::v1::InteractionKind_Name(config.interaction().kind());
  for (const std::string& name : unused) {
    if (!dcn && (absl::StartsWith(name, "sparse_arch.") ||
                 absl::StartsWith(name, "dense_arch.") ||
                 absl::StartsWith(name, "over_arch."))) {
      return absl::StrCat(
          "the file looks like a TorchRec DLRM_DCN state_dict, but "
          "model.pbtxt says interaction ",
          kind, ": DOT and CAT models use DLRM_Net names "
          "(emb_l.*, bot_l.*, top_l.*; docs/model-format.md)");
    }
    if (dcn && (absl::StartsWith(name, "emb_l.") ||
                absl::StartsWith(name, "bot_l.") ||
                absl::StartsWith(name, "top_l."))) {
      return "the file looks like a DLRM_Net state_dict, but model.pbtxt says "
             "interaction DCN_V2: DCN_V2 models use TorchRec DLRM_DCN names "
             "(dense_arch.*, sparse_arch.*, inter_arch.*, over_arch.*; "
             "docs/model-format.md)";
    }
    if (absl::StartsWith(name, "model.")) {
      return "names start with 'model.' (a TorchRec DLRMTrain state_dict?): "
             "strip that prefix from every name before saving";
    }
  }
  return "";
}

// Why a dtype is expected, for the error message.
std::string DtypeReason(const ModelConfig& config,
                        const ModelTensorLayout& layout,
                        const TensorSpec& spec) {
  for (size_t k = 0; k < layout.tables.size(); ++k) {
    const rankd::v1::TableConfig& t = config.tables(static_cast<int>(k));
    if (&layout.tables[k].weight == &spec) {
      return absl::StrCat("table '", t.name(), "' has dtype ",
                          rankd::v1::DataType_Name(t.dtype()),
                          " in model.pbtxt; rows are never converted");
    }
    if (layout.tables[k].keys && &*layout.tables[k].keys == &spec) {
      return "keys are int64";
    }
  }
  return "MLP and cross-layer weights are F32";
}

// Checks the file holds exactly the layout's tensors with their dtypes and
// shapes; one error line per problem.
void CheckTensors(const ModelConfig& config, const SafetensorsFile& file,
                  const ModelTensorLayout& layout, ErrorList* errors) {
  std::set<std::string> expected;
  for (const TensorSpec* spec : layout.All()) expected.insert(spec->name);
  std::vector<std::string> unused;
  for (const auto& [name, info] : file.tensors()) {
    if (expected.count(name) == 0) unused.push_back(name);
  }
  if (std::string hint = ConventionHint(config, unused); !hint.empty()) {
    errors->Add(std::move(hint));
  }

  for (const TensorSpec* spec : layout.All()) {
    const TensorInfo* t = file.Find(spec->name);
    if (t == nullptr) {
      errors->Addf("tensor '", spec->name, "' is missing (expected ",
                   TensorDtypeName(spec->dtype), " ", ExpectedShapes(*spec),
                   ")");
      continue;
    }
    if (t->dtype != spec->dtype) {
      // Never converted: a silent fp32 -> fp16 cast would change scores, and
      // a cast the other way would double the memory the config planned for.
      errors->Addf("tensor '", spec->name, "': expected dtype ",
                   TensorDtypeName(spec->dtype), ", got ",
                   TensorDtypeName(t->dtype), " (",
                   DtypeReason(config, layout, *spec), ")");
    }
    if (!ShapeMatches(*spec, t->shape)) {
      errors->Addf("tensor '", spec->name, "': expected shape ",
                   ExpectedShapes(*spec), ", got ", ShapeString(t->shape));
    }
  }

  if (!unused.empty()) {
    constexpr size_t kMaxNames = 10;
    const size_t shown = std::min(unused.size(), kMaxNames);
    std::string names = absl::StrCat(
        "'", absl::StrJoin(unused.begin(), unused.begin() + shown, "', '"), "'");
    if (unused.size() > shown) {
      absl::StrAppend(&names, " and ", unused.size() - shown, " more");
    }
    // Never ignored: an unused tensor is a misspelt name or a layer the
    // config forgot, and serving without it would give wrong scores quietly.
    errors->Addf(unused.size() > 1 ? "tensors " : "tensor ", names,
                 " not used by this ",
                 rankd::v1::InteractionKind_Name(config.interaction().kind()),
                 " model (misspelt, or missing from model.pbtxt?)");
  }
}

// Copies an F32 tensor (the mapping may be unaligned for floats) and rejects
// NaN/Inf, which would turn every score into NaN.
absl::Status CopyFloats(const SafetensorsFile& file, const TensorSpec& spec,
                        std::vector<float>* out) {
  const TensorInfo* t = file.Find(spec.name);
  out->resize(static_cast<size_t>(t->size_bytes / sizeof(float)));
  if (t->size_bytes > 0) std::memcpy(out->data(), t->data, t->size_bytes);
  for (size_t i = 0; i < out->size(); ++i) {
    if (!std::isfinite((*out)[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": tensor '", spec.name,
                       "': non-finite value ", (*out)[i], " at element ", i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Linear> LoadLinear(const SafetensorsFile& file,
                                  const LinearTensors& spec) {
  Linear layer;
  layer.out = static_cast<int>(spec.weight.shape[0]);
  layer.in = static_cast<int>(spec.weight.shape[1]);
  if (absl::Status s = CopyFloats(file, spec.weight, &layer.weight); !s.ok()) {
    return s;
  }
  if (absl::Status s = CopyFloats(file, spec.bias, &layer.bias); !s.ok()) {
    return s;
  }
  return layer;
}

kernels::RowType RowTypeOf(rankd::v1::DataType d) {
  switch (d) {
    case rankd::v1::FP16:
      return kernels::RowType::kFp16;
    case rankd::v1::BF16:
      return kernels::RowType::kBf16;
    default:
      return kernels::RowType::kFp32;
  }
}

kernels::Pooling PoolingOf(rankd::v1::PoolingMode p) {
  switch (p) {
    case rankd::v1::MEAN:
      return kernels::Pooling::kMean;
    case rankd::v1::MAX:
      return kernels::Pooling::kMax;
    default:
      return kernels::Pooling::kSum;
  }
}

// Rows stay in the mapping (a 100 GB table is never copied); only a tensor
// not aligned to its element size (possible in hand-made files) is copied, as
// kernels read rows as typed arrays.
ByteBuffer RowsBuffer(const std::shared_ptr<const SafetensorsFile>& file,
                      const TensorInfo& t, int element_bytes) {
  ByteBuffer buf;
  buf.size = t.size_bytes;
  if (reinterpret_cast<uintptr_t>(t.data) % element_bytes == 0) {
    buf.data = t.data;
    buf.owner = file;
    return buf;
  }
  auto copy = std::make_shared<std::vector<uint8_t>>(t.data, t.data + t.size_bytes);
  buf.data = copy->data();
  buf.owner = std::move(copy);
  return buf;
}

absl::Status LoadTable(const std::shared_ptr<const SafetensorsFile>& file,
                       const rankd::v1::TableConfig& config,
                       const TableTensors& spec, EmbeddingTable* table) {
  table->name = config.name();
  table->dynamic = config.kind() == rankd::v1::DYNAMIC;
  table->num_rows = config.num_rows();
  table->dim = config.dim();
  table->row_type = RowTypeOf(config.dtype());
  table->pooling = PoolingOf(config.pooling());
  table->placement = config.placement();
  table->id_policy = config.id_policy();
  table->default_vector.assign(config.default_vector().begin(),
                               config.default_vector().end());
  table->rows = RowsBuffer(file, *file->Find(spec.weight.name),
                           kernels::RowTypeBytes(table->row_type));
  if (!table->dynamic) return absl::OkStatus();

  // Kept (a view, like the rows): request generators and warmup need real
  // keys, and GPU backends may rebuild their own tables from them.
  table->keys = RowsBuffer(file, *file->Find(spec.keys->name), sizeof(int64_t));
  absl::Span<const int64_t> key_span(
      reinterpret_cast<const int64_t*>(table->keys.data),
      static_cast<size_t>(table->num_rows));
  absl::Status s =
      kernels::HashTable::Build(key_span, config.capacity(), &table->hash);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(file->path(), ": tensor '",
                                               spec.keys->name, "': ",
                                               s.message()));
  }
  return absl::OkStatus();
}

absl::Status BuildModel(const std::shared_ptr<const SafetensorsFile>& file,
                        const ModelTensorLayout& layout, Model* model) {
  const ModelConfig& c = model->config;
  model->num_dense = c.num_dense();
  model->tables.resize(c.tables_size());
  for (int k = 0; k < c.tables_size(); ++k) {
    if (absl::Status s =
            LoadTable(file, c.tables(k), layout.tables[k], &model->tables[k]);
        !s.ok()) {
      return s;
    }
  }
  for (const rankd::v1::SparseFeatureConfig& f : c.sparse_features()) {
    SparseFeature feature;
    feature.name = f.name();
    for (int k = 0; k < c.tables_size(); ++k) {
      if (c.tables(k).name() == f.table()) feature.table = k;
    }
    feature.request_level = f.request_level();
    feature.max_ids_per_bag = f.max_ids_per_bag();
    model->features.push_back(std::move(feature));
  }
  for (const LinearTensors& spec : layout.bottom) {
    absl::StatusOr<Linear> layer = LoadLinear(*file, spec);
    if (!layer.ok()) return layer.status();
    model->bottom.push_back(*std::move(layer));
  }
  model->interaction = c.interaction().kind();
  model->self_interaction = c.interaction().self_interaction();
  model->interaction_width = static_cast<int>(InteractionWidth(c));
  for (const CrossTensors& spec : layout.cross) {
    CrossLayer layer;
    layer.rank = static_cast<int>(spec.v.shape[0]);
    layer.n = static_cast<int>(spec.v.shape[1]);
    for (auto [t, out] : {std::make_pair(&spec.v, &layer.v),
                          std::make_pair(&spec.w, &layer.w),
                          std::make_pair(&spec.bias, &layer.bias)}) {
      if (absl::Status s = CopyFloats(*file, *t, out); !s.ok()) return s;
    }
    model->cross.push_back(std::move(layer));
  }
  for (const LinearTensors& spec : layout.top) {
    absl::StatusOr<Linear> layer = LoadLinear(*file, spec);
    if (!layer.ok()) return layer.status();
    model->top.push_back(*std::move(layer));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Model>> LoadModel(
    const std::string& directory, int64_t version,
    const std::string& expected_name) {
  const std::string config_path = absl::StrCat(directory, "/model.pbtxt");
  absl::StatusOr<ModelConfig> config = ReadModelConfig(config_path);
  if (!config.ok()) return config.status();
  if (!expected_name.empty() && config->name() != expected_name) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": name: '", config->name(),
                     "' must equal the model's directory name '",
                     expected_name, "'"));
  }

  const std::string weights_path =
      absl::StrCat(directory, "/weights.safetensors");
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(weights_path);
  if (!file.ok()) return file.status();

  const ModelTensorLayout layout = ExpectedTensorLayout(*config);
  ErrorList errors(weights_path);
  CheckTensors(*config, **file, layout, &errors);
  if (!errors.empty()) return errors.ToStatus();

  auto model = std::make_shared<Model>();
  model->name = config->name();
  model->version = version;
  model->directory = directory;
  model->config = *std::move(config);
  if (absl::Status s = BuildModel(*file, layout, model.get()); !s.ok()) {
    return s;
  }
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace rankd::engine
