// Semantic checks of model.pbtxt. Every message names the field the way a
// user finds it in the file ("tables[2].dim") and says what was expected and
// what was found.
#include "engine/model/model_config_validation.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/model_config_defaults.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_shapes.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;
using rankd::v1::TableConfig;

bool AllCharsIn(const std::string& s, const char* extra) {
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') ||
                    (c != '\0' && std::string(extra).find(c) != std::string::npos);
    if (!ok) return false;
  }
  return true;
}

void CheckName(const ModelConfig& c, ErrorList* e) {
  if (c.name().empty()) {
    e->Add("name: must be set");
  } else if (!AllCharsIn(c.name(), "_.-") || c.name()[0] == '.') {
    // The name is also the model's directory name and appears in metric
    // labels and URLs.
    e->Addf("name: '", c.name(),
            "' may only contain letters, digits, '_', '.' and '-', and may not "
            "start with '.'");
  }
}

void CheckTableInit(const rankd::v1::TableInit& init, const std::string& field,
                    ErrorList* e) {
  if (!rankd::v1::TableInitKind_IsValid(init.kind())) {
    e->Addf(field, ".kind: unknown value ", init.kind(),
            " (expected FILE or RANDOM)");
    return;
  }
  if (init.kind() == rankd::v1::RANDOM) {
    if (!std::isfinite(init.scale()) || init.scale() < 0) {
      e->Addf(field, ".scale: must be finite and >= 0 (0 = 1/sqrt(num_rows)), "
              "got ", init.scale());
    }
    return;
  }
  // A seed or scale on a FILE table would be silently meaningless: more
  // likely a forgotten `kind: RANDOM`.
  if (init.seed() != 0) {
    e->Addf(field, ".seed: only RANDOM init takes a seed (kind is FILE), got ",
            init.seed());
  }
  if (init.scale() != 0) {
    e->Addf(field, ".scale: only RANDOM init takes a scale (kind is FILE), got ",
            init.scale());
  }
}

void CheckTable(const TableConfig& t, const std::string& field, ErrorList* e) {
  if (t.name().empty()) {
    e->Addf(field, ".name: must be set");
  } else if (!AllCharsIn(t.name(), "_-")) {
    // No '.': DCN_V2 models put the name inside dotted tensor names.
    e->Addf(field, ".name: '", t.name(),
            "' may only contain letters, digits, '_' and '-'");
  }
  if (!rankd::v1::TableKind_IsValid(t.kind())) {
    e->Addf(field, ".kind: unknown value ", t.kind());
  }
  if (!rankd::v1::DataType_IsValid(t.dtype())) {
    e->Addf(field, ".dtype: unknown value ", t.dtype());
  }
  if (!rankd::v1::PoolingMode_IsValid(t.pooling())) {
    e->Addf(field, ".pooling: unknown value ", t.pooling());
  }
  if (!rankd::v1::Placement_IsValid(t.placement())) {
    e->Addf(field, ".placement: unknown value ", t.placement());
  }
  if (!rankd::v1::IdPolicy_IsValid(t.id_policy())) {
    e->Addf(field, ".id_policy: unknown value ", t.id_policy());
  }
  if (t.num_rows() <= 0) {
    e->Addf(field, ".num_rows: must be > 0, got ", t.num_rows());
  }
  if (t.dim() <= 0) e->Addf(field, ".dim: must be > 0, got ", t.dim());
  if (t.kind() == rankd::v1::DYNAMIC) {
    if (t.num_rows() > 0 && t.capacity() < t.num_rows()) {
      e->Addf(field, ".capacity: must be >= num_rows (", t.num_rows(),
              "), got ", t.capacity());
    }
    if (t.max_keys() > (int64_t{1} << 40)) {
      e->Addf(field, ".max_keys: at most 2^40 keys, got ", t.max_keys());
    } else if (t.max_keys() < t.num_rows()) {
      e->Addf(field, ".max_keys: must be >= num_rows (", t.num_rows(),
              "), got ", t.max_keys());
    } else if (t.capacity() < t.max_keys()) {
      e->Addf(field, ".capacity: must be >= max_keys (", t.max_keys(),
              "), got ", t.capacity(), " (capacity counts hash slots)");
    }
    if (!rankd::v1::Eviction_IsValid(t.eviction())) {
      e->Addf(field, ".eviction: unknown value ", t.eviction());
    }
  } else {
    if (t.capacity() != 0) {
      e->Addf(field, ".capacity: only DYNAMIC tables have a capacity, got ",
              t.capacity());
    }
    if (t.max_keys() != 0) {
      e->Addf(field, ".max_keys: only DYNAMIC tables have max_keys, got ",
              t.max_keys());
    }
    if (t.eviction() != rankd::v1::EVICTION_UNSPECIFIED) {
      e->Addf(field, ".eviction: only DYNAMIC tables evict");
    }
  }
  if (!t.default_vector().empty() && t.default_vector_size() != t.dim()) {
    e->Addf(field, ".default_vector: must be empty or hold dim (", t.dim(),
            ") values, got ", t.default_vector_size());
  }
  for (int k = 0; k < t.default_vector_size(); ++k) {
    if (!std::isfinite(t.default_vector(k))) {
      e->Addf(field, ".default_vector[", k, "]: must be finite, got ",
              t.default_vector(k));
    }
  }
  CheckTableInit(t.init(), field + ".init", e);
}

// Returns table name -> index (first occurrence).
std::map<std::string, int> CheckTables(const ModelConfig& c, ErrorList* e) {
  std::map<std::string, int> index;
  if (c.tables().empty()) e->Add("tables: at least one table is required");
  for (int i = 0; i < c.tables_size(); ++i) {
    const std::string field = absl::StrCat("tables[", i, "]");
    const TableConfig& t = c.tables(i);
    CheckTable(t, field, e);
    if (t.name().empty()) continue;
    auto [it, inserted] = index.emplace(t.name(), i);
    if (!inserted) {
      e->Addf(field, ".name: duplicate '", t.name(), "' (also tables[",
              it->second, "])");
    }
  }
  return index;
}

void CheckFeatures(const ModelConfig& c,
                   const std::map<std::string, int>& tables, ErrorList* e) {
  if (c.sparse_features().empty()) {
    e->Add("sparse_features: at least one feature is required");
  }
  std::map<std::string, int> names;
  for (int i = 0; i < c.sparse_features_size(); ++i) {
    const std::string field = absl::StrCat("sparse_features[", i, "]");
    const rankd::v1::SparseFeatureConfig& f = c.sparse_features(i);
    if (f.name().empty()) {
      e->Addf(field, ".name: must be set");
    } else if (auto [it, inserted] = names.emplace(f.name(), i); !inserted) {
      e->Addf(field, ".name: duplicate '", f.name(), "' (also sparse_features[",
              it->second, "])");
    }
    if (f.table().empty()) {
      e->Addf(field, ".table: must be set");
    } else if (tables.count(f.table()) == 0) {
      e->Addf(field, ".table: no table named '", f.table(), "'");
    }
    if (f.max_ids_per_bag() < 0) {
      e->Addf(field, ".max_ids_per_bag: must be >= 0, got ",
              f.max_ids_per_bag());
    }
  }
}

void CheckMlp(const google::protobuf::RepeatedField<int32_t>& widths,
              const char* field, ErrorList* e) {
  for (int i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      e->Addf(field, "[", i, "]: must be > 0, got ", widths[i]);
    }
  }
}

// DOT and DCN_V2 stack x and every embedding as equal-width vectors.
void CheckEqualDims(const ModelConfig& c,
                    const std::map<std::string, int>& tables, ErrorList* e) {
  const int d = DenseOutWidth(c);
  const std::string x_desc =
      c.bottom_mlp().empty()
          ? absl::StrCat("num_dense (", d, "), as there is no bottom_mlp")
          : absl::StrCat("the bottom MLP output width (bottom_mlp[",
                         c.bottom_mlp_size() - 1, "] = ", d, ")");
  const char* kind =
      c.interaction().kind() == rankd::v1::DCN_V2 ? "DCN_V2" : "DOT";
  std::set<int> reported;
  for (const rankd::v1::SparseFeatureConfig& f : c.sparse_features()) {
    auto it = tables.find(f.table());
    if (it == tables.end() || !reported.insert(it->second).second) continue;
    const TableConfig& t = c.tables(it->second);
    if (t.dim() > 0 && t.dim() != d) {
      e->Addf("tables[", it->second, "].dim: ", kind,
              " interaction needs every feature's dim to equal ", x_desc,
              ", got ", t.dim(), " (table '", t.name(), "', feature '",
              f.name(), "')");
    }
  }
}

void CheckInteraction(const ModelConfig& c,
                      const std::map<std::string, int>& tables, ErrorList* e) {
  const rankd::v1::InteractionConfig& in = c.interaction();
  if (!rankd::v1::InteractionKind_IsValid(in.kind())) {
    e->Addf("interaction.kind: unknown value ", in.kind());
    return;
  }
  const bool dcn = in.kind() == rankd::v1::DCN_V2;
  if (in.self_interaction() && in.kind() != rankd::v1::DOT) {
    e->Add("interaction.self_interaction: only DOT interactions have it");
  }
  if (dcn) {
    if (in.dcn_num_layers() <= 0) {
      e->Addf("interaction.dcn_num_layers: must be > 0 for DCN_V2, got ",
              in.dcn_num_layers());
    }
    if (in.dcn_low_rank() <= 0) {
      e->Addf("interaction.dcn_low_rank: must be > 0 for DCN_V2, got ",
              in.dcn_low_rank());
    }
  } else if (in.dcn_num_layers() != 0 || in.dcn_low_rank() != 0) {
    e->Add("interaction.dcn_num_layers / dcn_low_rank: only DCN_V2 "
           "interactions have them");
  }
  if (in.kind() == rankd::v1::DOT || dcn) CheckEqualDims(c, tables, e);
}

void CheckTopMlp(const ModelConfig& c, ErrorList* e) {
  if (c.top_mlp().empty()) {
    e->Add("top_mlp: must be set (its last width is 1, the logit)");
    return;
  }
  CheckMlp(c.top_mlp(), "top_mlp", e);
  const int last = c.top_mlp_size() - 1;
  if (c.top_mlp(last) != 1) {
    e->Addf("top_mlp[", last, "]: the last width must be 1 (the logit), got ",
            c.top_mlp(last));
  }
}

template <typename T>
void CheckPositive(T value, const char* field, ErrorList* e) {
  if (value <= 0) e->Addf(field, ": must be > 0, got ", value);
}

void CheckBatching(const rankd::v1::BatchingConfig& b, ErrorList* e) {
  CheckPositive(b.max_batch_candidates(), "batching.max_batch_candidates", e);
  if (b.max_queue_delay_us() < 0) {
    e->Addf("batching.max_queue_delay_us: must be >= 0 (0 = no wait), got ",
            b.max_queue_delay_us());
  }
  CheckPositive(b.preferred_batch_candidates(),
                "batching.preferred_batch_candidates", e);
  CheckPositive(b.max_queue_requests(), "batching.max_queue_requests", e);
  CheckPositive(b.default_timeout_us(), "batching.default_timeout_us", e);
  if (b.max_batch_candidates() > 0 &&
      b.preferred_batch_candidates() > b.max_batch_candidates()) {
    e->Addf("batching.preferred_batch_candidates: must be <= "
            "max_batch_candidates (",
            b.max_batch_candidates(), "), got ", b.preferred_batch_candidates());
  }
}

void CheckInstances(const rankd::v1::InstanceConfig& in, ErrorList* e) {
  bool in_range = true;
  if (in.workers_per_device() < 0 || in.workers_per_device() > kMaxWorkersPerDevice) {
    e->Addf("instances.workers_per_device: must be in [0, ", kMaxWorkersPerDevice,
            "] (0 = automatic), got ", in.workers_per_device());
    in_range = false;
  }
  if (in.cpu_threads_per_worker() < 0 || in.cpu_threads_per_worker() > kMaxCpuThreadsPerWorker) {
    e->Addf("instances.cpu_threads_per_worker: must be in [0, ", kMaxCpuThreadsPerWorker,
            "] (0 = automatic), got ", in.cpu_threads_per_worker());
    in_range = false;
  }
  if (!in_range) return;
  const int64_t threads = int64_t{in.workers_per_device()} * int64_t{in.cpu_threads_per_worker()};
  if (threads > kMaxCpuThreadsPerInstance) {
    e->Addf("instances: workers_per_device (", in.workers_per_device(),
            ") x cpu_threads_per_worker (", in.cpu_threads_per_worker(), ") must be at most ",
            kMaxCpuThreadsPerInstance, " threads, got ", threads);
  }
}

}  // namespace

void CheckModelConfig(ModelConfig* config, ErrorList* errors) {
  FillModelConfigDefaults(config);
  const ModelConfig& c = *config;
  const size_t before = errors->size();
  CheckName(c, errors);
  if (c.num_dense() < 0) {
    errors->Addf("num_dense: must be >= 0, got ", c.num_dense());
  }
  const std::map<std::string, int> tables = CheckTables(c, errors);
  CheckFeatures(c, tables, errors);
  CheckMlp(c.bottom_mlp(), "bottom_mlp", errors);
  if (!c.bottom_mlp().empty() && c.num_dense() == 0) {
    errors->Add("bottom_mlp: needs num_dense > 0 (it has no input otherwise)");
  }
  CheckInteraction(c, tables, errors);
  CheckTopMlp(c, errors);
  CheckBatching(c.batching(), errors);
  CheckInstances(c.instances(), errors);
  // Only meaningful once everything it is computed from is valid.
  if (errors->size() == before) {
    const int64_t width = InteractionWidth(c);
    if (width <= 0 || width > std::numeric_limits<int32_t>::max()) {
      errors->Addf("interaction: width ", width,
                   " (the top MLP's input) is out of range");
    }
  }
}

absl::Status ValidateModelConfig(rankd::v1::ModelConfig* config) {
  ErrorList errors;
  CheckModelConfig(config, &errors);
  return errors.ToStatus();
}

}  // namespace rankd::engine
