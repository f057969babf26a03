// Splitting deltas into messages, sequence numbers, resuming from
// ListModels, UpdateEmbeddings against the fake (de-duplication, retries,
// errors), SaveSnapshot and the replica fan-out.
#include "client/embedding_update.h"

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/model_control_client.h"
#include "client/replicas.h"
#include "client/testing/fake_model_control_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using rankd::v1::EmbeddingUpdate;

// n rows of dim fp32 values, row i = {i, i + 0.5, ...}.
TableDelta F32Delta(const std::string& table, std::vector<int64_t> ids, int64_t dim) {
  TableDelta d;
  d.table = table;
  d.dim = dim;
  d.dtype = RowDtype::kF32;
  std::vector<float> values;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) values.push_back(static_cast<float>(i) + 0.5f * j);
  }
  d.row_bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  d.ids = std::move(ids);
  return d;
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

SplitOptions Split(uint64_t start = 1) {
  SplitOptions o;
  o.model = "mini";
  o.producer_id = "trainer-0";
  o.start_sequence = start;
  o.timestamp_unix_us = 1234;
  return o;
}

TEST(SplitTableDeltaTest, RowsPerMessageAndConsecutiveSequences) {
  SplitOptions options = Split(7);
  options.rows_per_message = 4;
  auto messages = SplitTableDelta(F32Delta("t_user", Range(0, 10), 3), options);
  ASSERT_TRUE(messages.ok()) << messages.status();
  ASSERT_THAT(*messages, SizeIs(3));
  std::vector<int64_t> ids;
  for (size_t i = 0; i < messages->size(); ++i) {
    const EmbeddingUpdate& m = (*messages)[i];
    EXPECT_EQ(m.sequence(), 7 + i);
    EXPECT_EQ(m.producer_id(), "trainer-0");
    EXPECT_EQ(m.model(), "mini");
    EXPECT_EQ(m.table(), "t_user");
    EXPECT_EQ(m.timestamp_unix_us(), 1234);
    EXPECT_EQ(m.rows_size(), m.ids_size() * 3);
    EXPECT_TRUE(m.raw_rows().empty());
    ids.insert(ids.end(), m.ids().begin(), m.ids().end());
  }
  EXPECT_EQ(ids, Range(0, 10));
  EXPECT_EQ((*messages)[2].ids_size(), 2);
  // Row 9's values arrive with id 9.
  EXPECT_EQ((*messages)[2].rows(3), 9.0f);
  EXPECT_EQ((*messages)[2].rows(5), 10.0f);
}

TEST(SplitTableDeltaTest, PayloadLimitAndNowTimestamp) {
  SplitOptions options = Split();
  options.timestamp_unix_us = 0;
  options.max_payload_bytes = 1000;  // (16 * 4 + 8) = 72 bytes per row: 13 rows
  auto messages = SplitTableDelta(F32Delta("t_user", Range(0, 30), 16), options);
  ASSERT_TRUE(messages.ok()) << messages.status();
  ASSERT_THAT(*messages, SizeIs(3));
  EXPECT_EQ((*messages)[0].ids_size(), 13);
  EXPECT_EQ((*messages)[2].ids_size(), 4);
  EXPECT_GT((*messages)[0].timestamp_unix_us(), 1600000000LL * 1000000);
  // The default limits keep a message under gRPC's 4 MiB.
  SplitOptions defaults = Split();
  // 256 x 4 + 8 bytes per row: 3 MiB holds 3048 rows, fewer than 4096.
  auto big = SplitTableDelta(F32Delta("t_user", Range(0, 20000), 256), defaults);
  ASSERT_TRUE(big.ok());
  for (const EmbeddingUpdate& m : *big) EXPECT_LT(m.ByteSizeLong(), 4u << 20);
  EXPECT_EQ((*big)[0].ids_size(), 3048);
  EXPECT_EQ(big->size(), 7u);
}

TEST(SplitTableDeltaTest, DeletesGoFirstAndRawRowsForHalfTypes) {
  TableDelta d;
  d.table = "t_item";
  d.dim = 2;
  d.dtype = RowDtype::kBF16;
  d.ids = {100, 101, 102};
  d.row_bytes = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12);
  d.delete_keys = Range(1, 21);  // 20 keys
  SplitOptions options = Split();
  options.max_payload_bytes = 100;  // 12 delete keys per message
  auto messages = SplitTableDelta(d, options);
  ASSERT_TRUE(messages.ok()) << messages.status();
  ASSERT_THAT(*messages, SizeIs(2));
  EXPECT_EQ((*messages)[0].delete_keys_size(), 12);
  EXPECT_EQ((*messages)[0].ids_size(), 0);
  EXPECT_EQ((*messages)[1].delete_keys_size(), 8);
  // 100 - 64 = 36 bytes left; 12 bytes per row (4 + 8): all 3 rows.
  EXPECT_THAT((*messages)[1].ids(), ElementsAre(100, 101, 102));
  EXPECT_EQ((*messages)[1].raw_rows(), d.row_bytes);
  EXPECT_EQ((*messages)[1].rows_size(), 0);
}

TEST(SplitTableDeltaTest, HugeRowGoesAlone) {
  SplitOptions options = Split();
  options.max_payload_bytes = 64;
  auto messages = SplitTableDelta(F32Delta("t", {5, 6}, 100), options);
  ASSERT_TRUE(messages.ok());
  ASSERT_THAT(*messages, SizeIs(2));
  EXPECT_THAT((*messages)[1].ids(), ElementsAre(6));
}

TEST(SplitTableDeltaTest, SequenceZeroAndEmptyDelta) {
  auto zero = SplitTableDelta(F32Delta("t", Range(0, 3), 1), [] {
    SplitOptions o = Split(0);
    o.rows_per_message = 1;
    o.producer_id = "";
    return o;
  }());
  ASSERT_TRUE(zero.ok()) << zero.status();
  for (const EmbeddingUpdate& m : *zero) EXPECT_EQ(m.sequence(), 0u);
  TableDelta empty;
  empty.table = "t";
  auto none = SplitTableDelta(empty, Split());
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, SizeIs(0));
}

TEST(SplitTableDeltaTest, RejectsBadDeltasNamingTheProblem) {
  TableDelta dup = F32Delta("t_item", {1, 2, 1}, 2);
  EXPECT_THAT(SplitTableDelta(dup, Split()).status().message(), HasSubstr("id 1 appears twice"));
  TableDelta both = F32Delta("t_item", {1, 2}, 2);
  both.delete_keys = {2};
  EXPECT_THAT(SplitTableDelta(both, Split()).status().message(),
              HasSubstr("key 2 is both deleted and written"));
  TableDelta short_rows = F32Delta("t_item", {1, 2}, 2);
  short_rows.row_bytes.pop_back();
  EXPECT_THAT(SplitTableDelta(short_rows, Split()).status().message(),
              HasSubstr("rows hold 15 bytes, want 2 ids x 2 x 4"));
  SplitOptions no_producer = Split();
  no_producer.producer_id = "";
  EXPECT_THAT(SplitTableDelta(F32Delta("t", {1}, 1), no_producer).status().message(),
              HasSubstr("producer_id"));
  SplitOptions zero_rows = Split();
  zero_rows.rows_per_message = 0;
  EXPECT_THAT(SplitTableDelta(F32Delta("t", {1}, 1), zero_rows).status().message(),
              HasSubstr("rows_per_message"));
}

TEST(LastSequencesTest, MaxOverTargetedVersionsOfThisProducer) {
  rankd::v1::ModelStatus model;
  auto add = [&](int64_t version, rankd::v1::VersionState state) {
    auto* v = model.add_versions();
    v->set_version(version);
    v->set_state(state);
    return v;
  };
  auto position = [](rankd::v1::VersionStatus* v, const std::string& producer,
                     const std::string& table, uint64_t seq) {
    auto* p = v->add_update_positions();
    p->set_producer_id(producer);
    p->set_table(table);
    p->set_last_sequence(seq);
  };
  auto* v1 = add(1, rankd::v1::READY);
  auto* v2 = add(2, rankd::v1::READY);
  auto* v3 = add(3, rankd::v1::UNLOADED);
  position(v1, "p", "a", 10);
  position(v2, "p", "a", 12);
  position(v2, "p", "b", 3);
  position(v2, "other", "c", 99);
  position(v3, "p", "a", 50);  // not live: not targeted by version 0
  auto all = LastSequences(model, 0, "p");
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all["a"], 12u);
  EXPECT_EQ(all["b"], 3u);
  auto one = LastSequences(model, 1, "p");
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(one["a"], 10u);
  EXPECT_EQ(LastSequences(model, 3, "p")["a"], 50u);
  EXPECT_TRUE(LastSequences(model, 0, "nobody").empty());
}

TEST(DefaultProducerIdTest, PrefixAtHost) {
  const std::string id = DefaultProducerId("rankctl");
  EXPECT_EQ(id.rfind("rankctl@", 0), 0u);
  EXPECT_GT(id.size(), std::strlen("rankctl@"));
}

// --- against the fake ModelControl ----------------------------------------------

class UpdateEmbeddingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = testing::StartFakeAdminServer();
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    options_.target = fake_.target();
    options_.retry_backoff_ms = 1;
    auto client = ModelControlClient::Create(options_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override { fake_.server->Shutdown(); }

  std::vector<EmbeddingUpdate> Messages(const TableDelta& delta, uint64_t start,
                                        int64_t rows_per_message = 2) {
    SplitOptions options = Split(start);
    options.rows_per_message = rows_per_message;
    auto messages = SplitTableDelta(delta, options);
    EXPECT_TRUE(messages.ok()) << messages.status();
    return messages.ok() ? *messages : std::vector<EmbeddingUpdate>{};
  }

  const rankd::v1::TableUpdateSummary* Find(const rankd::v1::UpdateSummary& s, int64_t version,
                                            const std::string& table) {
    for (const auto& t : s.tables()) {
      if (t.version() == version && t.table() == table) return &t;
    }
    return nullptr;
  }

  testing::FakeAdminServer fake_;
  ModelControlClient::Options options_;
  std::unique_ptr<ModelControlClient> client_;
};

TEST_F(UpdateEmbeddingsTest, StreamsInOrderAndResumesFromListModels) {
  auto messages = Messages(F32Delta("t_user", Range(0, 5), 4), 1);
  ASSERT_THAT(messages, SizeIs(3));
  rankd::v1::UpdateSummary summary;
  int attempts = 0;
  ASSERT_TRUE(client_->UpdateEmbeddings(messages, &summary, {}, &attempts).ok());
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(summary.messages(), 3);
  const auto* v2 = Find(summary, 2, "t_user");
  ASSERT_NE(v2, nullptr);  // version 0: both READY versions
  EXPECT_EQ(v2->messages(), 3);
  EXPECT_EQ(v2->rows_applied(), 5);
  ASSERT_NE(Find(summary, 1, "t_user"), nullptr);
  std::vector<uint64_t> sequences;
  for (const auto& m : fake_.service->received_updates()) sequences.push_back(m.sequence());
  EXPECT_THAT(sequences, ElementsAre(1, 2, 3));

  auto list = client_->ListModels("mini");
  ASSERT_TRUE(list.ok());
  auto last = LastSequences(list->models(0), 0, "trainer-0");
  EXPECT_EQ(last["t_user"], 3u);
  // Sending the same again: every message is a duplicate.
  ASSERT_TRUE(client_->UpdateEmbeddings(messages, &summary).ok());
  EXPECT_EQ(Find(summary, 2, "t_user")->duplicates(), 3);
  EXPECT_EQ(Find(summary, 2, "t_user")->messages(), 0);
  EXPECT_EQ(fake_.service->applied("mini", 2), 3);
}

TEST_F(UpdateEmbeddingsTest, UnavailableIsRetriedWithTheSameSequencesAndAppliedOnce) {
  // The first two streams break after 2 messages: applied, then the retry
  // re-sends them and the server skips them.
  fake_.service->FailUpdates(2, grpc::StatusCode::UNAVAILABLE, "connection reset", 2);
  auto messages = Messages(F32Delta("t_user", Range(0, 8), 4), 10);  // 4 messages
  rankd::v1::UpdateSummary summary;
  int attempts = 0;
  absl::Status s = client_->UpdateEmbeddings(messages, &summary, {}, &attempts);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(fake_.service->update_streams(), 3);
  EXPECT_EQ(fake_.service->applied("mini", 2), 4);  // each message once
  EXPECT_EQ(Find(summary, 2, "t_user")->duplicates(), 2);
  EXPECT_EQ(Find(summary, 2, "t_user")->messages(), 2);
  std::vector<uint64_t> sequences;
  for (const auto& m : fake_.service->received_updates()) sequences.push_back(m.sequence());
  // Attempts 1 and 2 got 10, 11 before the break (the fake reads no more);
  // attempt 3 all.
  EXPECT_THAT(sequences, ElementsAre(10, 11, 10, 11, 10, 11, 12, 13));
}

TEST_F(UpdateEmbeddingsTest, DeadlineExceededIsRetriedToo) {
  fake_.service->FailUpdates(1, grpc::StatusCode::DEADLINE_EXCEEDED, "too slow", 0);
  rankd::v1::UpdateSummary summary;
  int attempts = 0;
  ASSERT_TRUE(client_
                  ->UpdateEmbeddings(Messages(F32Delta("t_user", {1}, 4), 1), &summary, {},
                                     &attempts)
                  .ok());
  EXPECT_EQ(attempts, 2);
}

TEST_F(UpdateEmbeddingsTest, RetriesRunOut) {
  fake_.service->FailUpdates(10, grpc::StatusCode::UNAVAILABLE, "connection reset", 0);
  int attempts = 0;
  rankd::v1::UpdateSummary summary;
  absl::Status s = client_->UpdateEmbeddings(Messages(F32Delta("t_user", {1}, 4), 1), &summary,
                                             {}, &attempts);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("connection reset (after 4 attempts)"));
  EXPECT_EQ(attempts, 4);  // 1 + update_retries (3)
  EXPECT_EQ(fake_.service->update_streams(), 4);
}

TEST_F(UpdateEmbeddingsTest, OtherErrorsAreFinalWithTheServersMessage) {
  // Message 1 holds id 1000: out of range of t_user [0, 1000).
  auto messages = Messages(F32Delta("t_user", {998, 999, 1000}, 4), 5);
  int attempts = 0;
  rankd::v1::UpdateSummary summary;
  absl::Status s = client_->UpdateEmbeddings(messages, &summary, {}, &attempts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "table \"t_user\", message 1 (sequence 6): id 1000 is out of range [0, 1000) "
            "(1 message before it applied)");
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(fake_.service->update_streams(), 1);
  EXPECT_EQ(fake_.service->applied("mini", 1), 1);

  auto unknown = Messages(F32Delta("t_nope", {1}, 4), 1);
  s = client_->UpdateEmbeddings(unknown, &summary);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("has no table \"t_nope\" (tables: t_item, t_user)"));
}

TEST_F(UpdateEmbeddingsTest, DynamicTableCountsAndListModels) {
  TableDelta d;
  d.table = "t_item";
  d.dim = 4;
  d.dtype = RowDtype::kF16;
  d.ids = {1, 2, 3};
  d.row_bytes.assign(3 * 4 * 2, '\0');
  rankd::v1::UpdateSummary summary;
  ASSERT_TRUE(client_->UpdateEmbeddings(Messages(d, 1, 4096), &summary).ok());
  TableDelta second = d;
  second.ids = {3, 4};
  second.row_bytes.assign(2 * 4 * 2, '\0');
  second.delete_keys = {1, 77};
  auto messages = Messages(second, 2, 4096);
  for (auto& m : messages) m.set_version(2);
  ASSERT_TRUE(client_->UpdateEmbeddings(messages, &summary).ok());
  const auto* t = Find(summary, 2, "t_item");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->keys_inserted(), 1);
  EXPECT_EQ(t->keys_updated(), 1);
  EXPECT_EQ(t->keys_deleted(), 1);
  EXPECT_EQ(t->keys_not_found(), 1);
  EXPECT_EQ(Find(summary, 1, "t_item"), nullptr);  // version 2 only
  auto list = client_->ListModels("mini");
  ASSERT_TRUE(list.ok());
  const auto& v2 = list->models(0).versions(1);
  ASSERT_EQ(v2.dynamic_tables_size(), 1);
  EXPECT_EQ(v2.dynamic_tables(0).keys(), 3);  // 2, 3, 4
  EXPECT_EQ(LastSequences(list->models(0), 2, "trainer-0")["t_item"], 2u);
  EXPECT_EQ(LastSequences(list->models(0), 1, "trainer-0")["t_item"], 1u);
}

TEST_F(UpdateEmbeddingsTest, SaveSnapshot) {
  auto snap = client_->SaveSnapshot("mini");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->version(), 4);
  EXPECT_EQ(snap->directory(), "/models/mini/4");
  EXPECT_GT(snap->bytes(), 0);
  EXPECT_EQ(snap->model().versions().rbegin()->snapshot_of(), 2);
  auto again = client_->SaveSnapshot("mini", 1, 4);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  fake_.service->FailNextSnapshot(grpc::StatusCode::RESOURCE_EXHAUSTED, "disk full");
  auto full = client_->SaveSnapshot("mini");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().message(), "disk full");
  auto broken = client_->SaveSnapshot("broken");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ModelControlClientOptionsTest, UpdateOptionsAreValidated) {
  ModelControlClient::Options o;
  o.update_retries = -1;
  EXPECT_THAT(ModelControlClient::Create(o).status().message(), HasSubstr("update_retries"));
  o = {};
  o.update_deadline_ms = 0;
  EXPECT_THAT(ModelControlClient::Create(o).status().message(), HasSubstr("update_deadline_ms"));
}

// --- replicas -------------------------------------------------------------------

TEST(ResolveReplicasTest, ResolvesEveryAddressWithThePort) {
  auto local = ResolveReplicas("127.0.0.1:8503");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*local, ElementsAre("127.0.0.1:8503"));
  auto v6 = ResolveReplicas("dns:///[::1]:9");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_THAT(*v6, ElementsAre("[::1]:9"));
  auto name = ResolveReplicas("localhost:8503");
  ASSERT_TRUE(name.ok()) << name.status();
  for (const std::string& t : *name) {
    EXPECT_TRUE(t == "127.0.0.1:8503" || t == "[::1]:8503") << t;
  }
  EXPECT_EQ(ResolveReplicas("localhost").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveReplicas("localhost:0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveReplicas("no-such-host.invalid:8503").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ForEachReplicaTest, SendsTheSameStreamToEveryReplicaAndReportsEach) {
  auto a = testing::StartFakeAdminServer();
  auto b = testing::StartFakeAdminServer();
  ASSERT_TRUE(a.ok() && b.ok());
  b->service->FailUpdates(100, grpc::StatusCode::UNAVAILABLE, "replica b is down", 0);
  SplitOptions split = Split(1);
  auto messages = SplitTableDelta(F32Delta("t_user", Range(0, 3), 4), split);
  ASSERT_TRUE(messages.ok());
  auto results = ForEachReplica({a->target(), b->target()}, [&](const std::string& target) {
    ModelControlClient::Options o;
    o.target = target;
    o.retry_backoff_ms = 1;
    o.update_retries = 1;
    auto client = ModelControlClient::Create(o);
    if (!client.ok()) return client.status();
    rankd::v1::UpdateSummary summary;
    return (*client)->UpdateEmbeddings(*messages, &summary);
  });
  ASSERT_THAT(results, SizeIs(2));
  EXPECT_EQ(results[0].target, a->target());
  EXPECT_TRUE(results[0].status.ok()) << results[0].status;
  EXPECT_THAT(results[1].status.message(), HasSubstr("replica b is down"));
  EXPECT_EQ(a->service->applied("mini", 2), 1);
  EXPECT_EQ(b->service->update_streams(), 2);
  a->server->Shutdown();
  b->server->Shutdown();
}

}  // namespace
}  // namespace rankd::client
