#include "engine/model/tensor_layout.h"

#include "absl/strings/str_cat.h"
#include "engine/model/model_shapes.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;

LinearTensors Linear(const std::string& prefix, int64_t in, int64_t out) {
  return LinearTensors{
      TensorSpec{absl::StrCat(prefix, ".weight"), TensorDtype::kF32, {out, in}},
      TensorSpec{absl::StrCat(prefix, ".bias"), TensorDtype::kF32, {out}}};
}

// DLRM_Net builds each MLP as nn.Sequential(Linear, ReLU, Linear, ReLU, ...):
// the Linear layers are the even indices.
std::vector<LinearTensors> DlrmNetMlp(const char* name, int64_t in,
                                      const google::protobuf::RepeatedField<int32_t>& widths) {
  std::vector<LinearTensors> layers;
  for (int i = 0; i < widths.size(); ++i) {
    layers.push_back(Linear(absl::StrCat(name, ".", 2 * i), in, widths[i]));
    in = widths[i];
  }
  return layers;
}

TableTensors Table(const rankd::v1::TableConfig& t, const std::string& prefix) {
  TableTensors out;
  out.weight = TensorSpec{absl::StrCat(prefix, ".weight"),
                          TableTensorDtype(t.dtype()),
                          {t.num_rows(), t.dim()}};
  if (t.kind() == rankd::v1::DYNAMIC) {
    out.keys = TensorSpec{absl::StrCat(prefix, ".keys"), TensorDtype::kI64,
                          {t.num_rows()}};
  }
  out.in_file = t.init().kind() != rankd::v1::RANDOM;
  return out;
}

void DlrmNetLayout(const ModelConfig& c, ModelTensorLayout* out) {
  for (int k = 0; k < c.tables_size(); ++k) {
    out->tables.push_back(Table(c.tables(k), absl::StrCat("emb_l.", k)));
  }
  out->bottom = DlrmNetMlp("bot_l", c.num_dense(), c.bottom_mlp());
  out->top = DlrmNetMlp("top_l", InteractionWidth(c), c.top_mlp());
}

// TorchRec DLRM_DCN: DenseArch = MLP (Perceptrons with `_linear`),
// EmbeddingBagCollection keyed by table name, LowRankCrossNet parameter lists,
// OverArch = Sequential(MLP(all but the last width), Linear(-> 1)).
void DlrmDcnLayout(const ModelConfig& c, ModelTensorLayout* out) {
  for (const rankd::v1::TableConfig& t : c.tables()) {
    out->tables.push_back(Table(
        t, absl::StrCat("sparse_arch.embedding_bag_collection.embedding_bags.",
                        t.name())));
  }
  int64_t in = c.num_dense();
  for (int i = 0; i < c.bottom_mlp_size(); ++i) {
    out->bottom.push_back(
        Linear(absl::StrCat("dense_arch.model._mlp.", i, "._linear"), in,
               c.bottom_mlp(i)));
    in = c.bottom_mlp(i);
  }
  const int64_t n = InteractionWidth(c);
  const int64_t r = c.interaction().dcn_low_rank();
  for (int l = 0; l < c.interaction().dcn_num_layers(); ++l) {
    const std::string p = "inter_arch.crossnet.";
    out->cross.push_back(CrossTensors{
        TensorSpec{absl::StrCat(p, "V_kernels.", l), TensorDtype::kF32, {r, n}},
        TensorSpec{absl::StrCat(p, "W_kernels.", l), TensorDtype::kF32, {n, r}},
        TensorSpec{absl::StrCat(p, "bias.", l), TensorDtype::kF32, {n}, true}});
  }
  in = n;
  const int last = c.top_mlp_size() - 1;
  for (int i = 0; i < last; ++i) {
    out->top.push_back(Linear(
        absl::StrCat("over_arch.model.0._mlp.", i, "._linear"), in, c.top_mlp(i)));
    in = c.top_mlp(i);
  }
  if (last >= 0) {
    out->top.push_back(Linear("over_arch.model.1", in, c.top_mlp(last)));
  }
}

}  // namespace

TensorDtype TableTensorDtype(rankd::v1::DataType dtype) {
  switch (dtype) {
    case rankd::v1::FP16:
      return TensorDtype::kF16;
    case rankd::v1::BF16:
      return TensorDtype::kBF16;
    default:
      return TensorDtype::kF32;
  }
}

std::vector<const TensorSpec*> ModelTensorLayout::All() const {
  std::vector<const TensorSpec*> all;
  for (const TableTensors& t : tables) {
    if (!t.in_file) continue;
    all.push_back(&t.weight);
    if (t.keys) all.push_back(&*t.keys);
  }
  for (const LinearTensors& l : bottom) {
    all.push_back(&l.weight);
    all.push_back(&l.bias);
  }
  for (const CrossTensors& x : cross) {
    all.push_back(&x.v);
    all.push_back(&x.w);
    all.push_back(&x.bias);
  }
  for (const LinearTensors& l : top) {
    all.push_back(&l.weight);
    all.push_back(&l.bias);
  }
  return all;
}

ModelTensorLayout ExpectedTensorLayout(const ModelConfig& config) {
  ModelTensorLayout layout;
  if (config.interaction().kind() == rankd::v1::DCN_V2) {
    DlrmDcnLayout(config, &layout);
  } else {
    DlrmNetLayout(config, &layout);
  }
  return layout;
}

}  // namespace rankd::engine
