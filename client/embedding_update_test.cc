// Splitting deltas into messages, sequence numbers, resuming from
// ListModels, repeated passes, pacing on a fake clock, UpdateEmbeddings
// against the fake (de-duplication, retries, errors, pacing), SaveSnapshot and
// the replica fan-out.
#include "client/embedding_update.h"

#include <algorithm>
#include <cstring>
#include <limits>
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

// --- repeated passes and merged summaries -----------------------------------------

TEST(NextPassTest, SequencesMoveOnByTheTablesMessagesPerPass) {
  SplitOptions options = Split(7);
  options.rows_per_message = 2;
  auto user = SplitTableDelta(F32Delta("t_user", Range(0, 5), 3), options);  // 7, 8, 9
  options.start_sequence = 40;
  auto item = SplitTableDelta(F32Delta("t_item", Range(0, 2), 3), options);  // 40
  options.start_sequence = 0;
  auto unnumbered = SplitTableDelta(F32Delta("t_ad", Range(0, 3), 3), options);  // 0, 0
  ASSERT_TRUE(user.ok() && item.ok() && unnumbered.ok());
  std::vector<EmbeddingUpdate> pass = *user;
  pass.insert(pass.begin() + 1, item->begin(), item->end());  // tables interleaved
  pass.insert(pass.end(), unnumbered->begin(), unnumbered->end());
  auto sequences = [&] {
    std::vector<uint64_t> s;
    for (const EmbeddingUpdate& m : pass) s.push_back(m.sequence());
    return s;
  };
  ASSERT_THAT(sequences(), ElementsAre(7, 40, 8, 9, 0, 0));
  NextPass(&pass, 5555);
  EXPECT_THAT(sequences(), ElementsAre(10, 41, 11, 12, 0, 0));
  for (const EmbeddingUpdate& m : pass) EXPECT_EQ(m.timestamp_unix_us(), 5555);
  NextPass(&pass, 6666);
  EXPECT_THAT(sequences(), ElementsAre(13, 42, 14, 15, 0, 0));
  // The rows are the same every pass.
  EXPECT_EQ(pass[2].ids(0), 2);
  EXPECT_EQ(pass[2].rows(0), 2.0f);  // row i of the delta is {i, i + 0.5, i + 1}
  EXPECT_EQ(pass[2].rows(3), 3.0f);
  NextPass(&pass);  // now
  EXPECT_GT(pass[0].timestamp_unix_us(), 6666);
}

TEST(MergeUpdateSummaryTest, AddsPerVersionAndTable) {
  rankd::v1::UpdateSummary total;
  rankd::v1::UpdateSummary one;
  one.set_messages(3);
  auto* t = one.add_tables();
  t->set_model("mini");
  t->set_version(2);
  t->set_table("t_user");
  t->set_messages(3);
  t->set_rows_applied(5);
  t->set_duplicates(1);
  t->set_keys_inserted(1);
  t->set_keys_updated(2);
  t->set_keys_deleted(3);
  t->set_keys_not_found(4);
  t->set_keys_evicted(6);
  MergeUpdateSummary(one, &total);
  MergeUpdateSummary(one, &total);
  rankd::v1::UpdateSummary other = one;
  other.mutable_tables(0)->set_version(1);
  MergeUpdateSummary(other, &total);
  EXPECT_EQ(total.messages(), 9);
  ASSERT_THAT(total.tables(), SizeIs(2));
  const auto& v2 = total.tables(0);
  EXPECT_EQ(v2.version(), 2);
  EXPECT_EQ(v2.messages(), 6);
  EXPECT_EQ(v2.rows_applied(), 10);
  EXPECT_EQ(v2.duplicates(), 2);
  EXPECT_EQ(v2.keys_inserted(), 2);
  EXPECT_EQ(v2.keys_updated(), 4);
  EXPECT_EQ(v2.keys_deleted(), 6);
  EXPECT_EQ(v2.keys_not_found(), 8);
  EXPECT_EQ(v2.keys_evicted(), 12);
  EXPECT_EQ(total.tables(1).version(), 1);
  EXPECT_EQ(total.tables(1).rows_applied(), 5);
}

// --- pacing on a fake clock ----------------------------------------------------------

// Moves only when told to or when slept on; a sleep ends `late` after its
// target (a late wake-up). Records every sleep's target.
class FakePacerClock final : public PacerClock {
 public:
  absl::Duration Now() override { return now_; }
  void SleepUntil(absl::Duration t) override {
    sleeps.push_back(t);
    now_ = std::max(now_, t + late);
  }
  void Advance(absl::Duration d) { now_ += d; }

  absl::Duration late;
  std::vector<absl::Duration> sleeps;

 private:
  absl::Duration now_ = absl::Hours(100);  // not zero, so "zero" times stand out
};

RowPacer Pacer(double rate, FakePacerClock* clock,
               absl::Duration catch_up = absl::Milliseconds(100)) {
  RowPacer::Options o;
  o.max_rows_per_second = rate;
  o.max_catch_up = catch_up;
  auto pacer = RowPacer::Create(o, clock);
  EXPECT_TRUE(pacer.ok()) << pacer.status();
  return *std::move(pacer);
}

constexpr absl::Duration kT0 = absl::Hours(100);

TEST(RowPacerTest, UnlimitedNeverWaits) {
  FakePacerClock clock;
  RowPacer pacer = Pacer(0, &clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pacer.Pace(4096), absl::ZeroDuration());
  EXPECT_TRUE(clock.sleeps.empty());
  EXPECT_EQ(pacer.rows(), 409600);
}

TEST(RowPacerTest, FirstMessageAtOnceThenEachWhenTheRowsBeforeItHadTheirTime) {
  FakePacerClock clock;
  RowPacer pacer = Pacer(1000, &clock);  // 1 row per ms
  std::vector<absl::Duration> sent;
  for (int64_t rows : {100, 300, 50, 1, 0, 200}) {
    pacer.Pace(rows);
    sent.push_back(clock.Now() - kT0);
  }
  EXPECT_THAT(
      sent, ElementsAre(absl::ZeroDuration(), absl::Milliseconds(100), absl::Milliseconds(400),
                        absl::Milliseconds(450), absl::Milliseconds(451), absl::Milliseconds(451)));
  EXPECT_EQ(pacer.rows(), 651);
  EXPECT_EQ(pacer.next_send() - kT0, absl::Milliseconds(651));
}

TEST(RowPacerTest, TimeSpentSendingCountsTowardTheNextMessage) {
  FakePacerClock clock;
  RowPacer pacer = Pacer(1'000'000, &clock);  // 4096 rows = 4.096 ms
  EXPECT_EQ(pacer.Pace(4096), absl::ZeroDuration());
  for (int i = 1; i <= 1000; ++i) {
    clock.Advance(absl::Microseconds(1500));  // writing the message
    EXPECT_EQ(pacer.Pace(4096), absl::Microseconds(4096 - 1500)) << i;
    EXPECT_EQ(clock.Now() - kT0, absl::Microseconds(4096) * i);
  }
  // 1001 messages, the last one leaving at 1000 x 4.096 ms: 1 M rows/s.
  EXPECT_EQ(pacer.rows(), 4096 * 1001);
}

TEST(RowPacerTest, LateWakeUpsDoNotSlowTheStream) {
  FakePacerClock clock;
  clock.late = absl::Milliseconds(3);  // every sleep ends 3 ms late
  RowPacer pacer = Pacer(1000, &clock);
  for (int i = 0; i < 500; ++i) {
    pacer.Pace(10);  // due every 10 ms
    const absl::Duration due = absl::Milliseconds(10) * i;
    EXPECT_GE(clock.Now() - kT0, due) << i;
    EXPECT_LE(clock.Now() - kT0, due + absl::Milliseconds(3)) << i;  // no drift
  }
}

TEST(RowPacerTest, SmallLagsAreCaughtUpSoTheRateHolds) {
  // Sleeps end 3 ms late and each write takes 9 ms, so a message often
  // finds itself 2 ms behind its time. With the default catch-up it goes at
  // once and the stream keeps its 10 ms per message; without any catch-up
  // each lag is lost and the stream runs 10% slow.
  for (absl::Duration catch_up : {absl::Milliseconds(100), absl::ZeroDuration()}) {
    FakePacerClock clock;
    clock.late = absl::Milliseconds(3);
    RowPacer pacer = Pacer(1000, &clock, catch_up);
    absl::Duration last;
    for (int i = 0; i < 100; ++i) {
      pacer.Pace(10);
      last = clock.Now() - kT0;
      clock.Advance(absl::Milliseconds(9));
    }
    EXPECT_EQ(last,
              catch_up > absl::ZeroDuration() ? absl::Milliseconds(991) : absl::Milliseconds(1091));
  }
}

TEST(RowPacerTest, AStallIsCaughtUpByAtMostMaxCatchUp) {
  FakePacerClock clock;
  RowPacer pacer = Pacer(1000, &clock);  // 10-row messages every 10 ms
  for (int i = 0; i < 6; ++i) pacer.Pace(10);
  EXPECT_EQ(clock.Now() - kT0, absl::Milliseconds(50));
  clock.Advance(absl::Seconds(1));  // the server stalled the stream for 1 s
  std::vector<absl::Duration> sent;
  for (int i = 0; i < 14; ++i) {
    pacer.Pace(10);
    sent.push_back(clock.Now() - kT0);
  }
  // 100 ms of rows (10 messages) plus the one due now go back to back, then
  // the rate again; the 940 ms behind before that are not made up.
  const absl::Duration at = absl::Milliseconds(1050);
  EXPECT_THAT(sent,
              ElementsAre(at, at, at, at, at, at, at, at, at, at, at, at + absl::Milliseconds(10),
                          at + absl::Milliseconds(20), at + absl::Milliseconds(30)));
}

TEST(RowPacerTest, OptionsAreValidated) {
  FakePacerClock clock;
  RowPacer::Options o;
  o.max_rows_per_second = -1;
  EXPECT_THAT(RowPacer::Create(o, &clock).status().message(),
              HasSubstr("max_rows_per_second: must be >= 0"));
  o.max_rows_per_second = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(RowPacer::Create(o, &clock).ok());
  o.max_rows_per_second = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(RowPacer::Create(o, &clock).ok());
  o.max_rows_per_second = 10;
  o.max_catch_up = -absl::Milliseconds(1);
  EXPECT_THAT(RowPacer::Create(o, &clock).status().message(), HasSubstr("max_catch_up"));
  o.max_catch_up = absl::ZeroDuration();
  EXPECT_TRUE(RowPacer::Create(o, &clock).ok());
  EXPECT_TRUE(RowPacer::Create(o).ok());  // the real clock
}

TEST(MessageRowsTest, IdsAndDeleteKeys) {
  EmbeddingUpdate m;
  m.add_ids(1);
  m.add_ids(2);
  m.add_delete_keys(9);
  EXPECT_EQ(MessageRows(m), 3);
  EXPECT_EQ(MessageRows(EmbeddingUpdate()), 0);
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

TEST_F(UpdateEmbeddingsTest, APacerSpacesTheWrites) {
  auto messages = Messages(F32Delta("t_user", Range(0, 5), 4), 1);  // 2, 2, 1 rows
  FakePacerClock clock;
  RowPacer pacer = Pacer(10, &clock);  // 10 rows/s: a 2-row message per 200 ms
  rankd::v1::UpdateSummary summary;
  ASSERT_TRUE(client_->UpdateEmbeddings(messages, &summary, {}, nullptr, &pacer).ok());
  EXPECT_THAT(clock.sleeps,
              ElementsAre(kT0 + absl::Milliseconds(200), kT0 + absl::Milliseconds(400)));
  EXPECT_EQ(pacer.rows(), 5);
  EXPECT_EQ(fake_.service->applied("mini", 2), 3);
  // The next pass of the same delta continues the schedule (and is applied).
  NextPass(&messages);
  ASSERT_TRUE(client_->UpdateEmbeddings(messages, &summary, {}, nullptr, &pacer).ok());
  EXPECT_EQ(clock.sleeps.back(), kT0 + absl::Milliseconds(900));
  EXPECT_EQ(Find(summary, 2, "t_user")->messages(), 3);
  EXPECT_EQ(Find(summary, 2, "t_user")->duplicates(), 0);
  EXPECT_EQ(fake_.service->applied("mini", 2), 6);
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
