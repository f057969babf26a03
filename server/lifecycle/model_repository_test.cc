#include "server/lifecycle/model_repository.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

namespace fs = std::filesystem;

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / absl::StrCat("scan_", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  fs::path root_;
};

TEST_F(ModelRepositoryTest, ListsVersionsAndIgnoresTheRest) {
  Write(root_ / "m" / "1" / "model.pbtxt", "a");
  Write(root_ / "m" / "12" / "model.pbtxt", "b");
  Write(root_ / "m" / ".3.tmp" / "model.pbtxt", "c");  // being published
  Write(root_ / "m" / "007" / "model.pbtxt", "d");     // leading zeros
  Write(root_ / "m" / "x" / "model.pbtxt", "e");
  Write(root_ / "m" / "5", "a file, not a directory");
  Write(root_ / ".git" / "1" / "x", "f");
  Write(root_ / "empty" / "notes.txt", "g");
  auto scan = ScanRepository(root_.string());
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_EQ(scan->size(), 2u);  // m and empty
  const ModelOnDisk& m = scan->at("m");
  ASSERT_EQ(m.versions.size(), 2u);
  EXPECT_EQ(m.versions.at(12).directory, (root_ / "m" / "12").string());
  EXPECT_FALSE(m.has_serving_config);
  EXPECT_TRUE(scan->at("empty").versions.empty());
}

TEST_F(ModelRepositoryTest, FingerprintsFollowTheFiles) {
  Write(root_ / "m" / "1" / "weights.safetensors", "abc");
  const uint64_t a = DirectoryFingerprint((root_ / "m" / "1").string());
  EXPECT_NE(a, 0u);
  EXPECT_EQ(DirectoryFingerprint((root_ / "m" / "1").string()), a);
  Write(root_ / "m" / "1" / "weights.safetensors", "abcd");  // size changes
  const uint64_t b = DirectoryFingerprint((root_ / "m" / "1").string());
  EXPECT_NE(b, a);
  Write(root_ / "m" / "1" / "extra", "");
  EXPECT_NE(DirectoryFingerprint((root_ / "m" / "1").string()), b);
  EXPECT_EQ(DirectoryFingerprint((root_ / "nope").string()), 0u);
}

TEST_F(ModelRepositoryTest, ReadsServingConfigAndKeepsItsError) {
  Write(root_ / "m" / "1" / "model.pbtxt", "a");
  Write(root_ / "m" / "serving.pbtxt", "version_policy { all {} }");
  Write(root_ / "n" / "serving.pbtxt", "version_policy { nonsense {} }");
  auto scan = ScanRepository(root_.string());
  ASSERT_TRUE(scan.ok());
  EXPECT_TRUE(scan->at("m").has_serving_config);
  EXPECT_TRUE(scan->at("m").serving_config.version_policy().has_all());
  EXPECT_TRUE(scan->at("m").serving_config_error.empty());
  EXPECT_NE(scan->at("m").serving_config_fingerprint, 0u);
  EXPECT_NE(scan->at("n").serving_config_error.find("serving.pbtxt:1:"), std::string::npos);
}

TEST_F(ModelRepositoryTest, RootErrorsNameTheRoot) {
  auto missing = ScanRepository((root_ / "nope").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  Write(root_ / "file", "x");
  EXPECT_EQ(ScanRepository((root_ / "file").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rankd::server
