#include "server/kserve_conversion.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "engine/model/error_text.h"

namespace rankd::server {
namespace {

using inference::InferTensorContents;
using inference::ModelInferRequest;

// What an input tensor is to the model.
enum class Kind { kDense, kIds, kLengths, kWeights };

struct Role {
  Kind kind = Kind::kDense;
  int feature = -1;  // for every kind but kDense
};

const char* Datatype(Kind k) {
  switch (k) {
    case Kind::kIds:
      return "INT64";
    case Kind::kLengths:
      return "INT32";
    default:
      return "FP32";
  }
}

const char* ContentsField(Kind k) {
  switch (k) {
    case Kind::kIds:
      return "int64_contents";
    case Kind::kLengths:
      return "int_contents";
    default:
      return "fp32_contents";
  }
}

int FindFeature(const engine::Model& m, absl::string_view name) {
  for (size_t f = 0; f < m.features.size(); ++f) {
    if (m.features[f].name == name) return static_cast<int>(f);
  }
  return -1;
}

// The tensor's role, or false for a name the model does not take. A
// feature's own name wins over a suffix (a feature may be named "x.lengths").
bool RoleOf(const engine::Model& m, absl::string_view name, Role* role) {
  if (name == "dense") {
    *role = {Kind::kDense, -1};
    return true;
  }
  if (int f = FindFeature(m, name); f >= 0) {
    *role = {Kind::kIds, f};
    return true;
  }
  for (const auto& [suffix, kind] : {std::pair<absl::string_view, Kind>{".lengths", Kind::kLengths},
                                     {".weights", Kind::kWeights}}) {
    if (absl::EndsWith(name, suffix)) {
      const int f = FindFeature(m, name.substr(0, name.size() - suffix.size()));
      if (f >= 0) {
        *role = {kind, f};
        return true;
      }
    }
  }
  return false;
}

std::string TensorNames(const engine::Model& m) {
  std::vector<std::string> names;
  if (m.num_dense > 0) names.push_back("dense");
  for (const auto& f : m.features) {
    names.push_back(f.name);
    names.push_back(f.name + ".lengths");
    names.push_back(f.name + ".weights (optional)");
  }
  return engine::TruncateForError(absl::StrJoin(names, ", "), 4 * engine::kMaxQuotedBytes);
}

std::string Quoted(absl::string_view name) {
  return absl::StrCat("input \"", engine::TruncateForError(name), "\"");
}

// Elements of `shape` (rank `rank`), or an error naming the tensor.
absl::StatusOr<int64_t> Elements(const ModelInferRequest::InferInputTensor& t, int rank,
                                 absl::string_view expected) {
  if (t.shape_size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": shape has ",
                                                   t.shape_size(), " dimensions, expected ",
                                                   expected));
  }
  int64_t n = 1;
  for (int i = 0; i < t.shape_size(); ++i) {
    const int64_t d = t.shape(i);
    if (d < 0 || d > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": shape[", i, "] is ", d,
                                                     ", expected a size in [0, 2^31)"));
    }
    n *= d;
    if (n > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(t.name()), ": shape has more than 2^40 elements"));
    }
  }
  return n;
}

// The names of the typed fields of `c` that hold elements.
std::vector<std::string> FilledFields(const InferTensorContents& c) {
  std::vector<std::string> out;
  if (c.bool_contents_size() > 0) out.push_back("bool_contents");
  if (c.int_contents_size() > 0) out.push_back("int_contents");
  if (c.int64_contents_size() > 0) out.push_back("int64_contents");
  if (c.uint_contents_size() > 0) out.push_back("uint_contents");
  if (c.uint64_contents_size() > 0) out.push_back("uint64_contents");
  if (c.fp32_contents_size() > 0) out.push_back("fp32_contents");
  if (c.fp64_contents_size() > 0) out.push_back("fp64_contents");
  if (c.bytes_contents_size() > 0) out.push_back("bytes_contents");
  return out;
}

template <typename T>
absl::Span<const T> TypedSpan(const InferTensorContents& c);
template <>
absl::Span<const float> TypedSpan<float>(const InferTensorContents& c) {
  return absl::MakeConstSpan(c.fp32_contents().data(), c.fp32_contents_size());
}
template <>
absl::Span<const int64_t> TypedSpan<int64_t>(const InferTensorContents& c) {
  return absl::MakeConstSpan(c.int64_contents().data(), c.int64_contents_size());
}
template <>
absl::Span<const int32_t> TypedSpan<int32_t>(const InferTensorContents& c) {
  return absl::MakeConstSpan(c.int_contents().data(), c.int_contents_size());
}

// The elements of input `i` as T: a view of the message's typed field or raw
// bytes, or of an aligned copy in `out->copies`.
template <typename T>
absl::StatusOr<absl::Span<const T>> Elements(const ModelInferRequest& r, int i, Kind kind,
                                             int64_t n, KServeRequest* out) {
  const ModelInferRequest::InferInputTensor& t = r.inputs(i);
  if (out->raw) {
    const std::string& bytes = r.raw_input_contents(i);
    if (static_cast<int64_t>(bytes.size()) != n * static_cast<int64_t>(sizeof(T))) {
      return absl::InvalidArgumentError(absl::StrCat(
          Quoted(t.name()), ": raw_input_contents[", i, "] has ", bytes.size(),
          " bytes; shape and datatype ", Datatype(kind), " need ", n * sizeof(T)));
    }
    return ViewOrCopy<T>(bytes, &out->copies);
  }
  const std::vector<std::string> filled = FilledFields(t.contents());
  const char* want = ContentsField(kind);
  for (const std::string& f : filled) {
    if (f != want) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": datatype ",
                                                     Datatype(kind), " elements belong in contents.",
                                                     want, ", got contents.", f));
    }
  }
  absl::Span<const T> view = TypedSpan<T>(t.contents());
  if (static_cast<int64_t>(view.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": shape has ", n,
                                                   " elements, contents.", want, " has ",
                                                   view.size()));
  }
  return view;
}

absl::Status CheckOutputs(const ModelInferRequest& r) {
  for (int i = 0; i < r.outputs_size(); ++i) {
    if (r.outputs(i).name() != kKServeScoresTensor) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "]: unknown output \"", engine::TruncateForError(r.outputs(i).name()),
          "\"; the model gives \"", kKServeScoresTensor, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRawForm(const ModelInferRequest& r) {
  if (r.raw_input_contents_size() == 0) return absl::OkStatus();
  if (r.raw_input_contents_size() != r.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents has ", r.raw_input_contents_size(),
                     " entries for ", r.inputs_size(), " inputs (one per input, in order)"));
  }
  for (const auto& t : r.inputs()) {
    if (t.has_contents()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(t.name()),
                       ": contents set while the request uses raw_input_contents (one form or "
                       "the other for every input)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseKServeVersion(const std::string& version) {
  if (version.empty()) return 0;
  int64_t v = 0;
  const bool digits = version.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || !absl::SimpleAtoi(version, &v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_version: \"", engine::TruncateForError(version),
                     "\" is not a version number (a positive integer, or empty for the latest)"));
  }
  return v;
}

absl::Status ToEngineRequest(const engine::Model& model, const ModelInferRequest& request,
                             const engine::RequestLimits& limits, KServeRequest* out) {
  if (absl::Status s = CheckOutputs(request); !s.ok()) return s;
  if (absl::Status s = CheckRawForm(request); !s.ok()) return s;
  out->raw = request.raw_input_contents_size() > 0;
  engine::Request& er = out->request;
  er.features.assign(model.features.size(), engine::FeatureInput{});
  // Which input filled each role: dense, then ids / lengths / weights per feature.
  absl::InlinedVector<int, 64> seen(1 + 3 * model.features.size(), -1);
  int64_t batch = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& t = request.inputs(i);
    Role role;
    if (!RoleOf(model, t.name(), &role)) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": unknown tensor; model \"",
                                                     model.name, "\" takes ", TensorNames(model)));
    }
    const size_t slot = role.kind == Kind::kDense
                            ? 0
                            : 1 + 3 * role.feature +
                                  (role.kind == Kind::kIds ? 0 : role.kind == Kind::kLengths ? 1 : 2);
    if (seen[slot] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": appears twice (also inputs[",
                                                     seen[slot], "])"));
    }
    seen[slot] = i;
    if (t.datatype() != Datatype(role.kind)) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": datatype \"",
                                                     engine::TruncateForError(t.datatype()),
                                                     "\", expected ", Datatype(role.kind)));
    }
    const bool is_dense = role.kind == Kind::kDense;
    absl::StatusOr<int64_t> n =
        Elements(t, is_dense ? 2 : 1, is_dense ? "2: [batch, num_dense]" : "1");
    if (!n.ok()) return n.status();
    if (is_dense) {
      if (t.shape(1) != model.num_dense) {
        return absl::InvalidArgumentError(absl::StrCat(Quoted(t.name()), ": shape[1] is ",
                                                       t.shape(1), "; model \"", model.name,
                                                       "\" has ", model.num_dense,
                                                       " dense features"));
      }
      batch = t.shape(0);
      auto v = Elements<float>(request, i, role.kind, *n, out);
      if (!v.ok()) return v.status();
      er.dense = *v;
      continue;
    }
    engine::FeatureInput& fi = er.features[role.feature];
    if (role.kind == Kind::kIds) {
      auto v = Elements<int64_t>(request, i, role.kind, *n, out);
      if (!v.ok()) return v.status();
      fi.ids = *v;
    } else if (role.kind == Kind::kLengths) {
      auto v = Elements<int32_t>(request, i, role.kind, *n, out);
      if (!v.ok()) return v.status();
      fi.lengths = *v;
    } else {
      auto v = Elements<float>(request, i, role.kind, *n, out);
      if (!v.ok()) return v.status();
      fi.weights = *v;
    }
  }
  if (model.num_dense > 0 && seen[0] < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input \"dense\" is missing: model \"", model.name, "\" takes FP32 [batch, ",
        model.num_dense, "]"));
  }
  for (size_t f = 0; f < model.features.size(); ++f) {
    for (int part = 0; part < 2; ++part) {
      if (seen[1 + 3 * f + part] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            Quoted(model.features[f].name + (part == 0 ? "" : ".lengths")),
            " is missing (every sparse feature takes <name> INT64 and <name>.lengths INT32)"));
      }
    }
  }
  if (seen[0] < 0) {  // no dense input: B is the longest lengths
    for (const engine::FeatureInput& fi : er.features) {
      batch = std::max<int64_t>(batch, static_cast<int64_t>(fi.lengths.size()));
    }
  }
  er.num_candidates = static_cast<int32_t>(std::max<int64_t>(batch, 0));
  return engine::ValidateRequest(model, er, limits);
}

absl::Span<float> PrepareKServeResponse(const std::string& model_name, int64_t version,
                                        const std::string& id, int32_t num_scores, bool raw,
                                        inference::ModelInferResponse* response) {
  response->set_model_name(model_name);
  response->set_model_version(absl::StrCat(version));
  response->set_id(id);
  auto* t = response->add_outputs();
  t->set_name(kKServeScoresTensor);
  t->set_datatype("FP32");
  t->add_shape(num_scores);
  if (raw) {
    std::string* bytes = response->add_raw_output_contents();
    bytes->assign(sizeof(float) * num_scores, '\0');
    // std::string's buffer is aligned for any fundamental type (heap: new's
    // alignment; short strings: inside the object, which is 8-aligned).
    return absl::MakeSpan(reinterpret_cast<float*>(bytes->data()), num_scores);
  }
  auto* scores = t->mutable_contents()->mutable_fp32_contents();
  scores->Resize(num_scores, 0.0f);
  return absl::MakeSpan(scores->mutable_data(), num_scores);
}

void KServeModelInputs(const engine::Model& model, inference::ModelMetadataResponse* response) {
  auto add = [response](const std::string& name, const char* datatype,
                        std::initializer_list<int64_t> shape) {
    auto* t = response->add_inputs();
    t->set_name(name);
    t->set_datatype(datatype);
    for (int64_t d : shape) t->add_shape(d);
  };
  if (model.num_dense > 0) add("dense", "FP32", {-1, model.num_dense});
  for (const auto& f : model.features) {
    add(f.name, "INT64", {-1});
    add(f.name + ".lengths", "INT32", {f.request_level ? 1 : -1});
    add(f.name + ".weights", "FP32", {-1});
  }
  auto* out = response->add_outputs();
  out->set_name(kKServeScoresTensor);
  out->set_datatype("FP32");
  out->add_shape(-1);
}

}  // namespace rankd::server
