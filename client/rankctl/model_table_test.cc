#include "client/rankctl/model_table.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::rankctl {
namespace {

TEST(HumanBytesTest, BinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(int64_t{64} << 20), "64.0 MiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 40), "3.0 TiB");
}

TEST(ModelTableTest, OneAlignedRowPerVersion) {
  google::protobuf::RepeatedPtrField<rankd::v1::ModelStatus> models;
  models.Add()->set_name("broken");
  models.Add()->set_name("mini");
  auto* failed = models[0].add_versions();
  failed->set_version(1);
  failed->set_state(rankd::v1::FAILED);
  failed->set_reason("weights.safetensors:\nbad shape");
  models[0].set_config_error("line 3: unknown field \"polcy\"");
  auto* ready = models[1].add_versions();
  ready->set_version(12);
  ready->set_state(rankd::v1::READY);
  ready->add_labels("stable");
  ready->add_labels("canary");
  ready->set_load_seconds(1.234);
  ready->set_warmup_seconds(0.5);
  ready->set_device_bytes(int64_t{3} << 30);
  ready->set_host_bytes(2048);
  models.Add()->set_name("slow");

  EXPECT_EQ(ModelTable(models),
            "MODEL   VERSION  STATE   LABELS         LOAD_S  WARMUP_S  HBM      HOST     REASON\n"
            "broken  1        FAILED  -              -       -         0 B      0 B      "
            "weights.safetensors: bad shape\n"
            "mini    12       READY   stable,canary  1.23    0.50      3.0 GiB  2.0 KiB\n"
            "slow    -        -       -              -       -         -        -        "
            "no version loaded yet\n"
            "broken: serving.pbtxt: line 3: unknown field \"polcy\" (the last good version "
            "policy is kept)\n");
}

TEST(ModelTableTest, UpdatePositionsAndDynamicTablesFollowTheTable) {
  rankd::v1::ModelStatus model;
  model.set_name("mini");
  auto* v = model.add_versions();
  v->set_version(2);
  v->set_state(rankd::v1::READY);
  v->set_snapshot_of(1);
  auto* d = v->add_dynamic_tables();
  d->set_table("t_item");
  d->set_keys(3);
  d->set_max_keys(100);
  d->set_evictions(7);
  auto* p = v->add_update_positions();
  p->set_producer_id("trainer-0");
  p->set_table("t_user");
  p->set_last_sequence(17);
  p->set_last_timestamp_unix_us(int64_t{1714564800} * 1000000);  // 2024-05-01T12:00:00Z
  const std::string text = ModelTable(model);
  EXPECT_THAT(text, ::testing::HasSubstr("\n  mini 2: dynamic table t_item: 3 of 100 keys, "
                                         "7 evicted\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\n  mini 2: updates from trainer-0 to t_user: last "
                                         "sequence 17 at 2024-05-01T12:00:00Z\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\n  mini 2: snapshot of version 1\n"));
}

TEST(UpdateSummaryTableTest, OneRowPerVersionAndTable) {
  rankd::v1::UpdateSummary summary;
  auto* t = summary.add_tables();
  t->set_version(2);
  t->set_table("t_item");
  t->set_messages(3);
  t->set_duplicates(1);
  t->set_rows_applied(40);
  t->set_keys_inserted(30);
  t->set_keys_updated(10);
  t->set_keys_deleted(2);
  t->set_keys_not_found(1);
  t->set_keys_evicted(5);
  EXPECT_EQ(UpdateSummaryTable(summary),
            "  VERSION  TABLE   MESSAGES  DUPLICATES  ROWS  INSERTED  UPDATED  DELETED  "
            "NOT_FOUND  EVICTED\n"
            "  2        t_item  3         1           40    30        10       2        1        "
            "  5\n");
}

TEST(ModelTableTest, NoModelsIsTheHeaderOnly) {
  EXPECT_EQ(ModelTable(google::protobuf::RepeatedPtrField<rankd::v1::ModelStatus>()),
            "MODEL  VERSION  STATE  LABELS  LOAD_S  WARMUP_S  HBM  HOST  REASON\n");
}

}  // namespace
}  // namespace rankd::rankctl
