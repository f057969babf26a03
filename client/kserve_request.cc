#include "client/kserve_request.h"

#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rankd::client {
namespace {

// Appends one input tensor of `n` elements from `data` (little-endian hosts:
// the bytes are the wire form).
template <typename T>
void AddInput(const std::string& name, const char* datatype, std::vector<int64_t> shape,
              const T* data, size_t n, bool raw, inference::ModelInferRequest* out) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "raw contents are little-endian");
  auto* input = out->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t d : shape) input->add_shape(d);
  if (raw) {
    out->add_raw_input_contents()->assign(reinterpret_cast<const char*>(data), n * sizeof(T));
    return;
  }
  auto* contents = input->mutable_contents();
  if constexpr (std::is_same_v<T, float>) {
    contents->mutable_fp32_contents()->Add(data, data + n);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    contents->mutable_int64_contents()->Add(data, data + n);
  } else {
    contents->mutable_int_contents()->Add(data, data + n);
  }
}

}  // namespace

absl::StatusOr<inference::ModelInferRequest> ToModelInferRequest(
    const rankd::v1::ScoreRequest& request, bool raw) {
  if (!request.version_label().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("version_label: \"", request.version_label(),
                     "\" cannot be sent over KServe, which names versions by number only"));
  }
  const int64_t b = request.num_candidates();
  if (b < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_candidates: must be >= 1, got ", b));
  }
  if (request.dense_size() % b != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dense: ", request.dense_size(),
                                                   " values are not num_candidates (", b,
                                                   ") rows of equal length"));
  }
  inference::ModelInferRequest out;
  out.set_model_name(request.model());
  if (request.version() != 0) out.set_model_version(absl::StrCat(request.version()));
  if (request.dense_size() > 0) {
    AddInput("dense", "FP32", {b, request.dense_size() / b}, request.dense().data(),
             request.dense_size(), raw, &out);
  }
  for (const auto& f : request.sparse()) {
    AddInput(f.name(), "INT64", {f.ids_size()}, f.ids().data(), f.ids_size(), raw, &out);
    AddInput(f.name() + ".lengths", "INT32", {f.lengths_size()}, f.lengths().data(),
             f.lengths_size(), raw, &out);
    if (f.weights_size() > 0) {
      AddInput(f.name() + ".weights", "FP32", {f.weights_size()}, f.weights().data(),
               f.weights_size(), raw, &out);
    }
  }
  return out;
}

absl::StatusOr<KServeScores> FromModelInferResponse(const inference::ModelInferResponse& response) {
  KServeScores out;
  if (!absl::SimpleAtoi(response.model_version(), &out.version) || out.version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_version: \"", response.model_version(), "\" is not a version number"));
  }
  if (response.outputs_size() != 1 || response.outputs(0).name() != "scores") {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs: expected the one tensor \"scores\", got ", response.outputs_size(),
                     response.outputs_size() > 0 ? absl::StrCat(" (first \"",
                                                                response.outputs(0).name(), "\")")
                                                 : ""));
  }
  const auto& t = response.outputs(0);
  if (t.datatype() != "FP32" || t.shape_size() != 1 || t.shape(0) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "outputs[scores]: expected FP32 [B], got ", t.datatype(), " of ", t.shape_size(), " dims"));
  }
  const int64_t n = t.shape(0);
  if (response.raw_output_contents_size() > 0) {
    const std::string& bytes = response.raw_output_contents(0);
    if (response.raw_output_contents_size() != 1 ||
        bytes.size() != static_cast<size_t>(n) * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat("raw_output_contents: ", bytes.size(),
                                                     " bytes for ", n, " FP32 scores"));
    }
    out.scores.resize(n);
    std::memcpy(out.scores.data(), bytes.data(), bytes.size());
    return out;
  }
  if (t.contents().fp32_contents_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("outputs[scores].contents: ",
                                                   t.contents().fp32_contents_size(),
                                                   " values for shape [", n, "]"));
  }
  out.scores.assign(t.contents().fp32_contents().begin(), t.contents().fp32_contents().end());
  return out;
}

}  // namespace rankd::client
