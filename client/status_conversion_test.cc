#include "client/status_conversion.h"

#include <string>

#include "gtest/gtest.h"

namespace rankd::client {
namespace {

TEST(StatusConversionTest, OkIsOk) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusConversionTest, EveryCanonicalCodeKeepsItsNameAndMessage) {
  const std::pair<grpc::StatusCode, const char*> codes[] = {
      {grpc::StatusCode::CANCELLED, "CANCELLED"},
      {grpc::StatusCode::UNKNOWN, "UNKNOWN"},
      {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
      {grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
      {grpc::StatusCode::ALREADY_EXISTS, "ALREADY_EXISTS"},
      {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {grpc::StatusCode::ABORTED, "ABORTED"},
      {grpc::StatusCode::OUT_OF_RANGE, "OUT_OF_RANGE"},
      {grpc::StatusCode::UNIMPLEMENTED, "UNIMPLEMENTED"},
      {grpc::StatusCode::INTERNAL, "INTERNAL"},
      {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE"},
      {grpc::StatusCode::DATA_LOSS, "DATA_LOSS"},
      {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED"},
  };
  for (const auto& [code, name] : codes) {
    const std::string message = std::string("why: ") + name;
    const absl::Status status = FromGrpcStatus(grpc::Status(code, message));
    EXPECT_EQ(static_cast<int>(status.code()), static_cast<int>(code)) << name;
    EXPECT_EQ(absl::StatusCodeToString(status.code()), name);
    EXPECT_EQ(status.message(), message);
    EXPECT_FALSE(status.GetPayload(kGrpcErrorDetailsUrl).has_value());
  }
}

TEST(StatusConversionTest, UnknownCodeBecomesUnknown) {
  EXPECT_EQ(FromGrpcCode(42), absl::StatusCode::kUnknown);
  EXPECT_EQ(FromGrpcCode(grpc::StatusCode::DO_NOT_USE), absl::StatusCode::kUnknown);
}

TEST(StatusConversionTest, ErrorDetailsBecomeAPayload) {
  const std::string details("\x08\x03\x12\x02hi", 6);
  const absl::Status status =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad", details));
  ASSERT_TRUE(status.GetPayload(kGrpcErrorDetailsUrl).has_value());
  EXPECT_EQ(std::string(*status.GetPayload(kGrpcErrorDetailsUrl)), details);
}

}  // namespace
}  // namespace rankd::client
