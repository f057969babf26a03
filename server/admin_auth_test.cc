#include "server/admin_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace rankd::server {
namespace {

class AdminAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/admin_auth_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(AdminAuthTest, TokenFileMistakesNameTheFlag) {
  auto error = [](const std::string& path) {
    auto auth = AdminAuth::Create(path);
    EXPECT_FALSE(auth.ok());
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(auth.status().message());
  };
  EXPECT_NE(error(dir_ + "/missing").find("--admin_token_file"), std::string::npos);
  EXPECT_NE(error(Write("empty", "  \n")).find("empty"), std::string::npos);
  EXPECT_NE(error(Write("space", "two words\n")).find("printable ASCII"), std::string::npos);
  EXPECT_NE(error(Write("big", std::string(5000, 'x'))).find("4 KiB"), std::string::npos);
  EXPECT_NE(error(dir_).find("not a regular file"), std::string::npos);
}

TEST_F(AdminAuthTest, ParsesTokenWithoutSurroundingWhitespace) {
  auto token = ParseToken("--f", "p", "  s3cret-token\n");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-token");
}

// Without a token nothing is required; with one, a call carrying no
// authorization metadata is UNAUTHENTICATED (the e2e test covers right and
// wrong tokens over a real connection).
TEST_F(AdminAuthTest, CallWithoutMetadataIsRefusedOnlyWhenATokenIsSet) {
  grpc::ServerContext context;
  auto open = AdminAuth::Create("");
  ASSERT_TRUE(open.ok());
  EXPECT_FALSE((*open)->requires_token());
  EXPECT_TRUE((*open)->Check(context).ok());
  auto locked = AdminAuth::Create(Write("token", "abc\n"));
  ASSERT_TRUE(locked.ok()) << locked.status();
  EXPECT_TRUE((*locked)->requires_token());
  const grpc::Status s = (*locked)->Check(context);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message().find("abc"), std::string::npos) << "never echo the token";
}

}  // namespace
}  // namespace rankd::server
