#include "server/http/kserve_json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/error_text.h"
#include "nlohmann/json.hpp"

namespace rankd::server {
namespace {

using json = nlohmann::json;
using inference::ModelInferRequest;

// One input tensor as read: the numbers of `data` are kept as integers
// until the first non-integer, then as doubles (the datatype may come after
// the data, so they are typed once the object ends).
struct InputBuffer {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  bool has_real = false;
  bool seen_name = false, seen_datatype = false, seen_shape = false, seen_data = false;
};

// Where the parser is: which value the next event belongs to.
enum class Slot {
  kTop,          // the body itself
  kEnvelope,     // a member of the body object
  kInputs,       // an element of "inputs"
  kInput,        // a member of an input object
  kShape,        // an element of an input's "shape"
  kData,         // an element (or nested array) of an input's "data"
  kOutputs,      // an element of "outputs"
  kOutput,       // a member of an output object
  kSkip,         // inside a "parameters" value: read and dropped
};

// A SAX handler that fills a ModelInferRequest. Each container pushes a
// frame; `key_` is the member name an object's next value belongs to.
class InferRequestReader final : public nlohmann::json_sax<json> {
 public:
  explicit InferRequestReader(ModelInferRequest* out) : out_(out) {}

  const absl::Status& status() const { return status_; }

  bool null() override { return Scalar("null"); }
  bool boolean(bool) override { return Scalar("a boolean"); }
  bool binary(binary_t&) override { return Scalar("binary data"); }
  bool number_integer(number_integer_t v) override { return Integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Fail(absl::StrCat(Where(), ": ", v, " is out of range for any tensor datatype"));
    }
    return Integer(static_cast<int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Real(v); }

  bool string(string_t& v) override {
    switch (Current()) {
      case Slot::kSkip:
        return true;
      case Slot::kEnvelope:
        if (key_ == "id") {
          out_->set_id(std::move(v));
          return true;
        }
        break;
      case Slot::kInput:
        if (key_ == "name") {
          input().name = std::move(v);
          input().seen_name = true;
          return true;
        }
        if (key_ == "datatype") {
          input().datatype = std::move(v);
          input().seen_datatype = true;
          return true;
        }
        break;
      case Slot::kOutput:
        if (key_ == "name") {
          out_->mutable_outputs(out_->outputs_size() - 1)->set_name(std::move(v));
          return true;
        }
        break;
      default:
        break;
    }
    return Scalar("a string");
  }

  bool start_object(std::size_t) override {
    const Slot slot = Current();
    if (slot == Slot::kTop) return Push(Slot::kEnvelope);
    // key_ is the member being read only while an object's member is.
    const bool member = slot == Slot::kEnvelope || slot == Slot::kInput || slot == Slot::kOutput;
    if (slot == Slot::kSkip || (member && key_ == "parameters")) return Push(Slot::kSkip);
    if (slot == Slot::kInputs) {
      inputs_.emplace_back();
      return Push(Slot::kInput);
    }
    if (slot == Slot::kOutputs) {
      out_->add_outputs();
      return Push(Slot::kOutput);
    }
    return Scalar("an object");
  }

  bool key(string_t& k) override {
    const Slot slot = Current();
    if (slot == Slot::kSkip) {
      if (stack_.size() == skip_base_ + 1 && k == "binary_data_size") {
        return Fail(absl::StrCat(Where(), ": the binary tensor data extension "
                                          "(binary_data_size) is not supported: send the "
                                          "tensor's elements in \"data\""));
      }
      return true;
    }
    static const char* const kEnvelopeKeys[] = {"id", "parameters", "inputs", "outputs"};
    static const char* const kInputKeys[] = {"name", "datatype", "shape", "data", "parameters"};
    static const char* const kOutputKeys[] = {"name", "parameters"};
    auto known = [&k](auto& keys) {
      for (const char* name : keys) {
        if (k == name) return true;
      }
      return false;
    };
    const bool ok = slot == Slot::kEnvelope ? known(kEnvelopeKeys)
                    : slot == Slot::kInput  ? known(kInputKeys)
                                            : known(kOutputKeys);
    if (!ok) {
      return Fail(absl::StrCat(Where(), ": unknown field \"", engine::TruncateForError(k), "\""));
    }
    key_ = std::move(k);
    return true;
  }

  bool end_object() override {
    const Slot slot = Current();
    if (slot == Slot::kInput) {
      if (!FinishInput()) return false;
    }
    return Pop();
  }

  bool start_array(std::size_t) override {
    const Slot slot = Current();
    if (slot == Slot::kSkip) return Push(Slot::kSkip);
    if (slot == Slot::kData) return Push(Slot::kData);  // nested rows
    if (slot == Slot::kEnvelope && key_ == "inputs") return Push(Slot::kInputs);
    if (slot == Slot::kEnvelope && key_ == "outputs") return Push(Slot::kOutputs);
    if (slot == Slot::kInput && key_ == "shape") {
      input().seen_shape = true;
      return Push(Slot::kShape);
    }
    if (slot == Slot::kInput && key_ == "data") {
      input().seen_data = true;
      return Push(Slot::kData);
    }
    return Scalar("an array");
  }

  bool end_array() override { return Pop(); }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "request body is not valid JSON (at byte ", position, "): ",
          engine::TruncateForError(ex.what(), 2 * engine::kMaxQuotedBytes)));
    }
    return false;
  }

 private:
  Slot Current() const { return stack_.empty() ? Slot::kTop : stack_.back(); }
  InputBuffer& input() { return inputs_.back(); }

  bool Push(Slot slot) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
      return Fail(absl::StrCat("request body nests arrays and objects more than ",
                               kMaxJsonDepth, " deep"));
    }
    if (slot == Slot::kSkip && Current() != Slot::kSkip) skip_base_ = stack_.size();
    stack_.push_back(slot);
    return true;
  }

  bool Pop() {
    stack_.pop_back();
    return true;
  }

  bool Fail(std::string message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::move(message));
    return false;
  }

  // The value being read, for messages: `inputs[i] ("name")` or a field.
  std::string Where() const {
    for (Slot s : stack_) {
      if (s == Slot::kInputs && !inputs_.empty()) {
        const InputBuffer& in = inputs_.back();
        std::string at = absl::StrCat("inputs[", inputs_.size() - 1, "]");
        if (in.seen_name) absl::StrAppend(&at, " (\"", engine::TruncateForError(in.name), "\")");
        return at;
      }
      if (s == Slot::kOutputs) return absl::StrCat("outputs[", out_->outputs_size() - 1, "]");
    }
    return "request body";
  }

  // A value that has no place where it was found.
  bool Scalar(const char* what) {
    const Slot slot = Current();
    if (slot == Slot::kSkip) return true;
    if (slot == Slot::kTop) return Fail("request body must be a JSON object");
    if (slot == Slot::kData) {
      return Fail(absl::StrCat(Where(), ": \"data\" holds ", what, "; numbers expected"));
    }
    if (slot == Slot::kShape) {
      return Fail(absl::StrCat(Where(), ": \"shape\" holds ", what, "; integers expected"));
    }
    if (slot == Slot::kInputs || slot == Slot::kOutputs) {
      return Fail(absl::StrCat(Where(), ": ", what, " where a tensor object was expected"));
    }
    return Fail(absl::StrCat(Where(), ": \"", key_, "\" is ", what, ", which it cannot be"));
  }

  bool Integer(int64_t v) {
    switch (Current()) {
      case Slot::kSkip:
        return true;
      case Slot::kShape:
        input().shape.push_back(v);
        return true;
      case Slot::kData:
        if (input().has_real) {
          input().reals.push_back(static_cast<double>(v));
        } else {
          input().ints.push_back(v);
        }
        return true;
      default:
        return Scalar("a number");
    }
  }

  bool Real(double v) {
    const Slot slot = Current();
    if (slot == Slot::kSkip) return true;
    if (slot != Slot::kData) {
      return slot == Slot::kShape ? Scalar("a non-integer number") : Scalar("a number");
    }
    InputBuffer& in = input();
    if (!in.has_real) {  // from now on every element is a double
      in.has_real = true;
      in.reals.reserve(in.ints.size() + 1);
      for (int64_t i : in.ints) in.reals.push_back(static_cast<double>(i));
      in.ints = {};
    }
    in.reals.push_back(v);
    return true;
  }

  // The input object ended: every field there, and its numbers typed.
  bool FinishInput() {
    InputBuffer& in = input();
    for (auto [seen, field] : {std::pair{in.seen_name, "name"}, {in.seen_datatype, "datatype"},
                               {in.seen_shape, "shape"}, {in.seen_data, "data"}}) {
      if (!seen) return Fail(absl::StrCat(Where(), ": missing \"", field, "\""));
    }
    ModelInferRequest::InferInputTensor* t = out_->add_inputs();
    t->set_name(in.name);  // kept for the messages below
    t->set_datatype(in.datatype);
    for (int64_t d : in.shape) t->add_shape(d);
    inference::InferTensorContents* c = t->mutable_contents();
    if (in.datatype == "FP32") {
      auto* f = c->mutable_fp32_contents();
      const size_t n = in.has_real ? in.reals.size() : in.ints.size();
      f->Reserve(static_cast<int>(n));
      for (size_t i = 0; i < n; ++i) {
        const double v = in.has_real ? in.reals[i] : static_cast<double>(in.ints[i]);
        if (!(std::fabs(v) <= std::numeric_limits<float>::max())) {
          return Fail(absl::StrCat(Where(), ": data[", i, "] = ", v, " is out of FP32 range"));
        }
        f->AddAlreadyReserved(static_cast<float>(v));
      }
    } else if (in.datatype == "INT64" || in.datatype == "INT32") {
      if (in.has_real) {
        return Fail(absl::StrCat(Where(), ": ", in.datatype,
                                 " \"data\" holds a non-integer number"));
      }
      if (in.datatype == "INT64") {
        c->mutable_int64_contents()->Add(in.ints.begin(), in.ints.end());
      } else {
        auto* v = c->mutable_int_contents();
        v->Reserve(static_cast<int>(in.ints.size()));
        for (size_t i = 0; i < in.ints.size(); ++i) {
          if (in.ints[i] < std::numeric_limits<int32_t>::min() ||
              in.ints[i] > std::numeric_limits<int32_t>::max()) {
            return Fail(absl::StrCat(Where(), ": data[", i, "] = ", in.ints[i],
                                     " is out of INT32 range"));
          }
          v->AddAlreadyReserved(static_cast<int32_t>(in.ints[i]));
        }
      }
    }
    // Any other datatype keeps no contents: the conversion names the
    // datatype the model takes for this tensor.
    in = InputBuffer{};  // frees the numbers now
    return true;
  }

  ModelInferRequest* out_;
  std::vector<Slot> stack_;
  size_t skip_base_ = 0;
  std::string key_;
  std::vector<InputBuffer> inputs_;
  absl::Status status_;
};

}  // namespace

absl::Status ParseKServeInferJson(absl::string_view body, inference::ModelInferRequest* out) {
  InferRequestReader reader(out);
  const bool ok = json::sax_parse(body.begin(), body.end(), &reader);
  if (!reader.status().ok()) return reader.status();
  if (!ok) return absl::InvalidArgumentError("request body is not valid JSON");
  return absl::OkStatus();
}

std::string JsonString(absl::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendFloat(float value, std::string* out) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, ec == std::errc() ? end : buf);
}

std::string KServeInferResponseJson(absl::string_view model_name, int64_t version,
                                    absl::string_view id, absl::Span<const float> scores) {
  std::string out;
  out.reserve(160 + scores.size() * 12);
  absl::StrAppend(&out, "{\"model_name\":", JsonString(model_name), ",\"model_version\":\"",
                  version, "\"");
  if (!id.empty()) absl::StrAppend(&out, ",\"id\":", JsonString(id));
  absl::StrAppend(&out, ",\"outputs\":[{\"name\":\"scores\",\"datatype\":\"FP32\",\"shape\":[",
                  scores.size(), "],\"data\":[");
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendFloat(scores[i], &out);
  }
  out += "]}]}";
  return out;
}

std::string KServeModelMetadataJson(const inference::ModelMetadataResponse& metadata) {
  auto tensors = [](const auto& list) {
    json out = json::array();
    for (const auto& t : list) {
      out.push_back({{"name", t.name()},
                     {"datatype", t.datatype()},
                     {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}});
    }
    return out;
  };
  json body = {
      {"name", metadata.name()},
      {"versions", std::vector<std::string>(metadata.versions().begin(),
                                            metadata.versions().end())},
      {"platform", metadata.platform()},
      {"inputs", tensors(metadata.inputs())},
      {"outputs", tensors(metadata.outputs())},
  };
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ErrorJson(absl::string_view message) {
  return absl::StrCat("{\"error\":", JsonString(message), "}");
}

}  // namespace rankd::server
