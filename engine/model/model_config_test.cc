// ReadModelConfig / ValidateModelConfig: defaults, syntax errors with
// positions, and one test per semantic check (each asserting its message).
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/model_config_defaults.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_shapes.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {
namespace {

using rankd::v1::ModelConfig;
using ::testing::HasSubstr;
using ::testing::Not;

// MiniDLRM (MODELS.md): dense 13, dim 4, tables [10, 20, 30], 13-8-4, 10-8-1.
constexpr char kMini[] = R"pb(
  name: "mini"
  num_dense: 13
  tables { name: "t0" num_rows: 10 dim: 4 }
  tables { name: "t1" num_rows: 20 dim: 4 }
  tables { name: "t2" num_rows: 30 dim: 4 }
  sparse_features { name: "f0" table: "t0" }
  sparse_features { name: "f1" table: "t1" }
  sparse_features { name: "f2" table: "t2" }
  bottom_mlp: [ 8, 4 ]
  top_mlp: [ 8, 1 ]
)pb";

ModelConfig Parse(const std::string& text) {
  ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  return config;
}

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = TmpPath(name);
  std::ofstream(path) << text;
  return path;
}

// Applies `mutate` to MiniDLRM and returns the validation message.
std::string ErrorAfter(const std::function<void(ModelConfig*)>& mutate) {
  ModelConfig config = Parse(kMini);
  mutate(&config);
  absl::Status s = ValidateModelConfig(&config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ModelConfigTest, MiniIsValidAndDefaultsAreFilled) {
  ModelConfig config = Parse(kMini);
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  for (const rankd::v1::TableConfig& t : config.tables()) {
    EXPECT_EQ(t.kind(), rankd::v1::STATIC);
    EXPECT_EQ(t.dtype(), rankd::v1::FP32);
    EXPECT_EQ(t.pooling(), rankd::v1::SUM);
    EXPECT_EQ(t.placement(), rankd::v1::AUTO);
    EXPECT_EQ(t.id_policy(), rankd::v1::ERROR);
    EXPECT_EQ(t.capacity(), 0);
  }
  EXPECT_EQ(config.interaction().kind(), rankd::v1::DOT);
  EXPECT_EQ(config.batching().max_batch_candidates(), 4096);
  EXPECT_EQ(config.batching().max_queue_delay_us(), 0);
  EXPECT_EQ(config.batching().preferred_batch_candidates(), 4096);
  EXPECT_EQ(config.batching().max_queue_requests(), 1024);
  EXPECT_EQ(config.batching().default_timeout_us(), 10000000);
  EXPECT_TRUE(config.has_instances());
  EXPECT_EQ(InteractionWidth(config), 10);  // 4 + 4*3/2 pairs
}

TEST(ModelConfigTest, ExplicitValuesAreKept) {
  ModelConfig config = Parse(absl::StrCat(kMini, R"pb(
    batching { max_batch_candidates: 512 preferred_batch_candidates: 256
               max_queue_delay_us: 100 }
    instances { workers_per_device: 3 }
  )pb"));
  config.mutable_tables(1)->set_dtype(rankd::v1::BF16);
  config.mutable_tables(1)->set_pooling(rankd::v1::MEAN);
  config.mutable_tables(1)->set_placement(rankd::v1::HOST);
  config.mutable_tables(1)->set_id_policy(rankd::v1::ZERO);
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  EXPECT_EQ(config.batching().max_batch_candidates(), 512);
  EXPECT_EQ(config.batching().preferred_batch_candidates(), 256);
  EXPECT_EQ(config.batching().max_queue_delay_us(), 100);
  EXPECT_EQ(config.instances().workers_per_device(), 3);
  EXPECT_EQ(config.tables(1).dtype(), rankd::v1::BF16);
  EXPECT_EQ(config.tables(1).pooling(), rankd::v1::MEAN);
  EXPECT_EQ(config.tables(1).placement(), rankd::v1::HOST);
  EXPECT_EQ(config.tables(1).id_policy(), rankd::v1::ZERO);
}

TEST(ModelConfigTest, DynamicTableDefaults) {
  ModelConfig config = Parse(kMini);
  config.mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(0)->set_num_rows(100);
  config.mutable_tables(1)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(1)->set_num_rows(128);
  config.mutable_tables(2)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(2)->set_capacity(40);  // explicit: kept
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  EXPECT_EQ(config.tables(0).capacity(), 256);
  EXPECT_EQ(config.tables(1).capacity(), 256);
  EXPECT_EQ(config.tables(2).capacity(), 40);
  EXPECT_EQ(config.tables(0).id_policy(), rankd::v1::ZERO);
  EXPECT_EQ(DefaultDynamicCapacity(1), 2);
  EXPECT_EQ(DefaultDynamicCapacity(3), 8);
  EXPECT_EQ(DefaultDynamicCapacity(0), 0);
}

TEST(ModelConfigTest, MaxKeysAndEviction) {
  ModelConfig config = Parse(kMini);
  config.mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(0)->set_num_rows(100);
  config.mutable_tables(0)->set_max_keys(1000);
  config.mutable_tables(1)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(1)->set_num_rows(50);
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  // Slots default from max_keys; max_keys defaults to num_rows; LRU.
  EXPECT_EQ(config.tables(0).capacity(), 2048);
  EXPECT_EQ(config.tables(1).max_keys(), 50);
  EXPECT_EQ(config.tables(1).eviction(), rankd::v1::LRU);
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
                c->mutable_tables(0)->set_max_keys(c->tables(0).num_rows() - 1);
              }),
              HasSubstr("tables[0].max_keys: must be >= num_rows"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
                c->mutable_tables(0)->set_max_keys(1000);
                c->mutable_tables(0)->set_capacity(512);
              }),
              HasSubstr("tables[0].capacity: must be >= max_keys (1000), got 512"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
                c->mutable_tables(0)->set_max_keys(int64_t{1} << 50);
              }),
              HasSubstr("tables[0].max_keys: at most 2^40 keys"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->set_max_keys(10); }),
              HasSubstr("tables[1].max_keys: only DYNAMIC tables have max_keys"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(1)->set_eviction(rankd::v1::LFU);
              }),
              HasSubstr("tables[1].eviction: only DYNAMIC tables evict"));
}

TEST(ModelConfigTest, InteractionWidths) {
  ModelConfig dot = Parse(kMini);
  dot.mutable_interaction()->set_self_interaction(true);
  ASSERT_TRUE(ValidateModelConfig(&dot).ok());
  EXPECT_EQ(InteractionWidth(dot), 4 + 10);  // n = 4: n*(n+1)/2 pairs

  ModelConfig cat = Parse(kMini);
  cat.mutable_interaction()->set_kind(rankd::v1::CAT);
  cat.mutable_tables(1)->set_dim(16);
  cat.set_top_mlp(0, 8);
  ASSERT_TRUE(ValidateModelConfig(&cat).ok());
  EXPECT_EQ(InteractionWidth(cat), 4 + 4 + 16 + 4);

  ModelConfig dcn = Parse(kMini);
  dcn.mutable_interaction()->set_kind(rankd::v1::DCN_V2);
  dcn.mutable_interaction()->set_dcn_num_layers(2);
  dcn.mutable_interaction()->set_dcn_low_rank(3);
  ASSERT_TRUE(ValidateModelConfig(&dcn).ok());
  EXPECT_EQ(InteractionWidth(dcn), (1 + 3) * 4);

  // Two features sharing a table count twice.
  ModelConfig shared = Parse(kMini);
  auto* f = shared.add_sparse_features();
  f->set_name("f3");
  f->set_table("t0");
  ASSERT_TRUE(ValidateModelConfig(&shared).ok());
  EXPECT_EQ(InteractionWidth(shared), 4 + 10);
}

TEST(ModelConfigTest, ReadsFileAndFillsDefaults) {
  const std::string path = WriteText("ok.pbtxt", kMini);
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name(), "mini");
  EXPECT_EQ(config->tables(2).num_rows(), 30);
  EXPECT_EQ(config->batching().max_batch_candidates(), 4096);
}

TEST(ModelConfigTest, MissingFileIsNotFound) {
  const std::string path = TmpPath("nope.pbtxt");
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));
}

TEST(ModelConfigTest, DirectoryIsNotAConfig) {
  const std::string path = TmpPath("a_directory.pbtxt");
  std::filesystem::create_directories(path);
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(absl::StrCat(path, ": is a directory, not a regular file")));
}

// Issue 17, defect 4: a FIFO is refused without being opened for reading
// (which would wait for a writer forever; the test's timeout catches it).
TEST(ModelConfigTest, FifoIsNotAConfig) {
  const std::string path = TmpPath("fifo.pbtxt");
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(absl::StrCat(path, ": is a FIFO (named pipe), not a regular file")));
}

TEST(ModelConfigTest, OversizedConfigIsRefusedUnread) {
  const std::string path = TmpPath("huge.pbtxt");
  std::ofstream(path) << "name: \"x\"\n";
  std::filesystem::resize_file(path, kMaxModelConfigBytes + 1);
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(absl::StrCat("a model config is at most ", kMaxModelConfigBytes)));
}

TEST(ModelConfigTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string path = WriteText("syntax.pbtxt",
                                     "name: \"mini\"\n"
                                     "num_dense: 13\n"
                                     "tables { name: \"t0\" dimm: 4 }\n");
  absl::StatusOr<ModelConfig> config = ReadModelConfig(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(absl::StrCat(path, ":3:")));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("dimm"));

  const std::string path2 = WriteText("syntax2.pbtxt",
                                      "name: \"mini\"\n"
                                      "num_dense: \"thirteen\"\n");
  absl::StatusOr<ModelConfig> config2 = ReadModelConfig(path2);
  EXPECT_THAT(std::string(config2.status().message()),
              HasSubstr(absl::StrCat(path2, ":2:12: ")));

  const std::string path3 = WriteText("syntax3.pbtxt", "tables { name: \"t\"\n");
  EXPECT_THAT(std::string(ReadModelConfig(path3).status().message()),
              HasSubstr(absl::StrCat(path3, ":2:")));
}

TEST(ModelConfigTest, SemanticErrorNamesFileAndField) {
  ModelConfig config = Parse(kMini);
  config.mutable_tables(2)->set_dim(0);
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  const std::string path = WriteText("semantic.pbtxt", text);
  absl::StatusOr<ModelConfig> read = ReadModelConfig(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(absl::StrCat(path, ": tables[2].dim: must be > 0, got 0")));
}

TEST(ModelConfigTest, ReportsEveryProblemAtOnce) {
  const std::string msg = ErrorAfter([](ModelConfig* c) {
    c->set_num_dense(-1);
    c->mutable_tables(0)->set_num_rows(0);
    c->set_top_mlp(1, 2);
  });
  EXPECT_THAT(msg, HasSubstr("num_dense: must be >= 0, got -1"));
  EXPECT_THAT(msg, HasSubstr("tables[0].num_rows: must be > 0, got 0"));
  EXPECT_THAT(msg, HasSubstr("top_mlp[1]: the last width must be 1"));
}

TEST(ModelConfigTest, Name) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->clear_name(); }),
              HasSubstr("name: must be set"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_name("my model"); }),
              HasSubstr("name: 'my model' may only contain letters, digits"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_name("a/b"); }),
              HasSubstr("name: 'a/b'"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_name(".."); }),
              HasSubstr("may not start with '.'"));
  ModelConfig ok = Parse(kMini);
  ok.set_name("ctr-v2.1_EU");
  EXPECT_TRUE(ValidateModelConfig(&ok).ok());
}

TEST(ModelConfigTest, Tables) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->clear_tables();
                c->clear_sparse_features();
              }),
              HasSubstr("tables: at least one table is required"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->set_name("t0"); }),
              HasSubstr("tables[1].name: duplicate 't0' (also tables[0])"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->clear_name(); }),
              HasSubstr("tables[1].name: must be set"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->set_name("a.b"); }),
              HasSubstr("tables[1].name: 'a.b' may only contain"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->set_num_rows(-5); }),
              HasSubstr("tables[1].num_rows: must be > 0, got -5"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(2)->set_dim(0); }),
              HasSubstr("tables[2].dim: must be > 0, got 0"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->add_default_vector(1.0f);
              }),
              HasSubstr("tables[0].default_vector: must be empty or hold dim (4) "
                        "values, got 1"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                for (float v : {1.0f, NAN, 0.0f, 0.0f}) {
                  c->mutable_tables(0)->add_default_vector(v);
                }
              }),
              HasSubstr("tables[0].default_vector[1]: must be finite"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_capacity(64);
              }),
              HasSubstr("tables[0].capacity: only DYNAMIC tables have a "
                        "capacity, got 64"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
                c->mutable_tables(0)->set_capacity(5);
              }),
              HasSubstr("tables[0].capacity: must be >= num_rows (10), got 5"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->set_dtype(static_cast<rankd::v1::DataType>(9));
              }),
              HasSubstr("tables[0].dtype: unknown value 9"));
  // A default vector of the right length is fine.
  ModelConfig ok = Parse(kMini);
  for (int i = 0; i < 4; ++i) ok.mutable_tables(0)->add_default_vector(0.5f);
  EXPECT_TRUE(ValidateModelConfig(&ok).ok());
}

TEST(ModelConfigTest, SparseFeatures) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->clear_sparse_features(); }),
              HasSubstr("sparse_features: at least one feature is required"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_sparse_features(2)->set_name("f0");
              }),
              HasSubstr("sparse_features[2].name: duplicate 'f0' (also "
                        "sparse_features[0])"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_sparse_features(1)->clear_name();
              }),
              HasSubstr("sparse_features[1].name: must be set"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_sparse_features(1)->set_table("t9");
              }),
              HasSubstr("sparse_features[1].table: no table named 't9'"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_sparse_features(1)->clear_table();
              }),
              HasSubstr("sparse_features[1].table: must be set"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_sparse_features(0)->set_max_ids_per_bag(-1);
              }),
              HasSubstr("sparse_features[0].max_ids_per_bag: must be >= 0, got -1"));
}

TEST(ModelConfigTest, Mlps) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_bottom_mlp(0, 0); }),
              HasSubstr("bottom_mlp[0]: must be > 0, got 0"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_num_dense(0); }),
              HasSubstr("bottom_mlp: needs num_dense > 0"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->clear_top_mlp(); }),
              HasSubstr("top_mlp: must be set"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->set_top_mlp(0, -3); }),
              HasSubstr("top_mlp[0]: must be > 0, got -3"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->add_top_mlp(4); }),
              HasSubstr("top_mlp[2]: the last width must be 1 (the logit), got 4"));
}

TEST(ModelConfigTest, DotNeedsEqualDims) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->mutable_tables(1)->set_dim(8); }),
              HasSubstr("tables[1].dim: DOT interaction needs every feature's dim "
                        "to equal the bottom MLP output width (bottom_mlp[1] = 4), "
                        "got 8"));
  // Without a bottom MLP, x is the dense input itself.
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) { c->clear_bottom_mlp(); }),
              HasSubstr("tables[0].dim: DOT interaction needs every feature's dim "
                        "to equal num_dense (13), as there is no bottom_mlp, got 4"));
  ModelConfig ok = Parse(kMini);
  ok.clear_bottom_mlp();
  ok.set_num_dense(4);
  EXPECT_TRUE(ValidateModelConfig(&ok).ok());
  // A table no feature uses may have any dim.
  ModelConfig unused = Parse(kMini);
  auto* t = unused.add_tables();
  t->set_name("spare");
  t->set_num_rows(3);
  t->set_dim(7);
  EXPECT_TRUE(ValidateModelConfig(&unused).ok());
}

TEST(ModelConfigTest, CatAllowsMixedDims) {
  ModelConfig config = Parse(kMini);
  config.mutable_interaction()->set_kind(rankd::v1::CAT);
  config.mutable_tables(0)->set_dim(32);
  EXPECT_TRUE(ValidateModelConfig(&config).ok());
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_interaction()->set_kind(rankd::v1::CAT);
                c->mutable_interaction()->set_self_interaction(true);
              }),
              HasSubstr("interaction.self_interaction: only DOT"));
}

TEST(ModelConfigTest, DcnV2) {
  auto dcn = [](ModelConfig* c) {
    c->mutable_interaction()->set_kind(rankd::v1::DCN_V2);
    c->mutable_interaction()->set_dcn_num_layers(3);
    c->mutable_interaction()->set_dcn_low_rank(2);
  };
  EXPECT_THAT(ErrorAfter([&](ModelConfig* c) {
                dcn(c);
                c->mutable_interaction()->set_dcn_num_layers(0);
              }),
              HasSubstr("interaction.dcn_num_layers: must be > 0 for DCN_V2, got 0"));
  EXPECT_THAT(ErrorAfter([&](ModelConfig* c) {
                dcn(c);
                c->mutable_interaction()->set_dcn_low_rank(-1);
              }),
              HasSubstr("interaction.dcn_low_rank: must be > 0 for DCN_V2, got -1"));
  EXPECT_THAT(ErrorAfter([&](ModelConfig* c) {
                dcn(c);
                c->mutable_tables(2)->set_dim(5);
              }),
              HasSubstr("tables[2].dim: DCN_V2 interaction needs every feature's "
                        "dim to equal"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_interaction()->set_dcn_num_layers(2);
              }),
              HasSubstr("only DCN_V2 interactions have them"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_interaction()->set_kind(
                    static_cast<rankd::v1::InteractionKind>(17));
              }),
              HasSubstr("interaction.kind: unknown value 17"));
}

TEST(ModelConfigTest, BatchingAndInstances) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_batching()->set_max_batch_candidates(-1);
              }),
              HasSubstr("batching.max_batch_candidates: must be > 0, got -1"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_batching()->set_max_queue_delay_us(-5);
              }),
              HasSubstr("batching.max_queue_delay_us: must be >= 0 (0 = no wait), got -5"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_batching()->set_max_queue_requests(-2);
              }),
              HasSubstr("batching.max_queue_requests: must be > 0, got -2"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_batching()->set_default_timeout_us(-1);
              }),
              HasSubstr("batching.default_timeout_us: must be > 0, got -1"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_batching()->set_max_batch_candidates(100);
                c->mutable_batching()->set_preferred_batch_candidates(200);
              }),
              HasSubstr("batching.preferred_batch_candidates: must be <= "
                        "max_batch_candidates (100), got 200"));
  EXPECT_THAT(
      ErrorAfter([](ModelConfig* c) { c->mutable_instances()->set_workers_per_device(-1); }),
      HasSubstr("instances.workers_per_device: must be in [0, 1024] (0 = automatic), "
                "got -1"));
  EXPECT_THAT(
      ErrorAfter([](ModelConfig* c) { c->mutable_instances()->set_cpu_threads_per_worker(-1); }),
      HasSubstr("instances.cpu_threads_per_worker: must be in [0, 1024] (0 = "
                "automatic), got -1"));
}

// Each worker and compute thread is an OS thread started at load: a hostile
// count must be a clear error, not a process aborted by std::thread.
TEST(ModelConfigTest, RejectsThreadCountsPastTheLimits) {
  EXPECT_THAT(
      ErrorAfter([](ModelConfig* c) { c->mutable_instances()->set_workers_per_device(1025); }),
      HasSubstr("instances.workers_per_device: must be in [0, 1024] (0 = automatic), "
                "got 1025"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_instances()->set_cpu_threads_per_worker(2147483647);
              }),
              HasSubstr("instances.cpu_threads_per_worker: must be in [0, 1024] (0 = "
                        "automatic), got 2147483647"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_instances()->set_workers_per_device(1024);
                c->mutable_instances()->set_cpu_threads_per_worker(5);
              }),
              HasSubstr("instances: workers_per_device (1024) x cpu_threads_per_worker (5) must "
                        "be at most 4096 threads, got 5120"));
  // At the limits, and automatic counts (resolved at load), are accepted.
  for (const auto& [workers, threads] : {std::pair{1024, 4}, std::pair{4, 1024}, std::pair{0, 0}}) {
    ModelConfig config = Parse(kMini);
    config.mutable_instances()->set_workers_per_device(workers);
    config.mutable_instances()->set_cpu_threads_per_worker(threads);
    EXPECT_TRUE(ValidateModelConfig(&config).ok()) << workers << " x " << threads;
  }
}

TEST(ModelConfigTest, TableInitDefaults) {
  ModelConfig config = Parse(kMini);
  config.mutable_tables(1)->mutable_init()->set_kind(rankd::v1::RANDOM);
  config.mutable_tables(1)->mutable_init()->set_seed(7);
  config.mutable_tables(2)->mutable_init()->set_kind(rankd::v1::RANDOM);
  config.mutable_tables(2)->mutable_init()->set_scale(0.25f);
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  EXPECT_EQ(config.tables(0).init().kind(), rankd::v1::FILE);
  EXPECT_EQ(config.tables(0).init().scale(), 0);
  EXPECT_EQ(config.tables(1).init().kind(), rankd::v1::RANDOM);
  EXPECT_EQ(config.tables(1).init().seed(), 7u);
  // 0 = 1/sqrt(num_rows), written into the config so inspect shows it.
  EXPECT_FLOAT_EQ(config.tables(1).init().scale(), 1 / std::sqrt(20.0f));
  EXPECT_EQ(config.tables(2).init().scale(), 0.25f);
}

TEST(ModelConfigTest, TableInit) {
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(1)->mutable_init()->set_kind(
                    static_cast<rankd::v1::TableInitKind>(9));
              }),
              HasSubstr("tables[1].init.kind: unknown value 9"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                auto* init = c->mutable_tables(2)->mutable_init();
                init->set_kind(rankd::v1::RANDOM);
                init->set_scale(-0.5f);
              }),
              HasSubstr("tables[2].init.scale: must be finite and >= 0 "
                        "(0 = 1/sqrt(num_rows)), got -0.5"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                auto* init = c->mutable_tables(0)->mutable_init();
                init->set_kind(rankd::v1::RANDOM);
                init->set_scale(std::nanf(""));
              }),
              HasSubstr("tables[0].init.scale: must be finite"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                c->mutable_tables(0)->mutable_init()->set_seed(3);
              }),
              HasSubstr("tables[0].init.seed: only RANDOM init takes a seed"));
  EXPECT_THAT(ErrorAfter([](ModelConfig* c) {
                auto* init = c->mutable_tables(1)->mutable_init();
                init->set_kind(rankd::v1::FILE);
                init->set_scale(0.1f);
              }),
              HasSubstr("tables[1].init.scale: only RANDOM init takes a scale"));
  // The text form users write.
  ModelConfig text = Parse(R"pb(
    name: "r"
    tables { name: "t" kind: DYNAMIC num_rows: 5 dim: 2 dtype: BF16
             init { kind: RANDOM seed: 11 scale: 0.5 } }
    sparse_features { name: "f" table: "t" }
    interaction { kind: CAT }
    top_mlp: [ 1 ]
  )pb");
  EXPECT_TRUE(ValidateModelConfig(&text).ok()) << ValidateModelConfig(&text);
  EXPECT_EQ(text.tables(0).init().seed(), 11u);
}

TEST(ModelConfigTest, ValidationIsIdempotent) {
  ModelConfig config = Parse(kMini);
  config.mutable_tables(0)->set_kind(rankd::v1::DYNAMIC);
  config.mutable_tables(1)->mutable_init()->set_kind(rankd::v1::RANDOM);
  ASSERT_TRUE(ValidateModelConfig(&config).ok());
  ModelConfig again = config;
  ASSERT_TRUE(ValidateModelConfig(&again).ok());
  EXPECT_EQ(again.SerializeAsString(), config.SerializeAsString());
  EXPECT_THAT(again.DebugString(), Not(HasSubstr("UNSPECIFIED")));
}

}  // namespace
}  // namespace rankd::engine
