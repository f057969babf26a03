#include "server/raw_messages.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "rankd/v1/ranking.pb.h"

namespace rankd::server {
namespace {

grpc::ByteBuffer Wire(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

std::string Bytes(grpc::ByteBuffer* wire) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(wire->Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(RawMessages, ParsesAValidRequestAndReleasesTheWireBytes) {
  rankd::v1::ScoreRequest want;
  want.set_model("mini");
  want.set_num_candidates(2);
  want.add_dense(0.5f);
  auto* f = want.add_sparse();
  f->set_name("f0");
  f->add_ids(7);
  f->add_lengths(1);
  grpc::ByteBuffer wire = Wire(want.SerializeAsString());
  rankd::v1::ScoreRequest got;
  got.set_version(99);  // cleared by the parse
  ASSERT_TRUE(ParseRequest(&wire, &got).ok());
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  EXPECT_EQ(wire.Length(), 0u);
}

TEST(RawMessages, GarbageIsInvalidArgumentNamingTheType) {
  // Field 1 with wire type 7 (there is none); a truncated length-delimited
  // field; a varint that never ends.
  const std::string cases[] = {std::string("\x0f\x01\x02", 3),
                               std::string("\x0a\x10" "abc", 5), std::string(12, '\xff')};
  for (const std::string& bytes : cases) {
    grpc::ByteBuffer wire = Wire(bytes);
    rankd::v1::ScoreRequest got;
    absl::Status s = ParseRequest(&wire, &got);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), "request is not a valid rankd.v1.ScoreRequest"))
        << s;
    EXPECT_LT(s.message().size(), 300u);
  }
}

TEST(RawMessages, StringThatIsNotUtf8IsInvalid) {
  // ScoreRequest.model = "\xc3\x28" (not UTF-8): proto3 refuses it.
  grpc::ByteBuffer wire = Wire(std::string("\x0a\x02\xc3\x28", 4));
  rankd::v1::GetModelInfoRequest got;
  absl::Status s = ParseRequest(&wire, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("request is not a valid rankd.v1.GetModelInfoRequest"),
            absl::string_view::npos)
      << s;
}

TEST(RawMessages, EmptyBytesAreTheDefaultMessage) {
  grpc::ByteBuffer wire = Wire("");
  rankd::v1::ScoreRequest got;
  EXPECT_TRUE(ParseRequest(&wire, &got).ok());
  EXPECT_EQ(got.model(), "");
}

TEST(RawMessages, SerializeRoundTrips) {
  rankd::v1::ScoreResponse response;
  response.set_model("m");
  response.set_version(3);
  for (int i = 0; i < 1000; ++i) response.add_scores(i * 0.001f);
  grpc::ByteBuffer wire;
  ASSERT_TRUE(SerializeResponse(response, &wire).ok());
  rankd::v1::ScoreResponse back;
  ASSERT_TRUE(back.ParseFromString(Bytes(&wire)));
  EXPECT_EQ(back.SerializeAsString(), response.SerializeAsString());
}

}  // namespace
}  // namespace rankd::server
