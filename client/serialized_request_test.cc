#include "client/serialized_request.h"

#include <string>
#include <vector>

#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

rankd::v1::ScoreRequest TwoCandidates() {
  rankd::v1::ScoreRequest request;
  request.set_model("kaggle");
  request.set_version_label("canary");
  request.set_num_candidates(2);
  request.add_dense(0.5f);
  request.add_dense(-1.25f);
  rankd::v1::SparseFeature* feature = request.add_sparse();
  feature->set_name("C1");
  feature->add_ids(int64_t{1} << 40);
  feature->add_ids(-3);
  feature->add_lengths(1);
  feature->add_lengths(1);
  return request;
}

// The bytes gRPC will send, joined.
std::string Joined(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

TEST(SerializedScoreRequestTest, HoldsTheMessagesWireBytes) {
  const rankd::v1::ScoreRequest request = TwoCandidates();
  auto prepared = SerializedScoreRequest::From(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->size(), request.ByteSizeLong());
  rankd::v1::ScoreRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Joined(prepared->bytes())));
  EXPECT_EQ(parsed.SerializeAsString(), request.SerializeAsString());
  EXPECT_EQ(parsed.sparse(0).ids(0), int64_t{1} << 40);
}

TEST(SerializedScoreRequestTest, CopiesHoldTheSameBytes) {
  auto prepared = SerializedScoreRequest::From(TwoCandidates());
  ASSERT_TRUE(prepared.ok());
  const SerializedScoreRequest copy = *prepared;
  EXPECT_EQ(Joined(copy.bytes()), Joined(prepared->bytes()));
}

TEST(SerializedScoreRequestTest, EmptyRequestIsEmptyBytes) {
  auto prepared = SerializedScoreRequest::From(rankd::v1::ScoreRequest());
  ASSERT_TRUE(prepared.ok());
  EXPECT_EQ(prepared->size(), 0u);
}

TEST(SerializedInferRequestTest, HoldsTheMessagesWireBytes) {
  inference::ModelInferRequest request;
  request.set_model_name("kaggle");
  request.add_raw_input_contents(std::string("\x00\x01\x02\xff", 4));
  auto prepared = SerializedInferRequest::From(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(Joined(prepared->bytes()), request.SerializeAsString());
}

}  // namespace
}  // namespace rankd::client
