#include "client/model_control_client.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "client/testing/fake_model_control_service.h"
#include "client/testing/fake_ranking_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// Each test gets a fresh fake (its state changes with every load and label).
class ModelControlClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = testing::StartFakeAdminServer();
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    ModelControlClient::Options options;
    options.target = fake_.target();
    auto client = ModelControlClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override { fake_.server->Shutdown(); }

  // The status of `version` in `model`, or null.
  static const rankd::v1::VersionStatus* Find(const rankd::v1::ModelStatus& model,
                                              int64_t version) {
    for (const auto& v : model.versions()) {
      if (v.version() == version) return &v;
    }
    return nullptr;
  }

  testing::FakeAdminServer fake_;
  std::unique_ptr<ModelControlClient> client_;
};

TEST_F(ModelControlClientTest, DefaultsAreTheAdminListener) {
  ModelControlClient::Options options;
  EXPECT_EQ(options.target, "localhost:8503");
  EXPECT_GT(options.load_deadline_ms, options.deadline_ms);
}

TEST_F(ModelControlClientTest, CreateRejectsBadOptionsNamingTheField) {
  struct Case {
    void (*mutate)(ModelControlClient::Options*);
    const char* field;
  };
  const Case cases[] = {
      {[](ModelControlClient::Options* o) { o->target = ""; }, "target"},
      {[](ModelControlClient::Options* o) { o->deadline_ms = 0; }, "deadline_ms"},
      {[](ModelControlClient::Options* o) { o->load_deadline_ms = -1; }, "load_deadline_ms"},
      {[](ModelControlClient::Options* o) { o->connect_timeout_ms = -1; }, "connect_timeout_ms"},
      {[](ModelControlClient::Options* o) { o->max_message_bytes = 0; }, "max_message_bytes"},
  };
  for (const Case& c : cases) {
    ModelControlClient::Options options;
    c.mutate(&options);
    auto client = ModelControlClient::Create(options);
    ASSERT_FALSE(client.ok()) << c.field;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(client.status().message(), HasSubstr(c.field));
  }
}

TEST_F(ModelControlClientTest, ListModelsAllAndOne) {
  auto all = client_->ListModels();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->models_size(), 3);
  EXPECT_EQ(all->models(0).name(), "broken");
  EXPECT_EQ(all->models(1).name(), "mini");
  EXPECT_EQ(all->models(2).name(), "slow");

  auto mini = client_->ListModels("mini");
  ASSERT_TRUE(mini.ok()) << mini.status();
  ASSERT_EQ(mini->models_size(), 1);
  const rankd::v1::ModelStatus& model = mini->models(0);
  ASSERT_EQ(model.versions_size(), 2);
  EXPECT_EQ(model.versions(0).state(), rankd::v1::READY);
  EXPECT_THAT(model.versions(0).labels(), ElementsAre("stable"));
  EXPECT_GT(model.versions(1).device_bytes(), 0);
  EXPECT_THAT(model.labels(), UnorderedElementsAre(Pair("stable", 1), Pair("canary", 2)));

  auto broken = client_->ListModels("broken");
  ASSERT_TRUE(broken.ok()) << broken.status();
  EXPECT_EQ(broken->models(0).versions(0).state(), rankd::v1::FAILED);
  EXPECT_EQ(broken->models(0).versions(0).reason(),
            testing::FakeModelControlService::kBrokenReason);
}

TEST_F(ModelControlClientTest, UnknownModelIsNotFoundNamingTheModels) {
  auto list = client_->ListModels("nope");
  EXPECT_EQ(list.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(list.status().message(),
            "model \"nope\" is not in the repository (models: broken, mini, slow)");
  auto load = client_->LoadModel("nope");
  EXPECT_EQ(load.status().code(), absl::StatusCode::kNotFound);
  auto unload = client_->UnloadModel("nope");
  EXPECT_EQ(unload.status().code(), absl::StatusCode::kNotFound);
  auto label = client_->SetVersionLabel("nope", "stable", 1);
  EXPECT_EQ(label.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelControlClientTest, LoadNamedVersion) {
  auto loaded = client_->LoadModel("mini", {3});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const rankd::v1::VersionStatus* v3 = Find(loaded->model(), 3);
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->state(), rankd::v1::READY);
  EXPECT_GT(v3->load_seconds(), 0);
  EXPECT_EQ(v3->directory(), "/models/mini/3");

  auto missing = client_->LoadModel("mini", {3, 9});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "model \"mini\" has no version 9 in the repository (versions: 1, 2, 3)");
}

TEST_F(ModelControlClientTest, FailedLoadIsAnAnswerNotAnError) {
  auto loaded = client_->LoadModel("broken");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const rankd::v1::VersionStatus* v1 = Find(loaded->model(), 1);
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(v1->state(), rankd::v1::FAILED);
  EXPECT_THAT(v1->reason(), HasSubstr("weights.safetensors"));
}

TEST_F(ModelControlClientTest, UnloadNamedThenAll) {
  auto one = client_->UnloadModel("mini", {1});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Find(one->model(), 1)->state(), rankd::v1::UNLOADED);
  EXPECT_EQ(Find(one->model(), 1)->device_bytes(), 0);
  EXPECT_EQ(Find(one->model(), 2)->state(), rankd::v1::READY);

  auto all = client_->UnloadModel("mini");
  ASSERT_TRUE(all.ok()) << all.status();
  for (const auto& v : all->model().versions()) EXPECT_EQ(v.state(), rankd::v1::UNLOADED);

  auto missing = client_->UnloadModel("mini", {7});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("(versions: 1, 2, 3)"));
}

TEST_F(ModelControlClientTest, SetVersionLabelMovesAndRemoves) {
  auto moved = client_->SetVersionLabel("mini", "stable", 2);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(moved->model().labels(), UnorderedElementsAre(Pair("stable", 2), Pair("canary", 2)));
  EXPECT_THAT(Find(moved->model(), 1)->labels(), IsEmpty());

  auto removed = client_->SetVersionLabel("mini", "canary", 0);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(removed->model().labels(), UnorderedElementsAre(Pair("stable", 2)));
}

TEST_F(ModelControlClientTest, LabelOnVersionNotReadyIsFailedPrecondition) {
  auto never_loaded = client_->SetVersionLabel("mini", "stable", 3);
  EXPECT_EQ(never_loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(never_loaded.status().message(),
            "model \"mini\" version 3 is not loaded (ready: 1, 2)");

  ASSERT_TRUE(client_->UnloadModel("mini", {1}).ok());
  auto unloaded = client_->SetVersionLabel("mini", "stable", 1);
  EXPECT_EQ(unloaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unloaded.status().message(), HasSubstr("version 1 is UNLOADED, not READY"));

  auto empty = client_->SetVersionLabel("mini", "", 1);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelControlClientTest, LoadUsesItsOwnDeadline) {
  // "slow" takes 500 ms to load: over deadline_ms, under load_deadline_ms.
  ModelControlClient::Options options;
  options.target = fake_.target();
  options.deadline_ms = 50;
  options.load_deadline_ms = 5000;
  auto client = ModelControlClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto loaded = (*client)->LoadModel("slow");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Find(loaded->model(), 1)->state(), rankd::v1::READY);

  CallOptions call;
  call.deadline = absl::Milliseconds(50);
  const absl::Time start = absl::Now();
  auto late = (*client)->LoadModel("slow", {}, call);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
}

TEST_F(ModelControlClientTest, UnreachableTarget) {
  fake_.server->Shutdown();  // nothing listens on its port any more
  auto list = client_->ListModels();
  EXPECT_EQ(list.status().code(), absl::StatusCode::kUnavailable) << list.status();

  ModelControlClient::Options options;
  options.target = fake_.target();
  options.connect_timeout_ms = 200;
  auto client = ModelControlClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr(options.target));
}

TEST_F(ModelControlClientTest, PublicListenerDoesNotServeTheAdminApi) {
  // As in rankd: the Ranking listener has no ModelControl service.
  auto ranking = testing::StartFakeServer();
  ASSERT_TRUE(ranking.ok()) << ranking.status();
  ModelControlClient::Options options;
  options.target = ranking->target();
  auto client = ModelControlClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->ListModels().status().code(), absl::StatusCode::kUnimplemented);
  ranking->server->Shutdown();
}

}  // namespace
}  // namespace rankd::client
