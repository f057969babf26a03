#include "server/lifecycle/model_manager.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/serving/cpu_worker.h"
#include "engine/testing/test_models.h"
#include "engine/updates/host_table_store.h"
#include "gtest/gtest.h"
#include "server/lifecycle/update_message.h"

namespace rankd::server {
namespace {

namespace fs = std::filesystem;

// Loads a small random in-memory model for any directory (seeded by the
// version), with real CPU workers; fails for directories holding a file named
// "broken". Counts loads and remembers how many of its instances were alive at
// each load (for the resource transition; the Recorder reports releases).
class FakeLoader final : public VersionLoader {
 public:
  absl::StatusOr<LoadedVersion> Load(const std::string& name, int64_t version,
                                     const std::string& directory, bool) override {
    absl::MutexLock lock(&mu_);
    ++loads_;
    alive_at_load_.push_back(alive_.load());
    if (fs::exists(directory + "/broken")) {
      return absl::DataLossError(absl::StrCat(directory, "/weights.safetensors: truncated"));
    }
    if (fs::exists(directory + "/too_big")) {
      return absl::ResourceExhaustedError(
          absl::StrCat(directory, ": needs 9.00 GiB of GPU memory, 4.00 GiB free"));
    }
    engine::testing::RandomModelSpec spec;
    spec.seed = static_cast<uint64_t>(version);
    if (dynamic_t1) {
      spec.dynamic_tables = {1};
      spec.id_policy = rankd::v1::ZERO;
    }
    std::shared_ptr<engine::Model> model = engine::testing::MakeRandomModel(spec);
    if (dynamic_t1) engine::testing::MakeTableGrowable(model.get(), 1, 64);
    model->name = name;
    model->version = version;
    auto workers = engine::CreateCpuWorkers(model, 1, 1);
    if (!workers.ok()) return workers.status();
    auto instance = engine::ModelInstance::Create(model, {}, std::move(*workers));
    if (!instance.ok()) return instance.status();
    LoadedVersion out;
    out.instance = std::move(*instance);
    out.host_bytes = 1000 * version;
    if (live_tables) {
      if (share_live_tables && shared_live_ != nullptr) {
        out.live_tables = shared_live_;
      } else {
        out.live_tables = std::make_shared<engine::LiveTables>(
            model, std::vector<std::shared_ptr<engine::TableStore>>{
                       std::make_shared<engine::HostTableStore>(model)});
        shared_live_ = out.live_tables;
      }
    }
    ++alive_;
    return out;
  }
  int loads() {
    absl::MutexLock lock(&mu_);
    return loads_;
  }
  std::vector<int> alive_at_load() {
    absl::MutexLock lock(&mu_);
    return alive_at_load_;
  }
  void Released() { --alive_; }
  bool live_tables = false;  // give versions LiveTables (embedding updates)
  bool dynamic_t1 = false;   // table t1 DYNAMIC (room for 64 keys)
  // Every version gets the first version's LiveTables (as an adopted
  // snapshot shares its source's).
  bool share_live_tables = false;

 private:
  absl::Mutex mu_;
  int loads_ = 0;
  std::vector<int> alive_at_load_;
  std::shared_ptr<engine::LiveTables> shared_live_;
  std::atomic<int> alive_{0};  // loaded and not yet unloaded (via Recorder)
};

class Recorder final : public ModelManager::Listener {
 public:
  void OnVersionUnloaded(const std::string& model, int64_t version) override {
    absl::MutexLock lock(&mu_);
    unloaded.push_back(version);
    if (loader != nullptr) loader->Released();
  }
  void OnLoadFinished(const std::string&, int64_t, bool ok, double) override {
    absl::MutexLock lock(&mu_);
    (ok ? loads_ok : loads_failed)++;
  }
  void OnModelServing(const std::string&, bool s) override {
    absl::MutexLock lock(&mu_);
    serving.push_back(s);
  }
  void OnDynamicTableKeys(const std::string&, const std::string& table, int64_t keys,
                          int64_t max_keys) override {
    absl::MutexLock lock(&mu_);
    dynamic_keys.push_back(absl::StrCat(table, " ", keys, "/", max_keys));
  }
  absl::Mutex mu_;
  FakeLoader* loader = nullptr;
  std::vector<std::string> dynamic_keys;  // "table keys/max_keys" per report
  std::vector<int64_t> unloaded;
  int loads_ok = 0, loads_failed = 0;
  std::vector<bool> serving;
};

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            absl::StrCat("repo_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                         "_", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    recorder_.loader = &loader_;
  }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(root_);
  }
  void Publish(const std::string& model, int64_t version, bool broken = false,
               const char* marker = nullptr) {
    // The publishing protocol: a hidden temporary directory, then a rename.
    const fs::path tmp = root_ / model / absl::StrCat(".", version, ".tmp");
    fs::create_directories(tmp);
    std::ofstream(tmp / "model.pbtxt") << "name: \"" << model << "\"\n";
    if (broken) std::ofstream(tmp / "broken") << "x";
    if (marker != nullptr) std::ofstream(tmp / marker) << "x";
    fs::rename(tmp, root_ / model / absl::StrCat(version));
  }
  void WriteServing(const std::string& model, const std::string& text) {
    // A new name then a rename, so the mtime-and-size fingerprint changes.
    const fs::path tmp = root_ / model / ".serving.tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, root_ / model / "serving.pbtxt");
  }
  ModelManager& Make(ModelManager::Mode mode, ModelManager::Transition transition =
                                                   ModelManager::Transition::kAvailability,
                     std::vector<std::string> load_models = {}) {
    ModelManager::Options o;
    o.model_root = root_.string();
    o.mode = mode;
    o.transition = transition;
    o.load_models = std::move(load_models);
    o.update_log_dir = update_log_dir_;
    auto m = ModelManager::Create(o, &loader_, &recorder_, &clock_);
    EXPECT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
    return *manager_;
  }
  VersionState StateOf(const std::string& model, int64_t version) {
    auto list = manager_->List(model);
    if (!list.ok()) return rankd::v1::VERSION_STATE_UNSPECIFIED;
    for (const auto& v : list->models(0).versions()) {
      if (v.version() == version) return v.state();
    }
    return rankd::v1::VERSION_STATE_UNSPECIFIED;
  }
  int64_t Served(const std::string& model, const std::string& label = "") {
    auto v = manager_->Find(model, 0, label);
    return v.ok() ? (*v)->version() : -1;
  }

  // One update of row 1 of table t0 (every value `sequence`) from producer
  // "p", sent like the UpdateEmbeddings stream sends it.
  absl::Status SendUpdate(const std::string& model, int64_t version, uint64_t sequence) {
    rankd::v1::EmbeddingUpdate msg;
    msg.set_model(model);
    msg.set_version(version);
    msg.set_table("t0");
    msg.add_ids(1);
    for (int i = 0; i < 4; ++i) msg.add_rows(static_cast<float>(sequence));
    msg.set_producer_id("p");
    msg.set_sequence(sequence);
    UpdateFn apply = [msg](ServedVersion& v) {
      return ApplyUpdateMessage(msg, v.name(), v.version(), v.live_tables()).status();
    };
    return manager_->ApplyUpdate(model, version, apply, &msg);
  }
  // The last sequence of producer "p" on table t0 that `version` applied.
  uint64_t PositionOf(const std::string& model, int64_t version) {
    auto v = manager_->Find(model, version, "");
    if (!v.ok() || (*v)->live_tables() == nullptr) return 999;
    for (const engine::ProducerPosition& p : (*v)->live_tables()->Positions()) {
      if (p.producer_id == "p" && p.table == "t0") return p.last_sequence;
    }
    return 0;
  }

  std::string update_log_dir_;  // Make's Options::update_log_dir
  fs::path root_;
  engine::FakeClock clock_;
  FakeLoader loader_;
  Recorder recorder_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, PollSwapsToTheNewVersionAndUnloadsTheOld) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(Served("m"), 1);
  Publish("m", 2);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 2);
  EXPECT_EQ(StateOf("m", 1), rankd::v1::UNLOADED);
  EXPECT_EQ(StateOf("m", 2), rankd::v1::READY);
  EXPECT_EQ(recorder_.unloaded, std::vector<int64_t>{1});
  // The old version's directory goes: it leaves the list.
  fs::remove_all(root_ / "m" / "1");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(StateOf("m", 1), rankd::v1::VERSION_STATE_UNSPECIFIED);
  EXPECT_EQ(loader_.loads(), 2);
}

TEST_F(ModelManagerTest, HiddenDirectoriesAreNotVersions) {
  Publish("m", 1);
  fs::create_directories(root_ / "m" / ".2.tmp");
  fs::create_directories(root_ / ".hidden" / "1");
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  auto list = m.List("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->models_size(), 1);
  EXPECT_EQ(list->models(0).versions_size(), 1);
}

TEST_F(ModelManagerTest, ABrokenVersionFailsOnceAndTheOldKeepsServing) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2, /*broken=*/true);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 1);
  EXPECT_EQ(StateOf("m", 2), rankd::v1::FAILED);
  auto list = m.List("m");
  EXPECT_NE(list->models(0).versions(1).reason().find("truncated"), std::string::npos);
  // Unchanged files: never retried.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(loader_.loads(), 2);
  EXPECT_EQ(recorder_.loads_failed, 1);
  // Fixed files: loaded, and the swap happens.
  fs::remove(root_ / "m" / "2" / "broken");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 2);
  EXPECT_EQ(StateOf("m", 1), rankd::v1::UNLOADED);
}

TEST_F(ModelManagerTest, AVersionThatDoesNotFitNamesWhatIsResident) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2, /*broken=*/false, "too_big");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 1);  // availability: the old one keeps serving
  auto list = m.List("m");
  const std::string& reason = list->models(0).versions(1).reason();
  EXPECT_NE(reason.find("needs 9.00 GiB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("resident versions: m v1 (HBM 0.00 B, host 1000.00 B)"), std::string::npos)
      << reason;
}

TEST_F(ModelManagerTest, AnUnloadWaitsForRequestsHoldingTheVersion) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  auto held = m.Find("m", 0, "");
  ASSERT_TRUE(held.ok());
  Publish("m", 2);
  std::thread poll([&] { EXPECT_TRUE(m.Poll().ok()); });
  // The new version serves while the old one drains behind the holder.
  for (int i = 0; i < 5000 && StateOf("m", 1) != rankd::v1::DRAINING; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(StateOf("m", 1), rankd::v1::DRAINING);
  EXPECT_EQ(Served("m"), 2);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(StateOf("m", 1), rankd::v1::DRAINING);
  // The held version still computes.
  engine::testing::OwnedRequest r =
      engine::testing::MakeRandomRequest((*held)->instance().model(), {});
  std::vector<float> scores(r.num_candidates);
  absl::Notification done;
  engine::QueuedRequest item;
  item.request = r.view();
  item.scores = absl::MakeSpan(scores);
  absl::Status result;
  item.done = [&](absl::Status s, const engine::RequestTiming&) {
    result = s;
    done.Notify();
  };
  ASSERT_TRUE((*held)->instance().Submit(std::move(item)).ok());
  done.WaitForNotification();
  EXPECT_TRUE(result.ok()) << result;
  held->reset();
  poll.join();
  EXPECT_EQ(StateOf("m", 1), rankd::v1::UNLOADED);
}

TEST_F(ModelManagerTest, ResourceTransitionUnloadsBeforeLoading) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll, ModelManager::Transition::kResource);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 2);
  EXPECT_EQ(loader_.alive_at_load(), (std::vector<int>{0, 0}));
}

TEST_F(ModelManagerTest, AvailabilityTransitionLoadsBesideTheOld) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(loader_.alive_at_load(), (std::vector<int>{0, 1}));
}

TEST_F(ModelManagerTest, ResourceTransitionFallsBackWhenTheNewVersionFails) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll, ModelManager::Transition::kResource);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2, /*broken=*/true);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(StateOf("m", 2), rankd::v1::FAILED);
  EXPECT_EQ(Served("m"), 1);  // loaded again
}

TEST_F(ModelManagerTest, PolicyAndLabels) {
  Publish("m", 1);
  Publish("m", 2);
  Publish("m", 3);
  WriteServing("m", "version_policy { specific { versions: [1, 2] } }\n"
                    "version_labels { key: 'stable' value: 1 }\n"
                    "version_labels { key: 'canary' value: 2 }\n");
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(StateOf("m", 3), rankd::v1::UNLOADED);
  EXPECT_EQ(Served("m"), 2);
  EXPECT_EQ(Served("m", "stable"), 1);
  EXPECT_EQ(Served("m", "canary"), 2);
  auto unknown = m.Find("m", 0, "beta");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("stable=1"), std::string::npos);
  EXPECT_EQ(m.Find("m", 0, std::string(100000, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The admin API moves a label; a label on a version that is not ready is refused.
  ASSERT_TRUE(m.SetLabel("m", "stable", 2).ok());
  EXPECT_EQ(Served("m", "stable"), 2);
  EXPECT_EQ(m.SetLabel("m", "stable", 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.SetLabel("m", "bad label", 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A change of the file's label wins over the override; a label change
  // reloads nothing.
  const int loads = loader_.loads();
  WriteServing("m", "version_policy { specific { versions: [1, 2] } }\n"
                    "version_labels { key: 'stable' value: 1 }\n"
                    "version_labels { key: 'canary' value: 1 }\n");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m", "stable"), 2);  // the file did not change stable
  EXPECT_EQ(Served("m", "canary"), 1);
  EXPECT_EQ(loader_.loads(), loads);
}

TEST_F(ModelManagerTest, ABadServingConfigKeepsTheLastGoodPolicy) {
  Publish("m", 1);
  Publish("m", 2);
  WriteServing("m", "version_policy { all {} }\n");
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(StateOf("m", 1), rankd::v1::READY);
  WriteServing("m", "version_policy { latest { num_versions: -1 } }\n");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(StateOf("m", 1), rankd::v1::READY);
  auto list = m.List("m");
  EXPECT_NE(list->models(0).config_error().find("serving.pbtxt"), std::string::npos);
  EXPECT_EQ(list->models(0).policy(), "all");
}

TEST_F(ModelManagerTest, ExplicitModeLoadsOnlyWhatIsAsked) {
  Publish("a", 1);
  Publish("b", 1);
  ModelManager& m = Make(ModelManager::Mode::kExplicit, ModelManager::Transition::kAvailability,
                         {"a"});
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(Served("a"), 1);
  EXPECT_EQ(Served("b"), -1);
  auto loaded = m.Load("b", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Served("b"), 1);
  EXPECT_EQ(m.Load("b", {7}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.Load("zzz", {}).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(m.Unload("b", {}).ok());
  EXPECT_EQ(StateOf("b", 1), rankd::v1::UNLOADED);
  EXPECT_EQ(Served("b"), -1);
  EXPECT_EQ(m.Unload("zzz", {}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, ExplicitModeRejectsAnUnknownStartModel) {
  Publish("a", 1);
  ModelManager& m = Make(ModelManager::Mode::kExplicit, ModelManager::Transition::kAvailability,
                         {"nope"});
  absl::Status s = m.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--load_model"), std::string::npos);
}

TEST_F(ModelManagerTest, NoneModeFailsTheStartOnAnyFailure) {
  Publish("m", 1);
  Publish("m", 2, /*broken=*/true);
  ModelManager& m = Make(ModelManager::Mode::kNone);
  EXPECT_FALSE(m.Start().ok());
}

TEST_F(ModelManagerTest, PollModeStartsWithWhatLoads) {
  Publish("m", 1, /*broken=*/true);
  Publish("ok", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(Served("ok"), 1);
  EXPECT_EQ(m.Find("m", 0, "").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m.Find("x", 0, "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.Find("ok", 9, "").status().code(), absl::StatusCode::kNotFound);
}

// A client's model name or label is quoted cut to 128 bytes, whatever the
// path: unknown model, unknown version, unknown label.
TEST_F(ModelManagerTest, ErrorsQuoteClientNamesCutShort) {
  Publish("ok", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  const std::string huge(8 << 20, 'n');
  for (const absl::Status& s :
       {m.Find(huge, 0, "").status(), m.Find(huge, 3, "").status(),
        m.Find(huge, 0, "beta").status(), m.Find("ok", 0, "x" + std::string(40, 'y')).status()}) {
    EXPECT_FALSE(s.ok());
    EXPECT_LT(s.message().size(), 600u) << s.message().substr(0, 300);
  }
  absl::Status unknown = m.Find(huge, 0, "").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("(8388608 bytes)"), absl::string_view::npos)
      << unknown.message().substr(0, 300);
  EXPECT_NE(unknown.message().find("\"ok\""), absl::string_view::npos);  // what is served
  auto list = m.List(huge);
  ASSERT_FALSE(list.ok());
  EXPECT_LT(list.status().message().size(), 600u);
}

TEST_F(ModelManagerTest, AnOperatorsUnloadHoldsUntilTheFilesChange) {
  Publish("m", 1);
  Publish("m", 2);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  ASSERT_TRUE(m.Unload("m", {2}).ok());
  // latest 1 among what is left: version 1 (a rollback).
  EXPECT_EQ(Served("m"), 1);
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(Served("m"), 1);
  ASSERT_TRUE(m.Load("m", {2}).ok());
  EXPECT_EQ(Served("m"), 2);
}

TEST_F(ModelManagerTest, HealthFollowsReadyVersions) {
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  Publish("m", 2);
  ASSERT_TRUE(m.Poll().ok());
  fs::remove_all(root_ / "m");
  ASSERT_TRUE(m.Poll().ok());
  // Serving from the start through the swap; not serving once nothing is left.
  EXPECT_EQ(recorder_.serving, (std::vector<bool>{true, false}));
}

TEST_F(ModelManagerTest, UpdateLogIsReplayedOntoLoadingVersionsByTarget) {
  loader_.live_tables = true;
  update_log_dir_ = (root_ / "logs").string();
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  ASSERT_TRUE(SendUpdate("m", 0, 1).ok());  // every live version
  ASSERT_TRUE(SendUpdate("m", 1, 2).ok());  // version 1 only
  EXPECT_EQ(PositionOf("m", 1), 2u);
  EXPECT_TRUE(fs::exists(root_ / "logs" / "m.updlog"));
  // A new version replays what was sent to every live version, not what
  // was sent to version 1.
  Publish("m", 2);
  ASSERT_TRUE(m.Poll().ok());
  ASSERT_EQ(Served("m"), 2);
  EXPECT_EQ(PositionOf("m", 2), 1u);
  ASSERT_TRUE(SendUpdate("m", 0, 3).ok());
  EXPECT_EQ(PositionOf("m", 2), 3u);
  // A restart (a new manager over the same directories) replays it all.
  manager_.reset();
  ModelManager& again = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(again.Start().ok());
  EXPECT_EQ(Served("m"), 2);
  EXPECT_EQ(PositionOf("m", 2), 3u);
  // Replayed messages are not logged again.
  const uintmax_t size = fs::file_size(root_ / "logs" / "m.updlog");
  manager_.reset();
  ASSERT_TRUE(Make(ModelManager::Mode::kPoll).Start().ok());
  EXPECT_EQ(PositionOf("m", 2), 3u);
  EXPECT_EQ(fs::file_size(root_ / "logs" / "m.updlog"), size);
}

TEST_F(ModelManagerTest, ReplayReportsDynamicKeyCounts) {
  loader_.live_tables = true;
  loader_.dynamic_t1 = true;
  update_log_dir_ = (root_ / "logs").string();
  Publish("m", 1);
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  // Loaded with the spec's 11 keys.
  EXPECT_EQ(recorder_.dynamic_keys, (std::vector<std::string>{"t1 11/64"}));
  rankd::v1::EmbeddingUpdate msg;
  msg.set_model("m");
  msg.set_table("t1");
  for (int64_t key : {900001, 900002, 900003}) {
    msg.add_ids(key);
    for (int i = 0; i < 4; ++i) msg.add_rows(0.5f);
  }
  UpdateFn apply = [msg](ServedVersion& v) {
    return ApplyUpdateMessage(msg, v.name(), v.version(), v.live_tables()).status();
  };
  ASSERT_TRUE(manager_->ApplyUpdate("m", 0, apply, &msg).ok());
  // A restart replays the three inserts before the version takes traffic.
  manager_.reset();
  recorder_.dynamic_keys.clear();
  ASSERT_TRUE(Make(ModelManager::Mode::kPoll).Start().ok());
  EXPECT_EQ(recorder_.dynamic_keys, (std::vector<std::string>{"t1 14/64"}));
}

// An adopted snapshot is a second version over the same tables (here: two
// loaded versions given one LiveTables): an update of every live version
// reaches those tables once, not once per version.
TEST_F(ModelManagerTest, UpdateOfEveryVersionAppliesOnceToSharedTables) {
  loader_.live_tables = true;
  loader_.share_live_tables = true;
  Publish("m", 1);
  Publish("m", 2);
  ModelManager& m = Make(ModelManager::Mode::kExplicit, ModelManager::Transition::kAvailability,
                         {"m"});
  ASSERT_TRUE(m.Start().ok());
  ASSERT_TRUE(m.Load("m", {1}).ok());
  ASSERT_EQ(StateOf("m", 1), rankd::v1::READY);
  ASSERT_EQ(StateOf("m", 2), rankd::v1::READY);
  std::vector<int64_t> applied_to;
  UpdateFn record = [&applied_to](ServedVersion& v) {
    applied_to.push_back(v.version());
    return absl::OkStatus();
  };
  ASSERT_TRUE(m.ApplyUpdate("m", 0, record).ok());
  EXPECT_EQ(applied_to.size(), 1u);
  applied_to.clear();
  ASSERT_TRUE(m.ApplyUpdate("m", 2, record).ok());  // one named version: as asked
  EXPECT_EQ(applied_to, (std::vector<int64_t>{2}));
}

TEST_F(ModelManagerTest, ADamagedUpdateLogFailsTheLoadNamingTheFile) {
  loader_.live_tables = true;
  update_log_dir_ = (root_ / "logs").string();
  Publish("m", 1);
  ASSERT_TRUE(Make(ModelManager::Mode::kPoll).Start().ok());
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(SendUpdate("m", 0, seq).ok());
  manager_.reset();
  // Flip a byte of the first record's payload: valid records follow it.
  const fs::path log = root_ / "logs" / "m.updlog";
  std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(16 + 24 + 3);
  f.put('\x7f');
  f.close();
  ModelManager& m = Make(ModelManager::Mode::kPoll);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(StateOf("m", 1), rankd::v1::FAILED);
  auto list = m.List("m");
  ASSERT_TRUE(list.ok());
  const std::string reason = list->models(0).versions(0).reason();
  EXPECT_NE(reason.find("m.updlog"), std::string::npos) << reason;
  EXPECT_NE(reason.find("offset 16"), std::string::npos) << reason;
}

TEST_F(ModelManagerTest, BadUpdateLogDirIsRefusedNamingTheFlag) {
  std::ofstream(root_ / "a_file") << "x";
  update_log_dir_ = (root_ / "a_file" / "logs").string();
  ModelManager::Options o;
  o.model_root = root_.string();
  o.update_log_dir = update_log_dir_;
  auto m = ModelManager::Create(o, &loader_, &recorder_, &clock_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("--update_log_dir"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace rankd::server
