#include "engine/generator/model_generator.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/stat.h>

#include "engine/cpu/cpu_engine.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors.h"
#include "engine/testing/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;

std::string TmpDir(const std::string& leaf) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + leaf;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ModelGeneratorTest, EveryPresetLoadsWithItsShapes) {
  struct Want {
    const char* preset;
    double scale;
    int tables;
    int interaction_width;
    int top_layers;
  };
  for (const Want& w : {Want{"mini", 1.0, 3, 10, 2}, Want{"kaggle", 1e-4, 26, 367, 3},
                        Want{"terabyte", 1e-4, 26, 415, 4}, Want{"mlperf", 1e-5, 26, 3456, 5}}) {
    GenerateOptions o;
    o.preset = w.preset;
    o.scale = w.scale;
    const std::string dir = TmpDir(std::string("gen_") + w.preset + "/1");
    ASSERT_TRUE(GenerateModel(o, dir).ok()) << w.preset;
    auto model = LoadModel(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->name, w.preset);
    EXPECT_EQ(static_cast<int>((*model)->tables.size()), w.tables);
    EXPECT_EQ((*model)->interaction_width, w.interaction_width) << w.preset;
    EXPECT_EQ(static_cast<int>((*model)->top.size()), w.top_layers) << w.preset;
    EXPECT_EQ((*model)->top.back().out, 1);
  }
}

TEST(ModelGeneratorTest, MiniSweepAndDynamicTables) {
  GenerateOptions o;
  o.num_tables = 8;
  o.dynamic_tables = 2;
  o.dtype = rankd::v1::BF16;
  const std::string dir = TmpDir("gen_mini8/1");
  ASSERT_TRUE(GenerateModel(o, dir).ok());
  auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ASSERT_EQ(m.tables.size(), 8u);
  EXPECT_EQ(m.interaction_width, 4 + 9 * 8 / 2);  // MODELS.md: n_pairs + 4
  // The two largest tables (rows 120 and 100) are the dynamic ones.
  EXPECT_TRUE(m.tables[7].dynamic);
  EXPECT_TRUE(m.tables[6].dynamic);
  EXPECT_FALSE(m.tables[5].dynamic);
  EXPECT_EQ(m.tables[7].hash.size(), 120);
  EXPECT_EQ(m.tables[0].row_type, kernels::RowType::kBf16);
}

TEST(ModelGeneratorTest, DeterministicBytes) {
  GenerateOptions o;
  o.preset = "kaggle";
  o.scale = 1e-4;
  o.seed = 42;
  ASSERT_TRUE(GenerateModel(o, TmpDir("det_a")).ok());
  ASSERT_TRUE(GenerateModel(o, TmpDir("det_b")).ok());
  const std::string a = ReadAll(TmpDir("det_a/weights.safetensors"));
  EXPECT_GT(a.size(), 100000u);
  EXPECT_EQ(a, ReadAll(TmpDir("det_b/weights.safetensors")));
  o.seed = 43;
  ASSERT_TRUE(GenerateModel(o, TmpDir("det_c")).ok());
  EXPECT_NE(a, ReadAll(TmpDir("det_c/weights.safetensors")));
}

// --init random: tables generated at load, the file holds the MLPs only; the
// model loads and scores on the CPU engine, the same on every load.
TEST(ModelGeneratorTest, RandomInitRoundTrip) {
  GenerateOptions o;
  o.num_tables = 6;
  o.dynamic_tables = 2;
  o.dtype = rankd::v1::FP16;
  o.init = rankd::v1::RANDOM;
  o.seed = 17;
  const std::string dir = TmpDir("gen_random/1");
  ASSERT_TRUE(GenerateModel(o, dir).ok());
  auto file = SafetensorsFile::Open(dir + "/weights.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  for (const auto& [name, info] : (*file)->tensors()) {
    EXPECT_THAT(name, ::testing::Not(::testing::StartsWith("emb_l."))) << name;
  }
  EXPECT_THAT(ReadAll(dir + "/model.pbtxt"),
              HasSubstr("init {\n    kind: RANDOM\n    seed: 17\n  }"));

  std::vector<float> first;
  for (int load = 0; load < 2; ++load) {
    LoadOptions lo;
    lo.num_threads = 1 + 2 * load;  // 1, then 3 threads: same rows
    auto model = LoadModel(dir, 1, "mini", lo);
    ASSERT_TRUE(model.ok()) << model.status();
    const Model& m = **model;
    EXPECT_TRUE(m.tables[5].dynamic);
    EXPECT_EQ(m.tables[5].hash.size(), 80);  // rows 10..80: t5 is largest
    EXPECT_EQ(m.tables[0].row_type, kernels::RowType::kFp16);
    EXPECT_EQ(m.load_stats.tables[0].source, TableSource::kRandom);
    CpuEngine::Options eo;
    eo.num_threads = 1;
    auto engine = CpuEngine::Create(*model, eo);
    ASSERT_TRUE(engine.ok()) << engine.status();
    testing::RandomRequestSpec rs;
    rs.num_candidates = 33;
    rs.max_bag = 4;
    const testing::OwnedRequest r = testing::MakeRandomRequest(m, rs);
    auto scores = (*engine)->Score(r.view());
    ASSERT_TRUE(scores.ok()) << scores.status();
    ASSERT_EQ(scores->size(), 33u);
    for (float v : *scores) {
      ASSERT_TRUE(v > 0 && v < 1) << v;
    }
    if (load == 0) {
      first = *scores;
    } else {
      EXPECT_EQ(*scores, first);
    }
  }
}

// The point of --init random: full-size mlperf (52 GB of fp16 rows) as a
// config plus a file of dense weights only. Not loaded here (no such memory).
TEST(ModelGeneratorTest, FullSizeMlperfWithRandomInitIsSmall) {
  GenerateOptions o;
  o.preset = "mlperf";
  o.dtype = rankd::v1::FP16;
  o.init = rankd::v1::RANDOM;
  const std::string dir = TmpDir("gen_mlperf_random/1");
  ASSERT_TRUE(GenerateModel(o, dir).ok());
  struct stat st;
  ASSERT_EQ(stat((dir + "/weights.safetensors").c_str(), &st), 0);
  EXPECT_LT(st.st_size, int64_t{100} << 20);
  auto config = ReadModelConfig(dir + "/model.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status();
  int64_t rows = 0;
  for (const auto& t : config->tables()) {
    EXPECT_EQ(t.init().kind(), rankd::v1::RANDOM);
    EXPECT_EQ(t.dtype(), rankd::v1::FP16);
    rows += t.num_rows();
  }
  EXPECT_EQ(rows, 204184588);  // MODELS.md: 204.2 M rows
}

TEST(ModelGeneratorTest, RejectsBadOptions) {
  GenerateOptions o;
  o.preset = "huge";
  EXPECT_THAT(std::string(PresetConfig(o).status().message()),
              HasSubstr("--preset: unknown preset \"huge\""));
  o.preset = "mini";
  o.scale = 0;
  EXPECT_THAT(std::string(PresetConfig(o).status().message()), HasSubstr("--scale"));
  o.scale = 1;
  o.num_tables = 17;
  EXPECT_THAT(std::string(PresetConfig(o).status().message()), HasSubstr("--num_tables"));
  o.num_tables = 0;
  o.dynamic_tables = 4;
  EXPECT_THAT(std::string(PresetConfig(o).status().message()), HasSubstr("--dynamic_tables"));
}

// --bottom_mlp / --top_mlp replace the preset's widths; the top MLP's input
// is still the interaction's width.
TEST(ModelGeneratorTest, MlpWidthOverrides) {
  GenerateOptions o;
  o.preset = "kaggle";
  o.scale = 1e-4;
  o.bottom_mlp = {32, 16};
  o.top_mlp = {64, 48, 1};
  const std::string dir = TmpDir("gen_wide/1");
  ASSERT_TRUE(GenerateModel(o, dir).ok());
  auto model = LoadModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ASSERT_EQ(m.bottom.size(), 2u);
  EXPECT_EQ(m.bottom[0].in, 13);
  EXPECT_EQ(m.bottom[0].out, 32);
  EXPECT_EQ(m.bottom[1].out, 16);
  ASSERT_EQ(m.top.size(), 3u);
  EXPECT_EQ(m.top[0].in, 367);
  EXPECT_EQ(m.top[0].out, 64);
  EXPECT_EQ(m.top[1].out, 48);
  EXPECT_EQ(m.top[2].out, 1);
}

TEST(ModelGeneratorTest, RejectsBadMlpWidths) {
  GenerateOptions o;
  o.preset = "kaggle";
  o.bottom_mlp = {64, 32};  // kaggle's dim is 16
  EXPECT_THAT(std::string(PresetConfig(o).status().message()),
              HasSubstr("--bottom_mlp: the last width must be 16"));
  o.bottom_mlp = {0, 16};
  EXPECT_THAT(std::string(PresetConfig(o).status().message()),
              HasSubstr("--bottom_mlp: width 0 must be in [1, 65536], got 0"));
  o.bottom_mlp.clear();
  o.top_mlp = {512, 2};
  EXPECT_THAT(std::string(PresetConfig(o).status().message()),
              HasSubstr("--top_mlp: the last width must be 1"));
  o.top_mlp = {kMaxGeneratedWidth + 1, 1};
  EXPECT_THAT(std::string(PresetConfig(o).status().message()), HasSubstr("--top_mlp: width 0"));
  o.top_mlp.assign(kMaxGeneratedLayers + 1, 1);
  EXPECT_THAT(std::string(PresetConfig(o).status().message()),
              HasSubstr("--top_mlp: 65 layers; at most 64"));
}

}  // namespace
}  // namespace rankd::engine
