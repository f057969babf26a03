#include "tests/fuzz/fuzz_models.h"

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <unistd.h>

#include "engine/model/safetensors.h"
#include "kernels/cpu/types.h"

namespace rankd::fuzz {

using engine::testing::RandomModelSpec;

std::vector<RandomModelSpec> ScoreModelSpecs() {
  std::vector<RandomModelSpec> specs(3);
  // Static tables, DOT, feature 2 request-level.
  specs[0].table_rows = {7, 11, 13};
  specs[0].request_level_features = {2};
  specs[0].seed = 11;
  // Dynamic tables with the ERROR policy: unknown keys are refused.
  specs[1].interaction = rankd::v1::DCN_V2;
  specs[1].table_rows = {5, 9};
  specs[1].dynamic_tables = {0, 1};
  specs[1].id_policy = rankd::v1::ERROR;
  specs[1].pooling = kernels::Pooling::kMean;
  specs[1].seed = 12;
  // A dynamic table with the ZERO policy and a default vector; fp16 rows.
  specs[2].interaction = rankd::v1::CAT;
  specs[2].table_rows = {6, 8};
  specs[2].cat_dims = {3, 5};
  specs[2].dynamic_tables = {1};
  specs[2].id_policy = rankd::v1::ZERO;
  specs[2].default_vector = true;
  specs[2].row_type = kernels::RowType::kFp16;
  specs[2].pooling = kernels::Pooling::kMax;
  specs[2].seed = 13;
  return specs;
}

std::shared_ptr<engine::Model> MakeUpdateModel() {
  RandomModelSpec spec;
  spec.table_rows = {6, 5, 4};
  spec.dynamic_tables = {1, 2};
  spec.id_policy = rankd::v1::ZERO;
  spec.seed = 21;
  std::shared_ptr<engine::Model> m = engine::testing::MakeRandomModel(spec);
  engine::testing::MakeTableGrowable(m.get(), 1, kUpdateMaxKeys, rankd::v1::LRU);
  engine::testing::MakeTableGrowable(m.get(), 2, kUpdateMaxKeys, rankd::v1::LFU);
  return m;
}

const std::string& FuzzModelConfigText() {
  static const std::string* text = new std::string(R"pb(name: "fuzz"
num_dense: 3
tables { name: "t0" num_rows: 5 dim: 2 }
tables { name: "t1" kind: DYNAMIC num_rows: 4 dim: 2 dtype: FP16 max_keys: 8 }
sparse_features { name: "f0" table: "t0" }
sparse_features { name: "f1" table: "t1" }
bottom_mlp: [4, 2]
interaction { kind: DOT }
top_mlp: [3, 1]
)pb");
  return *text;
}

namespace {

std::vector<uint8_t> RandomFloats(int64_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<uint8_t> out(n * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(*rng);
    std::memcpy(out.data() + 4 * i, &v, 4);
  }
  return out;
}

}  // namespace

std::string FuzzWeightsBytes() {
  std::mt19937 rng(1);
  using engine::TensorDtype;
  std::vector<std::vector<uint8_t>> data;
  std::vector<engine::TensorToWrite> tensors;
  auto add = [&](const std::string& name, TensorDtype dtype, std::vector<int64_t> shape,
                 std::vector<uint8_t> bytes) {
    data.push_back(std::move(bytes));
    tensors.push_back({name, dtype, std::move(shape), nullptr, {}});
  };
  auto f32 = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    add(name, TensorDtype::kF32, shape, RandomFloats(n, &rng));
  };
  f32("emb_l.0.weight", {5, 2});
  std::vector<uint8_t> half(4 * 2 * 2);
  for (size_t i = 0; i < half.size() / 2; ++i) {
    const uint16_t h = kernels::FloatToHalfBits(0.125f * (static_cast<int>(i) - 3));
    std::memcpy(half.data() + 2 * i, &h, 2);
  }
  add("emb_l.1.weight", TensorDtype::kF16, {4, 2}, half);
  std::vector<uint8_t> keys(4 * 8);
  const int64_t k[4] = {-7, 3, 1000000007, int64_t{1} << 40};
  std::memcpy(keys.data(), k, sizeof(k));
  add("emb_l.1.keys", TensorDtype::kI64, {4}, keys);
  f32("bot_l.0.weight", {4, 3});
  f32("bot_l.0.bias", {4});
  f32("bot_l.2.weight", {2, 4});
  f32("bot_l.2.bias", {2});
  f32("top_l.0.weight", {3, 5});
  f32("top_l.0.bias", {3});
  f32("top_l.2.weight", {1, 3});
  f32("top_l.2.bias", {1});
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = data[i].data();

  char dir[] = "/tmp/rankd_fuzz_weights_XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  const std::string path = std::string(dir) + "/weights.safetensors";
  if (!engine::WriteSafetensors(path, tensors).ok()) std::abort();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path.c_str());
  rmdir(dir);
  return bytes;
}

}  // namespace rankd::fuzz
