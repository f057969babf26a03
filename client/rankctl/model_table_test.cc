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

TEST(ModelTableTest, NoModelsIsTheHeaderOnly) {
  EXPECT_EQ(ModelTable(google::protobuf::RepeatedPtrField<rankd::v1::ModelStatus>()),
            "MODEL  VERSION  STATE  LABELS  LOAD_S  WARMUP_S  HBM  HOST  REASON\n");
}

}  // namespace
}  // namespace rankd::rankctl
