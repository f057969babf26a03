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

// GCC's -O2 cost model vectorizes only loops with no scalar remainder: the
// checks every request's arrays pass through run in blocks of this length,
// each a loop the compiler vectorizes, and a scalar tail.
constexpr size_t kBlock = 64;

// Index of the first value that is not finite or beyond the bound, or -1.
// Every request's dense values and weights pass through here, so the common
// case is one branch-free pass (|v| <= bound is false for NaN and for
// +-Inf); only a refused request is scanned again for where.
int64_t FirstBadValue(absl::Span<const float> values, const RequestLimits& limits) {
  const float bound = MagnitudeBound(limits);
  const size_t n = values.size();
  const float* v = values.data();
  bool all_ok = true;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    bool block_ok = true;
    for (size_t j = 0; j < kBlock; ++j) block_ok &= std::fabs(v[i + j]) <= bound;
    all_ok &= block_ok;
  }
  for (; i < n; ++i) all_ok &= std::fabs(v[i]) <= bound;
  if (all_ok) return -1;
  for (i = 0; i < n; ++i) {
    if (!(std::fabs(v[i]) <= bound)) return static_cast<int64_t>(i);
  }
  return -1;
}

// The smallest and largest of a feature's bag lengths and their sum, in one
// branch-free pass: a request whose lengths are all in range (the common
// case) is checked without a branch per bag.
struct LengthRange {
  int32_t min = std::numeric_limits<int32_t>::max();
  int32_t max = std::numeric_limits<int32_t>::min();
  int64_t total = 0;
};

LengthRange RangeOf(absl::Span<const int32_t> lengths) {
  const size_t n = lengths.size();
  const int32_t* l = lengths.data();
  LengthRange r;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int32_t lo = r.min;
    int32_t hi = r.max;
    int64_t sum = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      lo = std::min(lo, l[i + j]);
      hi = std::max(hi, l[i + j]);
      sum += l[i + j];
    }
    r.min = lo;
    r.max = hi;
    r.total += sum;
  }
  for (; i < n; ++i) {
    r.min = std::min(r.min, l[i]);
    r.max = std::max(r.max, l[i]);
    r.total += l[i];
  }
  return r;
}

// Why `v` (a value FirstBadValue refused) is refused.
std::string BadValue(float v, const RequestLimits& limits) {
  if (!std::isfinite(v)) return absl::StrCat(v, " is not a finite number");
  return absl::StrCat(v, " exceeds the server's bound of ", limits.max_abs_input,
                      " on input magnitudes (--max_abs_input; larger values "
                      "overflow the model's float32 arithmetic)");
}

// Whether every id is in [0, num_rows), in one branch-free pass the
// compiler vectorizes with 64-bit subtractions and ORs only (x86-64's
// baseline has no 64-bit compare): id is in range iff neither id nor
// (num_rows - 1 - id) has its sign bit set, computed in unsigned arithmetic
// so nothing overflows.
bool AllIdsInRange(absl::Span<const int64_t> ids, int64_t num_rows) {
  const uint64_t last = static_cast<uint64_t>(num_rows) - 1;
  const size_t n = ids.size();
  const int64_t* id = ids.data();
  uint64_t signs = 0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint64_t block = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      const uint64_t v = static_cast<uint64_t>(id[i + j]);
      block |= v | (last - v);
    }
    signs |= block;
  }
  for (; i < n; ++i) {
    const uint64_t v = static_cast<uint64_t>(id[i]);
    signs |= v | (last - v);
  }
  return (signs >> 63) == 0;
}

absl::Status CheckIdsResolve(const EmbeddingTable& table,
                             const SparseFeature& feature,
                             absl::Span<const int64_t> ids) {
  if (table.id_policy != rankd::v1::ERROR) return absl::OkStatus();
  // A static table's ids are checked in one pass; a request refused is
  // scanned again below for the first id out of range.
  if (!table.dynamic && AllIdsInRange(ids, table.num_rows)) return absl::OkStatus();
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

// The error for the first bag whose length is negative or over the
// feature's max_ids_per_bag (RangeOf found one).
absl::Status FirstBadLength(const SparseFeature& feature, absl::Span<const int32_t> lengths) {
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int32_t len = lengths[b];
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
  }
  return absl::InternalError("FirstBadLength: no bad length");
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
  const LengthRange range = RangeOf(in.lengths);
  if (range.min < 0 || (feature.max_ids_per_bag > 0 && range.max > feature.max_ids_per_bag)) {
    return FirstBadLength(feature, in.lengths);
  }
  const int64_t total = range.total;
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
