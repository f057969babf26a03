#include "engine/updates/live_tables.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/serving/model_instance.h"
#include "engine/serving/worker.h"
#include "engine/testing/test_models.h"
#include "engine/updates/host_table_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/embedding_pool.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<Model> StaticModel(int dim = 4, int64_t rows = 16) {
  testing::RandomModelSpec spec;
  spec.dim = dim;
  spec.table_rows = {rows, rows};
  return testing::MakeRandomModel(spec);
}

std::shared_ptr<LiveTables> Live(const std::shared_ptr<Model>& model) {
  return std::make_shared<LiveTables>(
      model, std::vector<std::shared_ptr<TableStore>>{std::make_shared<HostTableStore>(model)});
}

std::vector<float> Row(const Model& m, int table, int64_t row) {
  const EmbeddingTable& t = m.tables[table];
  std::vector<float> out(t.dim);
  std::memcpy(out.data(), t.rows.data + row * t.row_bytes(), t.row_bytes());
  return out;
}

absl::Span<const uint8_t> Bytes(const std::vector<float>& v) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
}

TEST(LiveTablesTest, AppliesStaticRowsInPlace) {
  auto model = StaticModel();
  auto live = Live(model);
  const std::vector<int64_t> ids = {3, 0};
  const std::vector<float> rows = {1.5f, 2.5f, 3.5f, 4.5f, -1, -2, -3, -4};
  const std::vector<float> untouched = Row(*model, 1, 3);
  TableDelta delta{1, ids, Bytes(rows), {}};
  auto applied = live->Apply(delta, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_FALSE(applied->duplicate);
  EXPECT_EQ(applied->result.rows_applied, 2);
  EXPECT_EQ(Row(*model, 1, 3), std::vector<float>({1.5f, 2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(Row(*model, 1, 0), std::vector<float>({-1, -2, -3, -4}));
  EXPECT_NE(Row(*model, 0, 3), std::vector<float>({1.5f, 2.5f, 3.5f, 4.5f}));
  (void)untouched;
}

TEST(LiveTablesTest, RepeatedSequenceIsAppliedOnce) {
  auto model = StaticModel();
  auto live = Live(model);
  const std::vector<int64_t> ids = {5};
  std::vector<float> first = {1, 1, 1, 1};
  std::vector<float> retry = {9, 9, 9, 9};
  ASSERT_TRUE(live->Apply({0, ids, Bytes(first), {}}, {"trainer", 7, 1000}).ok());
  // A retry of sequence 7 with other bytes is skipped: the first one stays.
  auto again = live->Apply({0, ids, Bytes(retry), {}}, {"trainer", 7, 1000});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(Row(*model, 0, 5), first);
  // Older sequences too; another producer or table is independent.
  EXPECT_TRUE(live->Apply({0, ids, Bytes(retry), {}}, {"trainer", 3, 0})->duplicate);
  EXPECT_FALSE(live->Apply({1, ids, Bytes(retry), {}}, {"trainer", 3, 0})->duplicate);
  EXPECT_FALSE(live->Apply({0, ids, Bytes(retry), {}}, {"other", 1, 0})->duplicate);
  EXPECT_EQ(Row(*model, 0, 5), retry);
  const auto positions = live->Positions();
  ASSERT_EQ(positions.size(), 3u);
  bool found = false;
  for (const ProducerPosition& p : positions) {
    if (p.producer_id == "trainer" && p.table == model->tables[0].name) {
      EXPECT_EQ(p.last_sequence, 7u);
      EXPECT_EQ(p.last_timestamp_unix_us, 1000);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Sequence 0: no de-duplication, always applied.
  EXPECT_FALSE(live->Apply({0, ids, Bytes(first), {}}, {"trainer", 0, 0})->duplicate);
  EXPECT_EQ(Row(*model, 0, 5), first);
}

TEST(LiveTablesTest, BadDeltasChangeNothingAndNameThePosition) {
  auto model = StaticModel();
  auto live = Live(model);
  const std::vector<float> before = Row(*model, 0, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::vector<int64_t> ids;
    std::vector<float> rows;
    std::vector<int64_t> deletes;
    const char* error;
  };
  const std::vector<Case> cases = {
      {{1, 16}, {7, 7, 7, 7, 7, 7, 7, 7}, {}, "ids[1] = 16 is out of range [0, 16)"},
      {{1, -1}, {7, 7, 7, 7, 7, 7, 7, 7}, {}, "ids[1] = -1 is out of range"},
      {{1, 1}, {7, 7, 7, 7, 7, 7, 7, 7}, {}, "ids[1] = 1 repeats"},
      {{1}, {7, 7, 7}, {}, "12 bytes for 1 ids of 16 bytes"},
      {{1, 2}, {7, 7, 7, 7, 7, nan, 7, 7}, {}, "ids[1] element 1 is nan"},
      {{1}, {7, 7, 7, std::numeric_limits<float>::infinity()}, {}, "element 3 is inf"},
      {{1}, {7, 7, 7, 7}, {4}, "delete_keys: the table is STATIC"},
  };
  for (const Case& c : cases) {
    auto s = live->Apply({0, c.ids, Bytes(c.rows), c.deletes}, {});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.error;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(model->tables[0].name));
    EXPECT_EQ(Row(*model, 0, 1), before) << c.error;
  }
  auto no_producer = live->Apply({0, {}, {}, {}}, {"", 4, 0});
  EXPECT_EQ(no_producer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LiveTablesTest, HalfTypesRefuseNanAndInf) {
  for (kernels::RowType type : {kernels::RowType::kFp16, kernels::RowType::kBf16}) {
    testing::RandomModelSpec spec;
    spec.dim = 4;
    spec.table_rows = {8};
    spec.row_type = type;
    auto model = testing::MakeRandomModel(spec);
    auto live = Live(model);
    const std::vector<int64_t> ids = {2, 3};
    const uint16_t one = type == kernels::RowType::kFp16 ? 0x3C00 : 0x3F80;
    const uint16_t inf = type == kernels::RowType::kFp16 ? 0x7C00 : 0x7F80;
    std::vector<uint16_t> raw(8, one);
    ASSERT_TRUE(live->Apply({0, ids, absl::MakeConstSpan(
                                          reinterpret_cast<const uint8_t*>(raw.data()), 16), {}},
                            {})
                    .ok());
    for (uint16_t bad : {inf, static_cast<uint16_t>(inf | 1), static_cast<uint16_t>(inf | 0x8000)}) {
      raw[6] = bad;
      auto s = live->Apply(
          {0, ids, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(raw.data()), 16), {}}, {});
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(s.status().message()), HasSubstr("ids[1] element 2 is"));
    }
  }
}

TEST(LiveTablesTest, ClosedVersionRefusesUpdates) {
  auto model = StaticModel();
  auto live = Live(model);
  live->Close();
  const std::vector<int64_t> ids = {1};
  const std::vector<float> rows = {1, 2, 3, 4};
  auto s = live->Apply({0, ids, Bytes(rows), {}}, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("being unloaded"));
}

// A model whose table 0 is DYNAMIC with `keys` keys and room for `max_keys`.
std::shared_ptr<Model> DynamicModel(int64_t keys, int64_t max_keys, rankd::v1::Eviction eviction) {
  testing::RandomModelSpec spec;
  spec.dim = 4;
  spec.table_rows = {keys, 5};
  spec.dynamic_tables = {0};
  spec.id_policy = rankd::v1::ZERO;
  auto model = testing::MakeRandomModel(spec);
  testing::MakeTableGrowable(model.get(), 0, max_keys, eviction);
  return model;
}

std::vector<int64_t> LoadedKeys(const Model& m) {
  const EmbeddingTable& t = m.tables[0];
  const int64_t* k = reinterpret_cast<const int64_t*>(t.keys.data);
  return std::vector<int64_t>(k, k + t.num_rows);
}

bool Stored(const Model& m, int64_t key) {
  return kernels::HashLookup(m.tables[0].hash.view(), key) != kernels::kMissingRow;
}

// Scores one request per key, in order, through the real CPU engine: each
// batch stamps the next logical time on the keys it looks up.
void TouchInOrder(const std::shared_ptr<Model>& model, const std::vector<int64_t>& keys) {
  auto engine = CpuEngine::Create(model, {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (int64_t key : keys) {
    testing::RandomRequestSpec spec;
    spec.num_candidates = 1;
    testing::OwnedRequest r = testing::MakeRandomRequest(*model, spec);
    r.ids[0] = {key};
    r.lengths[0] = {1};
    const Request view = r.view();
    const Request* requests[] = {&view};
    float score = 0;
    absl::Span<float> out(&score, 1);
    ASSERT_TRUE((*engine)->ScoreBatch(requests, absl::MakeConstSpan(&out, 1), nullptr).ok());
  }
}

std::vector<float> Filled(int64_t n, float v) { return std::vector<float>(n * 4, v); }

TEST(LiveTablesDynamicTest, LruEvictsExactlyTheLeastRecentlyUsed) {
  constexpr int64_t kCapacity = 8;
  auto model = DynamicModel(kCapacity, kCapacity, rankd::v1::LRU);
  auto live = Live(model);
  std::vector<int64_t> keys = LoadedKeys(*model);
  // Used in this order: keys[5], keys[2], keys[7], then the rest.
  std::vector<int64_t> order = {keys[5], keys[2], keys[7], keys[0], keys[1],
                                keys[3], keys[4], keys[6]};
  TouchInOrder(model, order);
  const std::vector<int64_t> fresh = {111, 222, 333};
  const std::vector<float> rows = Filled(3, 0.5f);
  auto applied = live->Apply({0, fresh, Bytes(rows), {}}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->result.keys_inserted, 3);
  EXPECT_EQ(applied->result.keys_evicted, 3);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Stored(*model, order[i]), i >= 3) << i;
  for (int64_t k : fresh) EXPECT_TRUE(Stored(*model, k));
  const auto stats = live->DynamicTables();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].keys, kCapacity);
  EXPECT_EQ(stats[0].evictions, 3);
}

TEST(LiveTablesDynamicTest, LfuEvictsTheLeastFrequentlyUsed) {
  auto model = DynamicModel(4, 4, rankd::v1::LFU);
  auto live = Live(model);
  std::vector<int64_t> keys = LoadedKeys(*model);
  // Use counts: keys[0] 3, keys[1] 1, keys[2] 4, keys[3] 2.
  TouchInOrder(model, {keys[0], keys[0], keys[0], keys[1], keys[2], keys[2], keys[2], keys[2],
                       keys[3], keys[3]});
  const std::vector<int64_t> fresh = {42, 43};
  const std::vector<float> rows = Filled(2, 1.0f);
  auto applied = live->Apply({0, fresh, Bytes(rows), {}}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->result.keys_evicted, 2);
  EXPECT_FALSE(Stored(*model, keys[1]));
  EXPECT_FALSE(Stored(*model, keys[3]));
  EXPECT_TRUE(Stored(*model, keys[0]));
  EXPECT_TRUE(Stored(*model, keys[2]));
}

TEST(LiveTablesDynamicTest, InsertsUpdatesDeletesAndReadsBack) {
  auto model = DynamicModel(6, 10, rankd::v1::LRU);
  auto live = Live(model);
  std::vector<int64_t> keys = LoadedKeys(*model);
  const std::vector<int64_t> ids = {keys[0], 1000, 2000};
  std::vector<float> rows = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
  const std::vector<int64_t> deletes = {keys[4], 999};
  auto applied = live->Apply({0, ids, Bytes(rows), deletes}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->result.keys_updated, 1);
  EXPECT_EQ(applied->result.keys_inserted, 2);
  EXPECT_EQ(applied->result.keys_deleted, 1);
  EXPECT_EQ(applied->result.keys_not_found, 1);
  EXPECT_EQ(applied->result.rows_applied, 3);
  EXPECT_EQ(applied->result.keys_evicted, 0);
  EXPECT_FALSE(Stored(*model, keys[4]));
  // The store reads back exactly the stored keys with their rows.
  std::map<int64_t, std::vector<float>> read;
  ASSERT_TRUE(live->primary_store()
                  .ReadTable(0,
                             [&](absl::Span<const int64_t> k, absl::Span<const uint8_t> r) {
                               for (size_t i = 0; i < k.size(); ++i) {
                                 std::vector<float> row(4);
                                 std::memcpy(row.data(), r.data() + 16 * i, 16);
                                 read[k[i]] = row;
                               }
                               return absl::OkStatus();
                             })
                  .ok());
  EXPECT_EQ(read.size(), 7u);  // 6 - 1 deleted + 2 new
  EXPECT_EQ(read[keys[0]], std::vector<float>({1, 1, 1, 1}));
  EXPECT_EQ(read[1000], std::vector<float>({2, 2, 2, 2}));
  EXPECT_EQ(read[2000], std::vector<float>({3, 3, 3, 3}));
  EXPECT_EQ(read.count(keys[4]), 0u);
  EXPECT_EQ(live->DynamicTables()[0].keys, 7);
  // Sentinels, and a key both written and deleted, are refused.
  const std::vector<int64_t> sentinel = {kernels::kDeletedKey};
  EXPECT_THAT(std::string(live->Apply({0, sentinel, Bytes(Filled(1, 1)), {}}, {})
                              .status()
                              .message()),
              HasSubstr("reserved key"));
  const std::vector<int64_t> both = {77};
  EXPECT_THAT(
      std::string(live->Apply({0, both, Bytes(Filled(1, 1)), both}, {}).status().message()),
      HasSubstr("also in ids"));
}

// A store that records the three steps of each update. Prepare and Wait
// take the version's gate shared on the calling thread: they hang (the
// test times out) if Apply held it exclusively around them.
class RecordingStore final : public TableStore {
 public:
  RecordingStore(std::vector<std::string>* log, std::string name, LiveTables** live,
                 bool fail_commit = false)
      : log_(log), name_(std::move(name)), live_(live), fail_commit_(fail_commit) {}
  absl::Status Apply(const TableDelta&, uint64_t, DeltaResult*) override {
    return absl::InternalError("Apply is not the update path");
  }
  absl::StatusOr<std::unique_ptr<Update>> Prepare(const TableDelta& delta) override {
    LiveTables::BatchScope batch(*live_);
    log_->push_back(name_ + " prepare");
    return std::make_unique<Steps>(this, static_cast<int64_t>(delta.ids.size()));
  }
  absl::Status ReadTable(int, const TableSink&) const override { return absl::OkStatus(); }

 private:
  class Steps final : public Update {
   public:
    Steps(RecordingStore* store, int64_t rows) : store_(store), rows_(rows) {}
    absl::Status Commit(uint64_t now) override {
      store_->log_->push_back(store_->name_ + " commit " + std::to_string(now));
      if (store_->fail_commit_) return absl::InternalError("device lost");
      return absl::OkStatus();
    }
    absl::Status Wait(DeltaResult* result) override {
      LiveTables::BatchScope batch(*store_->live_);
      store_->log_->push_back(store_->name_ + " wait");
      result->rows_applied += rows_;
      return absl::OkStatus();
    }

   private:
    RecordingStore* const store_;
    const int64_t rows_;
  };
  std::vector<std::string>* const log_;
  const std::string name_;
  LiveTables** const live_;
  const bool fail_commit_;
};

// Applies one new row to table 0 of `live` on another thread while the
// request-validation scope of `live` is held; returns whether the Apply
// finished while the scope was still held (within `wait`).
bool ApplyFinishesUnderValidationScope(LiveTables* live, absl::Duration wait) {
  const std::vector<int64_t> ids = {4242};
  const std::vector<float> rows = Filled(1, 1.0f);
  absl::Notification applied;
  std::thread writer;
  bool finished_under_scope = false;
  {
    auto scope = LiveTables::ValidationScope(live);
    writer = std::thread([&] {
      auto result = live->Apply({0, ids, Bytes(rows), {}}, {});
      EXPECT_TRUE(result.ok()) << result.status();
      applied.Notify();
    });
    finished_under_scope = applied.WaitForNotificationWithTimeout(wait);
  }
  writer.join();
  return finished_under_scope;
}

TEST(LiveTablesTest, ValidationScopeHoldsTheGateOnlyWhenValidationReadsTables) {
  // A DYNAMIC table refusing unknown keys: validation looks keys up, so an
  // update must wait until the request's validation is done.
  auto reading = DynamicModel(8, 16, rankd::v1::LRU);
  reading->tables[0].id_policy = rankd::v1::ERROR;
  auto reading_live = Live(reading);
  ASSERT_TRUE(reading_live->validation_reads_tables());
  EXPECT_FALSE(ApplyFinishesUnderValidationScope(reading_live.get(), absl::Milliseconds(200)));
  EXPECT_TRUE(Stored(*reading, 4242));  // applied once the scope ended

  // Unknown keys pool the default vector: validation reads no table, and
  // updates go on while requests are validated.
  auto zero = DynamicModel(8, 16, rankd::v1::LRU);
  auto zero_live = Live(zero);
  ASSERT_FALSE(zero_live->validation_reads_tables());
  EXPECT_TRUE(ApplyFinishesUnderValidationScope(zero_live.get(), absl::Seconds(60)));

  // A version without live tables: no gate to take.
  auto none = LiveTables::ValidationScope(nullptr);
}

TEST(LiveTablesTest, StagesAndWaitsOutsideTheGateCommitsInStoreOrder) {
  auto model = StaticModel();
  std::vector<std::string> log;
  LiveTables* self = nullptr;
  LiveTables live(model, {std::make_shared<RecordingStore>(&log, "a", &self),
                          std::make_shared<RecordingStore>(&log, "b", &self)});
  self = &live;
  const std::vector<int64_t> ids = {1, 2};
  const std::vector<float> rows(2 * model->tables[0].dim, 0.5f);
  const uint64_t before = model->score_clock->load();
  auto applied = live.Apply({0, ids, Bytes(rows), {}}, {"p", 1, 0});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->result.rows_applied, 2);  // the first store's figures
  const std::string now = std::to_string(before + 1);
  EXPECT_EQ(log, (std::vector<std::string>{"a prepare", "b prepare", "a commit " + now,
                                           "b commit " + now, "a wait", "b wait"}));
  ASSERT_EQ(live.Positions().size(), 1u);
  EXPECT_EQ(live.Positions()[0].last_sequence, 1u);
}

TEST(LiveTablesTest, FailedCommitWaitsForTheCommittedAndKeepsThePosition) {
  auto model = StaticModel();
  std::vector<std::string> log;
  LiveTables* self = nullptr;
  LiveTables live(model, {std::make_shared<RecordingStore>(&log, "a", &self),
                          std::make_shared<RecordingStore>(&log, "b", &self, true),
                          std::make_shared<RecordingStore>(&log, "c", &self)});
  self = &live;
  const std::vector<int64_t> ids = {1};
  const std::vector<float> rows(model->tables[0].dim, 0.5f);
  auto applied = live.Apply({0, ids, Bytes(rows), {}}, {"p", 1, 0});
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(applied.status().message()), HasSubstr("device lost"));
  EXPECT_THAT(std::string(applied.status().message()), HasSubstr("table "));
  // "c" is never committed; "a" and "b" (its commit failed) are waited on.
  EXPECT_EQ(log.size(), 7u);
  EXPECT_EQ(log.back(), "b wait");
  EXPECT_TRUE(live.Positions().empty());
}

// A worker that applies an update from inside Execute: possible only when
// the ModelInstance does not hold the version's gate around Execute, which
// is what a worker that attaches the live tables asks for.
class UpdatingWorker final : public Worker {
 public:
  UpdatingWorker(LiveTables* live, bool attach) : live_(live), attach_(attach) {}
  absl::string_view name() const override { return "updating"; }
  bool AttachLiveTables(LiveTables* live) override {
    attached_ = live;
    return attach_;
  }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores, BatchStats*) override {
    if (attached_ != live_) return absl::InternalError("live tables not attached");
    const std::vector<int64_t> ids = {0};
    const std::vector<float> rows(live_->model().tables[0].dim, 7.0f);
    auto applied = live_->Apply({0, ids, Bytes(rows), {}}, {});
    if (!applied.ok()) return applied.status();
    for (size_t r = 0; r < requests.size(); ++r) scores[r][0] = 1.0f;
    return absl::OkStatus();
  }

 private:
  LiveTables* const live_;
  const bool attach_;
  LiveTables* attached_ = nullptr;
};

TEST(LiveTablesTest, AttachedWorkerRunsWithoutTheInstanceHoldingTheGate) {
  auto model = StaticModel();
  auto live = Live(model);
  ModelInstance::Options options;
  options.live_tables = live;
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::make_unique<UpdatingWorker>(live.get(), /*attach=*/true));
  auto instance = ModelInstance::Create(model, options, std::move(workers));
  ASSERT_TRUE(instance.ok()) << instance.status();
  const testing::OwnedRequest owned = testing::MakeRandomRequest(*model, {});
  std::vector<float> scores(owned.view().num_candidates, 0.0f);
  absl::Notification done;
  absl::Status result;
  QueuedRequest q;
  q.request = owned.view();
  q.scores = absl::MakeSpan(scores);
  q.done = [&](absl::Status s, const RequestTiming&) {
    result = s;
    done.Notify();
  };
  ASSERT_TRUE((*instance)->Submit(std::move(q)).ok());
  done.WaitForNotification();
  (*instance)->Shutdown();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(Row(*model, 0, 0), std::vector<float>(model->tables[0].dim, 7.0f));
}

// A worker that pools one table's rows (the real CPU pooling kernel over the
// model's memory) and reports, per request, whether every value of every
// row it read carried the same update number: scores[0] = that number, or
// -1 when the batch saw a torn row or rows of different messages.
class PooledValueWorker final : public Worker {
 public:
  explicit PooledValueWorker(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  absl::string_view name() const override { return "pooled"; }
  absl::Status Execute(absl::Span<const Request* const> requests,
                       absl::Span<const absl::Span<float>> scores, BatchStats*) override {
    const EmbeddingTable& t = model_->tables[0];
    const kernels::PoolTable view = t.pool_view(nullptr);
    std::vector<float> pooled(t.dim);
    std::vector<int64_t> offsets = {0, 1};
    float seen = -2;
    bool consistent = true;
    for (int64_t row = 0; row < t.num_rows; ++row) {
      kernels::PoolBags bags{&row, offsets.data(), nullptr, 1};
      kernels::PoolEmbeddings(view, bags, pooled.data(), t.dim);
      for (float v : pooled) {
        if (seen == -2) seen = v;
        consistent = consistent && v == seen;
      }
    }
    for (size_t r = 0; r < requests.size(); ++r) scores[r][0] = consistent ? seen : -1;
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<const Model> model_;
};

// Scoring threads and an updating thread at once: every message writes all
// rows of the table with its own number; every batch must see one number
// for all of them (no torn row, no half-applied message), never older than
// a number acknowledged before the request was submitted.
TEST(LiveTablesTest, NoTornRowsUnderConcurrentScoring) {
  auto model = StaticModel(/*dim=*/64, /*rows=*/64);
  const EmbeddingTable& t = model->tables[0];
  {
    std::vector<float> zeros(t.num_rows * t.dim, 0.0f);
    std::memcpy(const_cast<uint8_t*>(t.rows.data), zeros.data(), zeros.size() * 4);
  }
  auto live = Live(model);
  ModelInstance::Options options;
  options.batching.max_batch_candidates = 8;
  options.batching.max_queue_delay_us = 50;
  options.live_tables = live;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<PooledValueWorker>(model));
  auto instance = ModelInstance::Create(model, options, std::move(workers));
  ASSERT_TRUE(instance.ok()) << instance.status();

  std::atomic<int64_t> acknowledged{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> torn{0}, stale{0}, batches{0};
  std::thread updater([&] {
    std::vector<int64_t> ids(t.num_rows);
    for (int64_t i = 0; i < t.num_rows; ++i) ids[i] = i;
    std::vector<float> rows(t.num_rows * t.dim);
    for (int64_t v = 1; !stop.load(); ++v) {
      std::fill(rows.begin(), rows.end(), static_cast<float>(v));
      ASSERT_TRUE(live->Apply({0, ids, Bytes(rows), {}}, {"stress", static_cast<uint64_t>(v), 0})
                      .ok());
      acknowledged.store(v);
    }
  });
  testing::RandomRequestSpec spec;
  spec.num_candidates = 1;
  std::vector<std::thread> scorers;
  for (int s = 0; s < 3; ++s) {
    scorers.emplace_back([&, s] {
      testing::RandomRequestSpec mine = spec;
      mine.seed = 10 + s;
      const testing::OwnedRequest owned = testing::MakeRandomRequest(*model, mine);
      while (!stop.load()) {
        const int64_t floor = acknowledged.load();
        float score = -3;
        absl::Notification done;
        QueuedRequest q;
        q.request = owned.view();
        q.scores = absl::MakeSpan(&score, 1);
        q.done = [&done](absl::Status, const RequestTiming&) { done.Notify(); };
        if (!(*instance)->Submit(std::move(q)).ok()) continue;
        done.WaitForNotification();
        ++batches;
        if (score < 0) ++torn;
        if (score >= 0 && score < floor) ++stale;
      }
    });
  }
  const char* env = std::getenv("RANKD_STRESS_SECONDS");
  absl::SleepFor(absl::Seconds(env != nullptr ? std::atof(env) : 20.0));
  stop.store(true);
  updater.join();
  for (std::thread& s : scorers) s.join();
  (*instance)->Shutdown();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(stale.load(), 0);
  EXPECT_GT(batches.load(), 100);
  EXPECT_GT(acknowledged.load(), 100);
}

}  // namespace
}  // namespace rankd::engine
