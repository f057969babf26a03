// LoadModel on small models written with
// WriteSafetensors: DOT (MiniDLRM), CAT with fp16/bf16 tables, DCN_V2 with
// TorchRec names, a DYNAMIC table; and each way a model directory can be bad.
#include "engine/model/model_loader.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/model.h"
#include "engine/model/safetensors.h"
#include "engine/model/table_init.h"
#include "engine/model/tensor_layout.h"
#include "engine/serving/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {
namespace {

namespace fs = std::filesystem;
using rankd::v1::ModelConfig;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMini[] = R"pb(
  name: "mini"
  num_dense: 13
  tables { name: "t0" num_rows: 10 dim: 4 }
  tables { name: "t1" num_rows: 20 dim: 4 }
  tables { name: "t2" num_rows: 30 dim: 4 }
  sparse_features { name: "f0" table: "t0" }
  sparse_features { name: "f1" table: "t1" request_level: true }
  sparse_features { name: "f2" table: "t2" max_ids_per_bag: 5 }
  bottom_mlp: [ 8, 4 ]
  top_mlp: [ 8, 1 ]
)pb";

constexpr char kCat[] = R"pb(
  name: "cat"
  num_dense: 3
  tables { name: "a" num_rows: 5 dim: 2 dtype: FP16 pooling: MEAN }
  tables { name: "b" num_rows: 7 dim: 6 dtype: BF16 placement: HOST }
  sparse_features { name: "fa" table: "a" }
  sparse_features { name: "fb" table: "b" }
  sparse_features { name: "fb2" table: "b" }
  interaction { kind: CAT }
  top_mlp: [ 4, 1 ]
)pb";

constexpr char kDcn[] = R"pb(
  name: "dcn"
  num_dense: 5
  tables { name: "t_cat_0" num_rows: 11 dim: 4 }
  tables { name: "t_cat_1" num_rows: 6 dim: 4 }
  sparse_features { name: "cat_0" table: "t_cat_0" }
  sparse_features { name: "cat_1" table: "t_cat_1" }
  bottom_mlp: [ 4 ]
  interaction { kind: DCN_V2 dcn_num_layers: 2 dcn_low_rank: 3 }
  top_mlp: [ 6, 5, 1 ]
)pb";

constexpr char kDynamic[] = R"pb(
  name: "dyn"
  num_dense: 2
  tables { name: "ids" kind: DYNAMIC num_rows: 6 dim: 2
           default_vector: [ 0.5, -0.5 ] }
  tables { name: "cats" num_rows: 3 dim: 2 }
  sparse_features { name: "user_id" table: "ids" }
  sparse_features { name: "cat" table: "cats" }
  top_mlp: [ 1 ]
)pb";

// Distinct, deterministic values per tensor and element.
float Value(const std::string& name, int64_t i) {
  const float base = static_cast<float>(std::hash<std::string>()(name) % 97);
  return base * 0.01f + static_cast<float>(i) * 0.001f - 0.3f;
}

int64_t Key(int64_t row) { return (row * 7919) ^ (int64_t{1} << 40); }

struct OwnedTensor {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Fills a tensor of any (dtype, shape) for `name` with Value()/Key().
OwnedTensor MakeTensor(const std::string& name, TensorDtype dtype,
                       std::vector<int64_t> shape) {
  OwnedTensor t{name, dtype, std::move(shape), {}};
  const int64_t n = Elements(t.shape);
  t.bytes.resize(n * TensorDtypeBytes(dtype));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = t.bytes.data() + i * TensorDtypeBytes(dtype);
    if (dtype == TensorDtype::kF32) {
      const float v = Value(name, i);
      std::memcpy(p, &v, 4);
    } else if (dtype == TensorDtype::kF16) {
      const uint16_t v = kernels::FloatToHalfBits(Value(name, i));
      std::memcpy(p, &v, 2);
    } else if (dtype == TensorDtype::kBF16) {
      const uint16_t v = kernels::FloatToBf16Bits(Value(name, i));
      std::memcpy(p, &v, 2);
    } else if (dtype == TensorDtype::kI64) {
      const int64_t v = Key(i);
      std::memcpy(p, &v, 8);
    }
  }
  return t;
}

// Every tensor the (validated) config expects, as the exporter would write.
std::map<std::string, OwnedTensor> ExpectedTensors(const std::string& text) {
  ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  EXPECT_TRUE(ValidateModelConfig(&config).ok());
  std::map<std::string, OwnedTensor> out;
  const ModelTensorLayout layout = ExpectedTensorLayout(config);
  for (const TensorSpec* spec : layout.All()) {
    out[spec->name] = MakeTensor(spec->name, spec->dtype, spec->shape);
  }
  return out;
}

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

void WriteModel(const std::string& dir, const std::string& text,
                const std::map<std::string, OwnedTensor>& tensors) {
  std::ofstream(absl::StrCat(dir, "/model.pbtxt")) << text;
  std::vector<TensorToWrite> list;
  for (const auto& [name, t] : tensors) {
    list.push_back({t.name, t.dtype, t.shape, t.bytes.data(), nullptr});
  }
  ASSERT_TRUE(
      WriteSafetensors(absl::StrCat(dir, "/weights.safetensors"), list).ok());
}

std::shared_ptr<const Model> LoadOk(const std::string& text,
                                    const std::map<std::string, OwnedTensor>& t,
                                    const std::string& dir_name) {
  const std::string dir = TmpDir(dir_name);
  WriteModel(dir, text, t);
  absl::StatusOr<std::shared_ptr<const Model>> model = LoadModel(dir, 3);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::string LoadError(const std::string& text,
                      const std::map<std::string, OwnedTensor>& tensors,
                      const std::string& dir_name) {
  const std::string dir = TmpDir(dir_name);
  WriteModel(dir, text, tensors);
  absl::StatusOr<std::shared_ptr<const Model>> model = LoadModel(dir);
  EXPECT_FALSE(model.ok()) << "loaded " << dir;
  if (model.ok()) return "";
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument)
      << model.status();
  return std::string(model.status().message());
}

std::vector<float> Floats(const OwnedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

void ExpectLinear(const Linear& layer, const OwnedTensor& weight,
                  const OwnedTensor& bias, int in, int out) {
  EXPECT_EQ(layer.in, in);
  EXPECT_EQ(layer.out, out);
  EXPECT_EQ(layer.weight, Floats(weight)) << weight.name;
  EXPECT_EQ(layer.bias, Floats(bias)) << bias.name;
  kernels::LinearView view = layer.view();
  EXPECT_EQ(view.weight, layer.weight.data());
  EXPECT_EQ(view.in, in);
}

TEST(ModelLoaderTest, LoadsDotModel) {
  const auto tensors = ExpectedTensors(kMini);
  EXPECT_EQ(tensors.size(), 3u + 4u + 4u);  // emb_l.0-2, bot_l.{0,2}, top_l.{0,2}
  const std::string dir = TmpDir("dot/mini/3");
  WriteModel(dir, kMini, tensors);
  absl::StatusOr<std::shared_ptr<const Model>> loaded =
      LoadModel(dir, 3, "mini");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& m = **loaded;

  EXPECT_EQ(m.name, "mini");
  EXPECT_EQ(m.version, 3);
  EXPECT_EQ(m.directory, dir);
  EXPECT_EQ(m.config.batching().max_batch_candidates(), 4096);  // defaults in
  EXPECT_EQ(m.num_dense, 13);
  EXPECT_EQ(m.interaction, rankd::v1::DOT);
  EXPECT_FALSE(m.self_interaction);
  EXPECT_EQ(m.interaction_width, 10);
  EXPECT_EQ(m.dense_out_width(), 4);
  EXPECT_TRUE(m.cross.empty());

  ASSERT_EQ(m.tables.size(), 3u);
  const int64_t rows[] = {10, 20, 30};
  for (int k = 0; k < 3; ++k) {
    const EmbeddingTable& t = m.tables[k];
    EXPECT_EQ(t.name, absl::StrCat("t", k));
    EXPECT_FALSE(t.dynamic);
    EXPECT_EQ(t.num_rows, rows[k]);
    EXPECT_EQ(t.dim, 4);
    EXPECT_EQ(t.row_type, kernels::RowType::kFp32);
    EXPECT_EQ(t.pooling, kernels::Pooling::kSum);
    EXPECT_EQ(t.id_policy, rankd::v1::ERROR);
    EXPECT_EQ(t.row_bytes(), 16);
    const OwnedTensor& w = tensors.at(absl::StrCat("emb_l.", k, ".weight"));
    ASSERT_EQ(t.rows.size, static_cast<int64_t>(w.bytes.size()));
    EXPECT_EQ(std::memcmp(t.rows.data, w.bytes.data(), w.bytes.size()), 0);
    // Read into an allocation of the model's own, kept alive by the owner.
    EXPECT_NE(t.rows.owner, nullptr);
    EXPECT_TRUE(t.rows.pinnable);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rows.data) % (2 << 20), 0u);
    kernels::PoolTable pool = t.pool_view(nullptr);
    EXPECT_EQ(pool.rows, t.rows.data);
    EXPECT_EQ(pool.num_rows, rows[k]);
    EXPECT_EQ(pool.dim, 4);
    EXPECT_EQ(pool.hash, nullptr);
    EXPECT_EQ(pool.default_vector, nullptr);
  }
  EXPECT_EQ(m.table_bytes(), (10 + 20 + 30) * 16);

  ASSERT_EQ(m.features.size(), 3u);
  EXPECT_EQ(m.features[1].name, "f1");
  EXPECT_EQ(m.features[1].table, 1);
  EXPECT_TRUE(m.features[1].request_level);
  EXPECT_EQ(m.features[2].max_ids_per_bag, 5);

  ASSERT_EQ(m.bottom.size(), 2u);
  ExpectLinear(m.bottom[0], tensors.at("bot_l.0.weight"),
               tensors.at("bot_l.0.bias"), 13, 8);
  ExpectLinear(m.bottom[1], tensors.at("bot_l.2.weight"),
               tensors.at("bot_l.2.bias"), 8, 4);
  ASSERT_EQ(m.top.size(), 2u);
  ExpectLinear(m.top[0], tensors.at("top_l.0.weight"),
               tensors.at("top_l.0.bias"), 10, 8);
  ExpectLinear(m.top[1], tensors.at("top_l.2.weight"),
               tensors.at("top_l.2.bias"), 8, 1);
}

TEST(ModelLoaderTest, RowsOutliveEverythingButTheModel) {
  const auto tensors = ExpectedTensors(kMini);
  std::shared_ptr<const Model> m = LoadOk(kMini, tensors, "outlive");
  ASSERT_NE(m, nullptr);
  // The rows are the model's own: the directory's files are not needed.
  fs::remove_all(TmpDir("outlive"));
  const OwnedTensor& w = tensors.at("emb_l.2.weight");
  EXPECT_EQ(std::memcmp(m->tables[2].rows.data, w.bytes.data(), w.bytes.size()),
            0);
}

TEST(ModelLoaderTest, LoadsCatModelWithHalfTables) {
  const auto tensors = ExpectedTensors(kCat);
  ASSERT_EQ(tensors.at("emb_l.0.weight").dtype, TensorDtype::kF16);
  ASSERT_EQ(tensors.at("emb_l.1.weight").dtype, TensorDtype::kBF16);
  std::shared_ptr<const Model> m = LoadOk(kCat, tensors, "cat");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->interaction, rankd::v1::CAT);
  EXPECT_EQ(m->interaction_width, 3 + 2 + 6 + 6);
  EXPECT_TRUE(m->bottom.empty());
  EXPECT_EQ(m->dense_out_width(), 3);
  EXPECT_EQ(m->tables[0].row_type, kernels::RowType::kFp16);
  EXPECT_EQ(m->tables[0].pooling, kernels::Pooling::kMean);
  EXPECT_EQ(m->tables[1].row_type, kernels::RowType::kBf16);
  EXPECT_EQ(m->tables[1].placement, rankd::v1::HOST);
  EXPECT_EQ(m->tables[1].row_bytes(), 12);
  EXPECT_EQ(m->features[2].table, 1);  // shares table b
  const OwnedTensor& b = tensors.at("emb_l.1.weight");
  EXPECT_EQ(std::memcmp(m->tables[1].rows.data, b.bytes.data(), b.bytes.size()), 0);
  EXPECT_FLOAT_EQ(kernels::RowElementToFloat(m->tables[1].rows.data,
                                             kernels::RowType::kBf16, 3),
                  kernels::Bf16BitsToFloat(kernels::FloatToBf16Bits(
                      Value("emb_l.1.weight", 3))));
  EXPECT_EQ(m->table_bytes(), 5 * 2 * 2 + 7 * 6 * 2);
  ASSERT_EQ(m->top.size(), 2u);
  EXPECT_EQ(m->top[0].in, 17);
}

TEST(ModelLoaderTest, LoadsDcnModelWithTorchRecNames) {
  auto tensors = ExpectedTensors(kDcn);
  for (const char* name :
       {"dense_arch.model._mlp.0._linear.weight",
        "sparse_arch.embedding_bag_collection.embedding_bags.t_cat_0.weight",
        "sparse_arch.embedding_bag_collection.embedding_bags.t_cat_1.weight",
        "inter_arch.crossnet.V_kernels.0", "inter_arch.crossnet.W_kernels.1",
        "inter_arch.crossnet.bias.1",
        "over_arch.model.0._mlp.0._linear.weight",
        "over_arch.model.0._mlp.1._linear.bias", "over_arch.model.1.weight",
        "over_arch.model.1.bias"}) {
    EXPECT_EQ(tensors.count(name), 1u) << name;
  }
  EXPECT_EQ(tensors.size(), 2u + 2u + 6u + 6u);
  // Some exports keep the crossnet bias as a column [N, 1].
  tensors["inter_arch.crossnet.bias.1"] =
      MakeTensor("inter_arch.crossnet.bias.1", TensorDtype::kF32, {12, 1});
  std::shared_ptr<const Model> m = LoadOk(kDcn, tensors, "dcn");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->interaction, rankd::v1::DCN_V2);
  EXPECT_EQ(m->interaction_width, 12);  // (1 + 2) * 4
  ASSERT_EQ(m->cross.size(), 2u);
  for (int l = 0; l < 2; ++l) {
    const CrossLayer& c = m->cross[l];
    EXPECT_EQ(c.n, 12);
    EXPECT_EQ(c.rank, 3);
    EXPECT_EQ(c.v, Floats(tensors.at(absl::StrCat("inter_arch.crossnet.V_kernels.", l))));
    EXPECT_EQ(c.w, Floats(tensors.at(absl::StrCat("inter_arch.crossnet.W_kernels.", l))));
    EXPECT_EQ(c.bias, Floats(tensors.at(absl::StrCat("inter_arch.crossnet.bias.", l))));
    EXPECT_EQ(c.bias.size(), 12u);
    EXPECT_EQ(c.view().rank, 3);
  }
  ASSERT_EQ(m->bottom.size(), 1u);
  ExpectLinear(m->bottom[0], tensors.at("dense_arch.model._mlp.0._linear.weight"),
               tensors.at("dense_arch.model._mlp.0._linear.bias"), 5, 4);
  ASSERT_EQ(m->top.size(), 3u);
  ExpectLinear(m->top[0], tensors.at("over_arch.model.0._mlp.0._linear.weight"),
               tensors.at("over_arch.model.0._mlp.0._linear.bias"), 12, 6);
  ExpectLinear(m->top[1], tensors.at("over_arch.model.0._mlp.1._linear.weight"),
               tensors.at("over_arch.model.0._mlp.1._linear.bias"), 6, 5);
  ExpectLinear(m->top[2], tensors.at("over_arch.model.1.weight"),
               tensors.at("over_arch.model.1.bias"), 5, 1);
  const OwnedTensor& t1 = tensors.at(
      "sparse_arch.embedding_bag_collection.embedding_bags.t_cat_1.weight");
  EXPECT_EQ(std::memcmp(m->tables[1].rows.data, t1.bytes.data(), t1.bytes.size()),
            0);
}

TEST(ModelLoaderTest, LoadsDynamicTable) {
  const auto tensors = ExpectedTensors(kDynamic);
  ASSERT_EQ(tensors.count("emb_l.0.keys"), 1u);
  ASSERT_EQ(tensors.count("emb_l.1.keys"), 0u);  // STATIC: no keys
  std::shared_ptr<const Model> m = LoadOk(kDynamic, tensors, "dyn");
  ASSERT_NE(m, nullptr);
  const EmbeddingTable& t = m->tables[0];
  EXPECT_TRUE(t.dynamic);
  EXPECT_EQ(t.id_policy, rankd::v1::ZERO);
  EXPECT_EQ(m->config.tables(0).capacity(), 16);
  EXPECT_EQ(t.hash.size(), 6);
  EXPECT_GE(t.hash.num_slots(), 16);
  EXPECT_EQ(t.default_vector, (std::vector<float>{0.5f, -0.5f}));
  ASSERT_EQ(t.keys.size, 6 * 8);
  EXPECT_NE(t.keys.owner, nullptr);
  EXPECT_EQ(std::memcmp(t.keys.data, tensors.at("emb_l.0.keys").bytes.data(), 48), 0);
  const kernels::HashTableView view = t.hash.view();
  for (int64_t r = 0; r < 6; ++r) {
    EXPECT_EQ(kernels::HashLookup(view, Key(r)), r);
  }
  EXPECT_EQ(kernels::HashLookup(view, 12345), kernels::kMissingRow);
  kernels::PoolTable pool = t.pool_view(&view);
  EXPECT_EQ(pool.hash, &view);
  ASSERT_NE(pool.default_vector, nullptr);
  EXPECT_EQ(pool.default_vector[1], -0.5f);
  EXPECT_EQ(m->tables[1].pool_view(&view).hash, nullptr);  // STATIC ignores it
  EXPECT_EQ(m->table_bytes(), 6 * 8 + 6 * 8 + t.hash.bytes() + 3 * 8);
  EXPECT_EQ(m->interaction_width, 2 + 3);
  EXPECT_EQ(m->top.size(), 1u);
}

// Files from other writers may leave tensors unaligned in the file; rows are
// read into aligned memory all the same.
TEST(ModelLoaderTest, UnalignedTensorsAreReadIntoAlignedMemory) {
  const std::string dir = TmpDir("unaligned");
  std::ofstream(absl::StrCat(dir, "/model.pbtxt")) << R"pb(
    name: "tiny" num_dense: 2
    tables { name: "t" num_rows: 1 dim: 2 }
    sparse_features { name: "f" table: "t" }
    top_mlp: [ 1 ]
  )pb";
  std::string header =
      R"({"emb_l.0.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
      R"("top_l.0.weight":{"dtype":"F32","shape":[1,3],"data_offsets":[8,20]},)"
      R"("top_l.0.bias":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})";
  while ((8 + header.size()) % 4 != 1) header += ' ';
  const float values[6] = {1.5f, -2.5f, 0.1f, 0.2f, 0.3f, 0.4f};
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  std::ofstream(absl::StrCat(dir, "/weights.safetensors"), std::ios::binary) << bytes;

  absl::StatusOr<std::shared_ptr<const Model>> m = LoadModel(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  const ByteBuffer& rows = (*m)->tables[0].rows;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(rows.data) % alignof(float), 0u);
  ASSERT_EQ(rows.size, 8);
  EXPECT_EQ(std::memcmp(rows.data, values, 8), 0);
  EXPECT_EQ((*m)->load_stats.tables[0].source, TableSource::kFileRead);
  EXPECT_STREQ(TableSourceName(TableSource::kFileRead), "file (read)");
  EXPECT_EQ((*m)->top[0].weight, (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_EQ((*m)->top[0].bias, (std::vector<float>{0.4f}));
}

// ---- A loaded version never depends on its files again ----

// DYNAMIC FILE table (keys), fp16 STATIC table, bottom and top MLPs.
constexpr char kLife[] = R"pb(
  name: "life"
  num_dense: 3
  tables { name: "ids" kind: DYNAMIC num_rows: 40 dim: 4 }
  tables { name: "cats" num_rows: 50 dim: 4 dtype: FP16 }
  sparse_features { name: "user" table: "ids" }
  sparse_features { name: "cat" table: "cats" }
  bottom_mlp: [ 8, 4 ]
  top_mlp: [ 4, 1 ]
)pb";

// Copies of everything a model serves from, to compare later.
struct Snapshot {
  std::vector<std::vector<uint8_t>> rows;
  std::vector<std::vector<uint8_t>> keys;
  std::vector<std::vector<float>> dense;
};

std::vector<uint8_t> Copy(const ByteBuffer& b) {
  return std::vector<uint8_t>(b.data, b.data + b.size);
}

Snapshot Take(const Model& m) {
  Snapshot s;
  for (const EmbeddingTable& t : m.tables) {
    s.rows.push_back(Copy(t.rows));
    s.keys.push_back(Copy(t.keys));
  }
  for (const auto* group : {&m.bottom, &m.top}) {
    for (const Linear& l : *group) {
      s.dense.push_back(l.weight);
      s.dense.push_back(l.bias);
    }
  }
  return s;
}

void ExpectUnchanged(const Model& m, const Snapshot& before,
                     const std::string& after) {
  const Snapshot now = Take(m);
  EXPECT_EQ(now.rows, before.rows) << after;
  EXPECT_EQ(now.keys, before.keys) << after;
  EXPECT_EQ(now.dense, before.dense) << after;
  // The hash table still finds every stored key.
  const kernels::HashTableView view = m.tables[0].hash.view();
  for (int64_t r = 0; r < 40; ++r) {
    ASSERT_EQ(kernels::HashLookup(view, Key(r)), r) << after;
  }
}

void Overwrite(const std::string& path, char byte, int64_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << std::string(static_cast<size_t>(size), byte);
}

// Overwriting the weights file in place, truncating it, rewriting it with
// other bytes and deleting the directory change nothing the model serves
// (with a mapping the first changed scores and the second was SIGBUS).
TEST(ModelLoaderTest, LoadedModelIgnoresLaterChangesToItsFiles) {
  const auto tensors = ExpectedTensors(kLife);
  const std::string dir = TmpDir("life/1");
  WriteModel(dir, kLife, tensors);
  auto loaded = LoadModel(dir, 1, "life");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& m = **loaded;
  const Snapshot before = Take(m);
  EXPECT_EQ(before.rows[1], tensors.at("emb_l.1.weight").bytes);
  EXPECT_EQ(before.keys[0], tensors.at("emb_l.0.keys").bytes);
  EXPECT_EQ(before.dense[0], Floats(tensors.at("bot_l.0.weight")));

  const std::string weights = dir + "/weights.safetensors";
  const int64_t size = static_cast<int64_t>(fs::file_size(weights));
  {
    // Same size, same inode, other bytes: what a MAP_SHARED view would see.
    std::fstream f(weights, std::ios::binary | std::ios::in | std::ios::out);
    f << std::string(static_cast<size_t>(size), '\x7f');
  }
  ASSERT_EQ(static_cast<int64_t>(fs::file_size(weights)), size);
  ExpectUnchanged(m, before, "after an in-place overwrite");
  ASSERT_EQ(truncate(weights.c_str(), 0), 0);
  ExpectUnchanged(m, before, "after truncating to 0 bytes");
  Overwrite(weights, '\x5a', size);
  ExpectUnchanged(m, before, "after rewriting with other bytes");
  fs::remove_all(TmpDir("life"));
  ExpectUnchanged(m, before, "after deleting the directory");
}

// The /proc/self/maps line of the mapping holding `p`.
std::string MappingOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> begin >> dash >> end;
    if (a >= begin && a < end) return line;
  }
  return "";
}

// FILE tables' rows and keys are anonymous, writable, 2 MiB-aligned memory
// of the model's own: the CUDA backend pins them in place, and later updates
// can write rows in place.
TEST(ModelLoaderTest, FileTablesAreWritablePinnableMemory) {
  std::shared_ptr<const Model> m =
      LoadOk(kLife, ExpectedTensors(kLife), "life_mem");
  ASSERT_NE(m, nullptr);
  std::vector<const ByteBuffer*> buffers;
  for (const EmbeddingTable& t : m->tables) {
    buffers.push_back(&t.rows);
    if (t.dynamic) buffers.push_back(&t.keys);
  }
  ASSERT_EQ(buffers.size(), 3u);
  for (const ByteBuffer* b : buffers) {
    ASSERT_GT(b->size, 0);
    EXPECT_TRUE(b->pinnable);
    EXPECT_NE(b->owner, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % sysconf(_SC_PAGESIZE), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % (2 << 20), 0u);
    const std::string mapping = MappingOf(b->data);
    EXPECT_THAT(mapping, HasSubstr(" rw"));
    EXPECT_THAT(mapping, Not(HasSubstr("safetensors")));
    // A write lands (a read-only mapping would fault); then undo it.
    uint8_t* p = const_cast<uint8_t*>(b->data) + b->size - 1;
    const uint8_t old = *p;
    *p = static_cast<uint8_t>(old ^ 0xff);
    EXPECT_EQ(b->data[b->size - 1], static_cast<uint8_t>(old ^ 0xff));
    *p = old;
  }
}

// A file truncated while the loader reads it fails the load with an error
// naming the file and tensor: never a crash, never a half-read model.
TEST(ModelLoaderTest, FileTruncatedWhileLoadingIsAnError) {
  const std::string dir = TmpDir("trunc_during");
  WriteModel(dir, kMini, ExpectedTensors(kMini));
  const std::string weights = dir + "/weights.safetensors";
  LoadOptions o;
  o.num_threads = 2;
  o.progress_min_bytes = 1;  // every phase logs its end
  bool truncated = false;
  o.log = [&](const std::string& line) {
    // Table t0's rows are read; cut the file before t1's are.
    if (!truncated && absl::StrContains(line, "table t0 (reading rows): 100%")) {
      truncated = truncate(weights.c_str(), 0) == 0;
    }
  };
  auto m = LoadModel(dir, 3, "", o);
  ASSERT_TRUE(truncated);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << m.status();
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(absl::StrCat(weights,
                                     ": tensor 'emb_l.1.weight': file changed "
                                     "or truncated while loading (got 0 of ")));
}

// ---- init { kind: RANDOM } tables, load options, progress, memory check ----

// Every dtype generated, one DYNAMIC table generated, one table from the file.
constexpr char kRandom[] = R"pb(
  name: "rnd"
  num_dense: 2
  tables { name: "a" num_rows: 1000 dim: 8 init { kind: RANDOM seed: 5 } }
  tables { name: "b" num_rows: 333 dim: 3 dtype: FP16
           init { kind: RANDOM seed: 5 scale: 0.5 } }
  tables { name: "c" num_rows: 77 dim: 16 dtype: BF16 init { kind: RANDOM } }
  tables { name: "ids" kind: DYNAMIC num_rows: 5000 dim: 4
           init { kind: RANDOM seed: 9 } }
  tables { name: "f" num_rows: 6 dim: 2 }
  sparse_features { name: "fa" table: "a" }
  sparse_features { name: "fb" table: "b" }
  sparse_features { name: "fc" table: "c" }
  sparse_features { name: "fid" table: "ids" }
  sparse_features { name: "ff" table: "f" }
  interaction { kind: CAT }
  top_mlp: [ 1 ]
)pb";

absl::StatusOr<std::shared_ptr<const Model>> LoadWith(
    const std::string& text, const std::map<std::string, OwnedTensor>& tensors,
    const std::string& dir_name, const LoadOptions& options) {
  const std::string dir = TmpDir(dir_name);
  WriteModel(dir, text, tensors);
  return LoadModel(dir, 3, "", options);
}

TEST(ModelLoaderTest, RandomTablesAreGeneratedIdenticallyForAnyThreadCount) {
  const auto tensors = ExpectedTensors(kRandom);
  // The file holds only the FILE table and the MLP.
  EXPECT_EQ(tensors.count("emb_l.0.weight"), 0u);
  EXPECT_EQ(tensors.count("emb_l.3.keys"), 0u);
  EXPECT_EQ(tensors.count("emb_l.4.weight"), 1u);
  LoadOptions one;
  one.num_threads = 1;
  LoadOptions three;
  three.num_threads = 3;
  auto a = LoadWith(kRandom, tensors, "rnd1", one);
  auto b = LoadWith(kRandom, tensors, "rnd3", three);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const Model& m = **a;
  for (size_t k = 0; k < m.tables.size(); ++k) {
    const EmbeddingTable& t = m.tables[k];
    const EmbeddingTable& u = (*b)->tables[k];
    ASSERT_EQ(t.rows.size, t.num_rows * t.row_bytes()) << t.name;
    ASSERT_EQ(u.rows.size, t.rows.size);
    EXPECT_EQ(std::memcmp(t.rows.data, u.rows.data, t.rows.size), 0) << t.name;
  }
  EXPECT_EQ(m.load_stats.threads, 1);
  EXPECT_EQ((*b)->load_stats.threads, 3);

  // The values are the documented function of (seed, name, row, column).
  const rankd::v1::ModelConfig& c = m.config;
  for (int k : {0, 1, 2, 3}) {
    const EmbeddingTable& t = m.tables[k];
    EXPECT_EQ(m.load_stats.tables[k].source, TableSource::kRandom);
    EXPECT_EQ(m.load_stats.tables[k].row_bytes, t.rows.size);
    // Mapped for the CUDA side to register in place: 2 MiB aligned.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rows.data) % (2 << 20), 0u);
    std::vector<uint8_t> want(t.rows.size);
    FillRandomRows(RandomTableStream(c.tables(k).init().seed(), t.name),
                   c.tables(k).init().scale(), t.dim, t.row_type, 0,
                   t.num_rows, want.data());
    EXPECT_EQ(std::memcmp(t.rows.data, want.data(), want.size()), 0) << t.name;
  }
  EXPECT_FLOAT_EQ(c.tables(0).init().scale(), 1 / std::sqrt(1000.0f));
  EXPECT_EQ(c.tables(1).init().scale(), 0.5f);
  EXPECT_EQ(m.tables[1].row_type, kernels::RowType::kFp16);
  EXPECT_EQ(m.tables[2].row_type, kernels::RowType::kBf16);
  const float* a_rows = reinterpret_cast<const float*>(m.tables[0].rows.data);
  for (int64_t i = 0; i < 1000 * 8; ++i) {
    ASSERT_LE(std::fabs(a_rows[i]), c.tables(0).init().scale());
  }

  // DYNAMIC: keys are key(r), every one finds its row, keys past the table
  // (what request generators send as misses) find nothing.
  const EmbeddingTable& ids = m.tables[3];
  const uint64_t stream = RandomTableStream(9, "ids");
  ASSERT_EQ(ids.keys.size, 5000 * 8);
  const int64_t* keys = reinterpret_cast<const int64_t*>(ids.keys.data);
  const kernels::HashTableView view = ids.hash.view();
  const kernels::HashTableView view3 = (*b)->tables[3].hash.view();
  for (int64_t r = 0; r < 5000; ++r) {
    ASSERT_EQ(keys[r], RandomTableKey(stream, r));
    ASSERT_EQ(kernels::HashLookup(view, keys[r]), r);
    ASSERT_EQ(kernels::HashLookup(view3, keys[r]), r);
  }
  for (int64_t r = 5000; r < 6000; ++r) {
    ASSERT_EQ(kernels::HashLookup(view, RandomTableKey(stream, r)),
              kernels::kMissingRow);
  }
  EXPECT_EQ(m.load_stats.tables[3].hash_keys, 5000);
  EXPECT_EQ(m.load_stats.tables[4].source, TableSource::kFileRead);
  EXPECT_GE(m.load_stats.tables[4].rows_seconds, 0);
  EXPECT_TRUE(m.tables[4].rows.pinnable);
  EXPECT_EQ(std::memcmp(m.tables[4].rows.data,
                        tensors.at("emb_l.4.weight").bytes.data(), 6 * 2 * 4),
            0);
  // Rows outlive the model's other owners (the allocation's owner is shared).
  std::shared_ptr<const Model> keep = *a;
  const ByteBuffer rows = keep->tables[0].rows;
  keep.reset();
  a = absl::StatusOr<std::shared_ptr<const Model>>(nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(rows.data)[5], a_rows[5]);
}

TEST(ModelLoaderTest, RandomTableTensorInTheFileIsAnError) {
  auto tensors = ExpectedTensors(kRandom);
  tensors["emb_l.1.weight"] =
      MakeTensor("emb_l.1.weight", TensorDtype::kF16, {333, 3});
  tensors["emb_l.3.keys"] = MakeTensor("emb_l.3.keys", TensorDtype::kI64, {5000});
  const std::string msg = LoadError(kRandom, tensors, "rnd_in_file");
  EXPECT_THAT(msg, HasSubstr("tensor 'emb_l.1.weight': table 'b' (tables[1]) "
                             "has init RANDOM in model.pbtxt, so the file must "
                             "not hold its rows (remove the tensor, or set "
                             "tables[1].init.kind: FILE)"));
  EXPECT_THAT(msg, HasSubstr("tensor 'emb_l.3.keys': table 'ids' (tables[3]) "
                             "has init RANDOM in model.pbtxt, so the file must "
                             "not hold its keys"));
  EXPECT_THAT(msg, Not(HasSubstr("not used by")));
}

TEST(ModelLoaderTest, HostMemoryIsCheckedBeforeAnythingIsAllocated) {
  LoadOptions o;
  o.mem_available_bytes = 100000;  // a tenth of what kRandom needs
  auto m = LoadWith(kRandom, ExpectedTensors(kRandom), "rnd_mem", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(m.status().message());
  // Random rows 32000 + 1998 + 2464 + 80000, keys 5000 x 24 (key, score,
  // free-list entry), file rows 6 x 2 x 4 (read into memory of the model's
  // own, so counted), hash 16384 x 16, dense top_l.0 [1, 35] + [1].
  const int64_t need =
      32000 + 1998 + 2464 + 80000 + 120000 + 48 + 16384 * 16 + 36 * 4;
  EXPECT_THAT(msg, HasSubstr("loading model 'rnd' v3 (random rows 113.73 KiB "
                             "+ random keys 117.19 KiB + file rows 48.00 B + "
                             "hash tables 256.00 KiB + dense weights 144.00 B) "
                             "needs "));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("(", need, " bytes) of host memory, "
                                          "but only 97.66 KiB (100000 bytes) "
                                          "is available")));
  o.mem_available_bytes = need - 1;
  EXPECT_FALSE(LoadWith(kRandom, ExpectedTensors(kRandom), "rnd_mem1", o).ok());
  o.mem_available_bytes = need;
  EXPECT_TRUE(LoadWith(kRandom, ExpectedTensors(kRandom), "rnd_mem2", o).ok());
}

// A clock that moves one second each time it is read: progress lines then
// depend only on the order of the loader's reads, not on real time.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::FromUnixSeconds(1'700'000'000 + ticks_.fetch_add(1));
  }

 private:
  mutable std::atomic<int64_t> ticks_{0};
};

TEST(ModelLoaderTest, ProgressLinesForBigTablesOnly) {
  // "e" is 32 MiB: four 8 MiB fill chunks. "small" stays under the
  // threshold and prints nothing but its part of the summary.
  constexpr char kBig[] = R"pb(
    name: "big"
    num_dense: 2
    tables { name: "e" num_rows: 65536 dim: 128 init { kind: RANDOM } }
    tables { name: "small" num_rows: 10 dim: 2 init { kind: RANDOM } }
    sparse_features { name: "fe" table: "e" }
    sparse_features { name: "fs" table: "small" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb";
  SteppingClock clock;
  std::vector<std::string> lines;
  LoadOptions o;
  o.num_threads = 1;  // chunks in order: the clock reads are deterministic
  o.clock = &clock;
  o.progress_min_bytes = 16 << 20;
  o.log = [&lines](const std::string& line) { lines.push_back(line); };
  auto m = LoadWith(kBig, ExpectedTensors(kBig), "big", o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(lines.size(), 3u) << absl::StrJoin(lines, "\n");
  // Chunk 1 at +1 s (under the 2 s interval), chunk 2 at +2 s: one line;
  // chunk 3 is 1 s after it; chunk 4 completes the phase: the end line.
  EXPECT_EQ(lines[0],
            "loading big v3 table e (random rows): 50% (0.02 / 0.03 GB) "
            "0.01 GB/s ETA 2.0 s");
  EXPECT_EQ(lines[1],
            "loading big v3 table e (random rows): 100% (0.03 GB) in 4.00 s, "
            "0.01 GB/s");
  EXPECT_THAT(lines[2], ::testing::StartsWith("loaded big v3 in "));
  EXPECT_THAT(lines[2], HasSubstr("(1 thread): random rows 0.03 GB in "));
  const ModelLoadStats& st = (*m)->load_stats;
  EXPECT_EQ(st.RowBytes(TableSource::kRandom), 65536 * 128 * 4 + 10 * 2 * 4);
  EXPECT_GT(st.tables[0].rows_seconds, 0);
  EXPECT_GT(st.seconds, st.tables[0].rows_seconds);
}

TEST(ModelLoaderTest, HashBuildReportsProgress) {
  constexpr char kKeys[] = R"pb(
    name: "keys"
    num_dense: 2
    tables { name: "ids" kind: DYNAMIC num_rows: 300000 dim: 1 dtype: FP16
             init { kind: RANDOM } }
    sparse_features { name: "f" table: "ids" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb";
  SteppingClock clock;
  std::vector<std::string> lines;
  LoadOptions o;
  o.num_threads = 1;
  o.clock = &clock;
  o.progress_min_bytes = 1 << 20;  // the 8 MiB hash table, not the rows
  o.log = [&lines](const std::string& line) { lines.push_back(line); };
  auto m = LoadWith(kKeys, ExpectedTensors(kKeys), "keys", o);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string all = absl::StrJoin(lines, "\n");
  EXPECT_THAT(all, HasSubstr("loading keys v3 table ids (hash build): 43% "
                             "(0.13 / 0.30 M keys)"));
  EXPECT_THAT(all, HasSubstr("loading keys v3 table ids (hash build): 100% "
                             "(0.30 M keys) in "));
  EXPECT_THAT(all, Not(HasSubstr("(random rows)")));
  EXPECT_THAT(lines.back(), HasSubstr("hash tables 0.3 M keys in "));
  EXPECT_EQ((*m)->load_stats.HashKeys(), 300000);
}

// Reading a big FILE table prints progress and a summary with its rate.
TEST(ModelLoaderTest, FileRowsReportProgressAndRate) {
  constexpr char kBigFile[] = R"pb(
    name: "bigfile"
    num_dense: 2
    tables { name: "e" kind: DYNAMIC num_rows: 65536 dim: 64 }
    sparse_features { name: "fe" table: "e" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb";
  SteppingClock clock;
  std::vector<std::string> lines;
  LoadOptions o;
  o.num_threads = 1;
  o.clock = &clock;
  o.progress_min_bytes = 8 << 20;  // the 16 MiB rows, not keys or hash
  o.log = [&lines](const std::string& line) { lines.push_back(line); };
  auto m = LoadWith(kBigFile, ExpectedTensors(kBigFile), "bigfile", o);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string all = absl::StrJoin(lines, "\n");
  EXPECT_THAT(all, HasSubstr("loading bigfile v3 table e (reading rows): "
                             "100% (0.02 GB) in "));
  EXPECT_THAT(all, Not(HasSubstr("(reading keys)")));  // 0.5 MiB
  EXPECT_THAT(lines.back(), HasSubstr("(1 thread): file rows 0.02 GB in "));
  EXPECT_THAT(lines.back(), HasSubstr(" GB/s)"));
  const ModelLoadStats& st = (*m)->load_stats;
  EXPECT_EQ(st.RowBytes(TableSource::kFileRead), 65536 * 64 * 4);
  EXPECT_GT(st.RowSeconds(TableSource::kFileRead), 0);
  EXPECT_EQ(st.RowBytes(TableSource::kRandom), 0);
}

TEST(ModelLoaderTest, HashTablesCanBeLeftToTheGpu) {
  // Without host hash tables the keys stay (the CUDA backend builds from
  // them); a table whose id_policy is ERROR still gets one (validation).
  constexpr char kTwo[] = R"pb(
    name: "two"
    num_dense: 2
    tables { name: "zero" kind: DYNAMIC num_rows: 1000 dim: 2 init { kind: RANDOM } }
    tables { name: "strict" kind: DYNAMIC num_rows: 500 dim: 2 id_policy: ERROR
             init { kind: RANDOM } }
    sparse_features { name: "f" table: "zero" }
    sparse_features { name: "g" table: "strict" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb";
  LoadOptions o;
  o.build_hash_tables = false;
  auto m = LoadWith(kTwo, ExpectedTensors(kTwo), "nohash", o);
  ASSERT_TRUE(m.ok()) << m.status();
  const EmbeddingTable& zero = (*m)->tables[0];
  const EmbeddingTable& strict = (*m)->tables[1];
  EXPECT_EQ(zero.hash.num_slots(), 0);
  EXPECT_EQ(zero.keys.size, 1000 * 8);
  ASSERT_GT(strict.hash.num_slots(), 0);
  const auto* keys = reinterpret_cast<const int64_t*>(strict.keys.data);
  EXPECT_EQ(kernels::HashLookup(strict.hash.view(), keys[123]), 123);
}

TEST(ModelLoaderTest, FormatLoadProgress) {
  EXPECT_EQ(FormatLoadProgress("m", 2, "t", "random rows", "B", 3'100'000'000,
                               7'400'000'000, absl::Milliseconds(596)),
            "loading m v2 table t (random rows): 41% (3.10 / 7.40 GB) "
            "5.20 GB/s ETA 0.8 s");
  EXPECT_EQ(FormatLoadProgress("m", 2, "t", "hash build", "keys", 0, 100,
                               absl::ZeroDuration()),
            "loading m v2 table t (hash build): 0% (0.00 / 0.00 M keys)");
}

TEST(ModelLoaderTest, DuplicateKey) {
  auto tensors = ExpectedTensors(kDynamic);
  OwnedTensor& keys = tensors["emb_l.0.keys"];
  std::memcpy(keys.bytes.data() + 3 * 8, keys.bytes.data(), 8);  // row 3 = row 0
  const std::string msg = LoadError(kDynamic, tensors, "dup");
  EXPECT_THAT(msg, HasSubstr("weights.safetensors: tensor 'emb_l.0.keys': "));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("duplicate key ", Key(0))));
  EXPECT_THAT(msg, HasSubstr("rows 0 and 3"));
}

TEST(ModelLoaderTest, MissingTensor) {
  auto tensors = ExpectedTensors(kMini);
  tensors.erase("bot_l.2.weight");
  const std::string msg = LoadError(kMini, tensors, "missing");
  EXPECT_THAT(msg, HasSubstr("/weights.safetensors: tensor 'bot_l.2.weight' is "
                             "missing (expected F32 [4, 8])"));
}

TEST(ModelLoaderTest, MissingKeys) {
  auto tensors = ExpectedTensors(kDynamic);
  tensors.erase("emb_l.0.keys");
  EXPECT_THAT(LoadError(kDynamic, tensors, "nokeys"),
              HasSubstr("tensor 'emb_l.0.keys' is missing (expected I64 [6])"));
}

TEST(ModelLoaderTest, WrongShape) {
  auto tensors = ExpectedTensors(kMini);
  tensors["emb_l.1.weight"] = MakeTensor("emb_l.1.weight", TensorDtype::kF32, {20, 5});
  tensors["top_l.0.weight"] = MakeTensor("top_l.0.weight", TensorDtype::kF32, {8, 9});
  const std::string msg = LoadError(kMini, tensors, "shape");
  EXPECT_THAT(msg, HasSubstr("tensor 'emb_l.1.weight': expected shape [20, 4], "
                             "got [20, 5]"));
  // Both problems reported in one go.
  EXPECT_THAT(msg, HasSubstr("tensor 'top_l.0.weight': expected shape [8, 10], "
                             "got [8, 9]"));
}

TEST(ModelLoaderTest, WrongDtypeIsNeverConverted) {
  auto tensors = ExpectedTensors(kMini);
  tensors["emb_l.0.weight"] = MakeTensor("emb_l.0.weight", TensorDtype::kF16, {10, 4});
  EXPECT_THAT(LoadError(kMini, tensors, "dtype"),
              HasSubstr("tensor 'emb_l.0.weight': expected dtype F32, got F16 "
                        "(table 't0' has dtype FP32 in model.pbtxt; rows are "
                        "never converted)"));
  auto half = ExpectedTensors(kCat);
  half["emb_l.1.weight"] = MakeTensor("emb_l.1.weight", TensorDtype::kF16, {7, 6});
  EXPECT_THAT(LoadError(kCat, half, "dtype2"),
              HasSubstr("tensor 'emb_l.1.weight': expected dtype BF16, got F16"));
  auto mlp = ExpectedTensors(kMini);
  mlp["bot_l.0.bias"] = MakeTensor("bot_l.0.bias", TensorDtype::kF64, {8});
  EXPECT_THAT(LoadError(kMini, mlp, "dtype3"),
              HasSubstr("tensor 'bot_l.0.bias': expected dtype F32, got F64 "
                        "(MLP and cross-layer weights are F32)"));
  auto keys = ExpectedTensors(kDynamic);
  keys["emb_l.0.keys"] = MakeTensor("emb_l.0.keys", TensorDtype::kI32, {6});
  EXPECT_THAT(LoadError(kDynamic, keys, "dtype4"),
              HasSubstr("tensor 'emb_l.0.keys': expected dtype I64, got I32 "
                        "(keys are int64)"));
}

TEST(ModelLoaderTest, ExtraTensorIsAnError) {
  auto tensors = ExpectedTensors(kMini);
  tensors["bot_l.4.weight"] = MakeTensor("bot_l.4.weight", TensorDtype::kF32, {2, 4});
  EXPECT_THAT(LoadError(kMini, tensors, "extra"),
              HasSubstr("tensor 'bot_l.4.weight' not used by this DOT model"));
}

TEST(ModelLoaderTest, UnusedTensorNamesAreQuotedShort) {
  auto tensors = ExpectedTensors(kMini);
  const std::string name(1 << 20, 'x');
  tensors[name] = MakeTensor(name, TensorDtype::kF32, {1});
  const std::string msg = LoadError(kMini, tensors, "longname");
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("... (", name.size(), " bytes)' not used")));
  EXPECT_LT(msg.size(), 1000u);
}

TEST(ModelLoaderTest, MisspeltTensorIsReportedBothWays) {
  auto tensors = ExpectedTensors(kMini);
  OwnedTensor t = tensors.at("top_l.2.bias");
  tensors.erase("top_l.2.bias");
  t.name = "top_l.2.bais";
  tensors[t.name] = t;
  const std::string msg = LoadError(kMini, tensors, "typo");
  EXPECT_THAT(msg, HasSubstr("tensor 'top_l.2.bias' is missing (expected F32 [1])"));
  EXPECT_THAT(msg, HasSubstr("tensor 'top_l.2.bais' not used"));
}

TEST(ModelLoaderTest, OtherConventionGetsAHint) {
  const auto dcn_tensors = ExpectedTensors(kDcn);
  // A DLRM_DCN file next to a DOT config of the same shapes.
  std::string dot_config(kDcn);
  dot_config.replace(dot_config.find("kind: DCN_V2 dcn_num_layers: 2 dcn_low_rank: 3"),
                     std::string("kind: DCN_V2 dcn_num_layers: 2 dcn_low_rank: 3").size(),
                     "kind: DOT");
  const std::string msg = LoadError(dot_config, dcn_tensors, "hint");
  // First line, so the 20-line cap of the error list never hides it.
  EXPECT_THAT(msg.substr(0, msg.find('\n')),
              HasSubstr("weights.safetensors: the file looks like a TorchRec "
                        "DLRM_DCN state_dict, but model.pbtxt says interaction "
                        "DOT"));

  // A DLRM_Net file for a DCN_V2 config.
  std::string dcn_config(kMini);
  dcn_config += "interaction { kind: DCN_V2 dcn_num_layers: 1 dcn_low_rank: 2 }";
  EXPECT_THAT(LoadError(dcn_config, ExpectedTensors(kMini), "hint2"),
              HasSubstr("the file looks like a DLRM_Net state_dict, but "
                        "model.pbtxt says interaction DCN_V2"));

  // TorchRec's DLRMTrain wraps the model as `model`.
  std::map<std::string, OwnedTensor> wrapped;
  for (const auto& [name, t] : dcn_tensors) {
    OwnedTensor copy = t;
    copy.name = "model." + name;
    wrapped[copy.name] = copy;
  }
  EXPECT_THAT(LoadError(kDcn, wrapped, "hint3"),
              HasSubstr("names start with 'model.'"));
}

TEST(ModelLoaderTest, NonFiniteMlpWeight) {
  auto tensors = ExpectedTensors(kMini);
  const float nan = NAN;
  std::memcpy(tensors["top_l.0.weight"].bytes.data() + 4 * 5, &nan, 4);
  EXPECT_THAT(LoadError(kMini, tensors, "nan"),
              HasSubstr("tensor 'top_l.0.weight': non-finite value nan at element 5"));
}

// Issue 17, defect 3: a NaN or Inf in an embedding row made every score that
// pooled the row NaN, and was served with OK. It is refused at load, naming
// the table, the row and the element, for each row type.
TEST(ModelLoaderTest, NonFiniteEmbeddingRowIsRefused) {
  auto tensors = ExpectedTensors(kMini);
  const float nan = NAN;
  // t1 is [20, 4]: row 7, element 2.
  std::memcpy(tensors["emb_l.1.weight"].bytes.data() + 4 * (7 * 4 + 2), &nan, 4);
  EXPECT_THAT(LoadError(kMini, tensors, "nan_row"),
              HasSubstr("weights.safetensors: tensor 'emb_l.1.weight' (table 't1'): "
                        "row 7 element 2 is nan: embedding rows must be finite"));

  // fp16 +Inf (0x7C00) in table 'a' [5, 2], bf16 -Inf (0xFF80) in 'b' [7, 6].
  auto half = ExpectedTensors(kCat);
  const uint16_t inf16 = 0x7C00;
  std::memcpy(half["emb_l.0.weight"].bytes.data() + 2 * (4 * 2 + 1), &inf16, 2);
  EXPECT_THAT(LoadError(kCat, half, "inf_fp16"),
              HasSubstr("tensor 'emb_l.0.weight' (table 'a'): row 4 element 1 is inf"));
  auto bf = ExpectedTensors(kCat);
  const uint16_t ninf_bf16 = 0xFF80;
  std::memcpy(bf["emb_l.1.weight"].bytes.data() + 2 * (6 * 6 + 5), &ninf_bf16, 2);
  EXPECT_THAT(LoadError(kCat, bf, "inf_bf16"),
              HasSubstr("tensor 'emb_l.1.weight' (table 'b'): row 6 element 5 is -inf"));

  // A dynamic table's rows too (its keys are integers: never checked).
  auto dyn = ExpectedTensors(kDynamic);
  std::memcpy(dyn["emb_l.0.weight"].bytes.data() + 4 * (5 * 2 + 0), &nan, 4);
  EXPECT_THAT(LoadError(kDynamic, dyn, "nan_dyn"),
              HasSubstr("tensor 'emb_l.0.weight' (table 'ids'): row 5 element 0 is nan"));

  // The largest finite values load.
  auto big = ExpectedTensors(kCat);
  const uint16_t max16 = 0x7BFF, max_bf16 = 0x7F7F;
  std::memcpy(big["emb_l.0.weight"].bytes.data(), &max16, 2);
  std::memcpy(big["emb_l.1.weight"].bytes.data(), &max_bf16, 2);
  EXPECT_NE(LoadOk(kCat, big, "max_finite"), nullptr);
}

TEST(ModelLoaderTest, NonFiniteDenseWeightNamesRowAndColumn) {
  auto tensors = ExpectedTensors(kMini);
  const float inf = INFINITY;
  // bot_l.2.weight is [4, 8]: element 13 = row 1, column 5.
  std::memcpy(tensors["bot_l.2.weight"].bytes.data() + 4 * 13, &inf, 4);
  EXPECT_THAT(LoadError(kMini, tensors, "inf_dense"),
              HasSubstr("tensor 'bot_l.2.weight': non-finite value inf at element 13 "
                        "(row 1, column 5): dense weights must be finite"));
}

// Issue 17, defect 4: a load can be cancelled (rankd serve does on SIGTERM).
TEST(ModelLoaderTest, CancelledBeforeStartReadsNothing) {
  std::atomic<bool> cancel{true};
  LoadOptions o;
  o.cancel = &cancel;
  auto m = LoadWith(kMini, ExpectedTensors(kMini), "cancel_pre", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled) << m.status();
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("loading model 'mini' v3 from "));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(": cancelled"));
}

TEST(ModelLoaderTest, CancelledDuringATableStopsAtTheNextChunk) {
  // Table e: 32 MiB of random rows = 4 chunks of 8 MiB; table `small` after it.
  constexpr char kTwo[] = R"pb(
    name: "two"
    num_dense: 2
    tables { name: "e" num_rows: 65536 dim: 128 init { kind: RANDOM } }
    tables { name: "small" num_rows: 10 dim: 2 init { kind: RANDOM } }
    sparse_features { name: "fe" table: "e" }
    sparse_features { name: "fs" table: "small" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb";
  std::atomic<bool> cancel{false};
  std::vector<std::string> lines;
  LoadOptions o;
  o.num_threads = 1;                          // chunks one after the other
  o.progress_min_bytes = 0;                   // a line for every phase ...
  o.progress_interval = absl::ZeroDuration();  // ... after every chunk
  o.cancel = &cancel;
  o.log = [&](const std::string& line) {
    lines.push_back(line);
    cancel = true;  // as a signal arriving after the first chunk
  };
  auto m = LoadWith(kTwo, ExpectedTensors(kTwo), "cancel_mid", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled) << m.status();
  // One progress line (25%), no end line, nothing of the next table.
  ASSERT_EQ(lines.size(), 1u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], HasSubstr("table e (random rows): 25%"));
}

TEST(ModelLoaderTest, NameMustMatchDirectory) {
  const std::string dir = TmpDir("name/other/1");
  WriteModel(dir, kMini, ExpectedTensors(kMini));
  absl::StatusOr<std::shared_ptr<const Model>> m = LoadModel(dir, 1, "other");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(absl::StrCat(dir, "/model.pbtxt: name: 'mini' must equal "
                                          "the model's directory name 'other'")));
  EXPECT_TRUE(LoadModel(dir, 1, "mini").ok());
  EXPECT_TRUE(LoadModel(dir, 1).ok());
}

TEST(ModelLoaderTest, ConfigErrorsCarryThePath) {
  std::string text(kMini);
  text.replace(text.find("top_mlp: [ 8, 1 ]"), 17, "top_mlp: [ 8, 2 ]");
  const std::string msg = LoadError(text, ExpectedTensors(kMini), "badcfg");
  EXPECT_THAT(msg, HasSubstr("/model.pbtxt: top_mlp[1]: the last width must be 1"));
}

TEST(ModelLoaderTest, MissingFiles) {
  const std::string dir = TmpDir("nofiles");
  absl::StatusOr<std::shared_ptr<const Model>> m = LoadModel(dir);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("model.pbtxt"));
  std::ofstream(absl::StrCat(dir, "/model.pbtxt")) << kMini;
  m = LoadModel(dir);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("weights.safetensors"));
}

}  // namespace
}  // namespace rankd::engine
