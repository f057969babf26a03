#include "engine/request_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine {
namespace {

std::string FeatureField(const SparseFeature& f, const char* field) {
  return absl::StrCat("sparse feature \"", f.name, "\".", field);
}

// The largest magnitude a value may have: --max_abs_input, never more than
// the largest finite float (values must be finite whatever the bound).
float MagnitudeBound(const RequestLimits& limits) {
  const float finite = std::numeric_limits<float>::max();
  return limits.max_abs_input > 0 ? std::min(limits.max_abs_input, finite) : finite;
}

// Index of the first value that is not finite or beyond the bound, or -1.
// Every request's dense values and weights pass through here, so the common
// case is one branch-free pass the compiler vectorizes (|v| <= bound is false
// for NaN and for +-Inf); only a refused request is scanned again for where.
int64_t FirstBadValue(absl::Span<const float> values, const RequestLimits& limits) {
  const float bound = MagnitudeBound(limits);
  bool all_ok = true;
  for (const float v : values) all_ok &= std::fabs(v) <= bound;
  if (all_ok) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(std::fabs(values[i]) <= bound)) return static_cast<int64_t>(i);
  }
  return -1;
}

// Why `v` (a value FirstBadValue refused) is refused.
std::string BadValue(float v, const RequestLimits& limits) {
  if (!std::isfinite(v)) return absl::StrCat(v, " is not a finite number");
  return absl::StrCat(v, " exceeds the server's bound of ", limits.max_abs_input,
                      " on input magnitudes (--max_abs_input; larger values "
                      "overflow the model's float32 arithmetic)");
}

absl::Status CheckIdsResolve(const EmbeddingTable& table,
                             const SparseFeature& feature,
                             absl::Span<const int64_t> ids) {
  if (table.id_policy != rankd::v1::ERROR) return absl::OkStatus();
  const kernels::HashTableView hash = table.hash.view();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (table.dynamic) {
      if (kernels::HashLookup(hash, id) == kernels::kMissingRow) {
        return absl::InvalidArgumentError(absl::StrCat(
            FeatureField(feature, "ids"), "[", i, "]: key ", id,
            " is not in dynamic table \"", table.name,
            "\" (its id_policy is ERROR)"));
      }
    } else if (id < 0 || id >= table.num_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeatureField(feature, "ids"), "[", i, "]: id ", id,
          " is out of range [0, ", table.num_rows, ") of table \"",
          table.name, "\" (its id_policy is ERROR)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFeature(const Model& model, const SparseFeature& feature,
                             const FeatureInput& in, int32_t num_candidates,
                             const RequestLimits& limits) {
  const size_t n_lengths = in.lengths.size();
  if (feature.request_level) {
    if (n_lengths != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeatureField(feature, "lengths"), ": has ", n_lengths,
          " entries; a request-level feature takes exactly 1 (one bag shared "
          "by all candidates)"));
    }
  } else if (n_lengths != static_cast<size_t>(num_candidates) && n_lengths != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeatureField(feature, "lengths"), ": has ", n_lengths,
        " entries; expected num_candidates (", num_candidates,
        ") or 1 (shared by all candidates)"));
  }
  int64_t total = 0;
  for (size_t b = 0; b < n_lengths; ++b) {
    const int32_t len = in.lengths[b];
    if (len < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeatureField(feature, "lengths"), "[", b, "]: ", len,
          " is negative"));
    }
    if (feature.max_ids_per_bag > 0 && len > feature.max_ids_per_bag) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeatureField(feature, "lengths"), "[", b, "]: ", len,
          " ids exceed the feature's max_ids_per_bag (",
          feature.max_ids_per_bag, ")"));
    }
    total += len;
  }
  if (total != static_cast<int64_t>(in.ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeatureField(feature, "ids"), ": has ", in.ids.size(),
        " ids but its lengths add up to ", total));
  }
  if (limits.max_ids_per_feature > 0 && total > limits.max_ids_per_feature) {
    return absl::InvalidArgumentError(absl::StrCat(
        FeatureField(feature, "ids"), ": ", total,
        " ids exceed the server's limit of ", limits.max_ids_per_feature,
        " per feature (--max_ids_per_feature)"));
  }
  if (!in.weights.empty()) {
    if (in.weights.size() != in.ids.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          FeatureField(feature, "weights"), ": has ", in.weights.size(),
          " values; expected none or one per id (", in.ids.size(), ")"));
    }
    if (const int64_t i = FirstBadValue(in.weights, limits); i >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(FeatureField(feature, "weights"), "[", i,
                                                     "]: ", BadValue(in.weights[i], limits)));
    }
  }
  return CheckIdsResolve(model.tables[feature.table], feature, in.ids);
}

}  // namespace

absl::Status ValidateRequest(const Model& model, const Request& request,
                             const RequestLimits& limits) {
  const int32_t b = request.num_candidates;
  if (b <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_candidates: must be > 0, got ", b));
  }
  if (limits.max_candidates > 0 && b > limits.max_candidates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_candidates: ", b, " exceeds the server's limit of ",
        limits.max_candidates, " (--max_candidates)"));
  }
  const int64_t want_dense = static_cast<int64_t>(b) * model.num_dense;
  if (static_cast<int64_t>(request.dense.size()) != want_dense) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dense: has ", request.dense.size(), " values; expected ", want_dense,
        " (num_candidates ", b, " x num_dense ", model.num_dense, ")"));
  }
  if (const int64_t i = FirstBadValue(request.dense, limits); i >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("dense[", i, "] (candidate ",
                                                   i / model.num_dense, ", feature ",
                                                   i % model.num_dense, "): ",
                                                   BadValue(request.dense[i], limits)));
  }
  if (request.features.size() != model.features.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse: has ", request.features.size(), " features; the model has ",
        model.features.size()));
  }
  for (size_t f = 0; f < model.features.size(); ++f) {
    absl::Status s = ValidateFeature(model, model.features[f],
                                     request.features[f], b, limits);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine
