#include "server/tls.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace rankd::server {
namespace {

// Self-signed certificates made with the openssl command (Debian's `openssl`
// package, installed by scripts/setup.sh) in a fresh directory per test.
class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tls_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    MakePair("a");
    MakePair("b");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void MakePair(const std::string& name) {
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name +
                            " -keyout " + Path(name + ".key") + " -out " + Path(name + ".crt") +
                            " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TlsFiles Files(const std::string& cert, const std::string& key, const std::string& ca = "") {
  TlsFiles f;
  f.cert_file = cert;
  f.key_file = key;
  f.client_ca_file = ca;
  return f;
}

TEST_F(TlsFilesTest, PlaintextAndValidPairsPass) {
  EXPECT_TRUE(ValidateTlsFiles(TlsFiles{}).ok());
  EXPECT_EQ(DescribeTls(TlsFiles{}), "plaintext");
  const TlsFiles tls = Files(Path("a.crt"), Path("a.key"));
  EXPECT_TRUE(ValidateTlsFiles(tls).ok()) << ValidateTlsFiles(tls);
  EXPECT_EQ(DescribeTls(tls), "TLS");
  const TlsFiles mtls = Files(Path("a.crt"), Path("a.key"), Path("b.crt"));
  EXPECT_TRUE(ValidateTlsFiles(mtls).ok()) << ValidateTlsFiles(mtls);
  EXPECT_EQ(DescribeTls(mtls), "mTLS");
  EXPECT_NE(MakeServerCredentials(mtls), nullptr);
}

// Each mistake fails the start with the flag named.
TEST_F(TlsFilesTest, MistakesNameTheFlag) {
  auto message = [](const TlsFiles& f) {
    absl::Status s = ValidateTlsFiles(f);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_NE(message(Files(Path("a.crt"), "")).find("give both"), std::string::npos);
  EXPECT_NE(message(Files("", "", Path("b.crt"))).find("--tls_client_ca_file"), std::string::npos);
  EXPECT_NE(message(Files(Path("a.crt"), Path("b.key"))).find("is not the private key"),
            std::string::npos);
  EXPECT_NE(message(Files(Path("missing.crt"), Path("a.key"))).find("--tls_cert_file"),
            std::string::npos);
  // A key where the certificate belongs: no certificate in it.
  EXPECT_NE(message(Files(Path("a.key"), Path("a.key"))).find("no PEM certificate"),
            std::string::npos);
  EXPECT_NE(message(Files(Path("a.crt"), Path("a.crt"))).find("--tls_key_file"), std::string::npos);
  EXPECT_NE(message(Files(Path("a.crt"), Path("a.key"), Path("a.key"))).find("--tls_client_ca_file"),
            std::string::npos);
  // A FIFO is refused before it is opened (opening it would block).
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_NE(message(Files(Path("fifo"), Path("a.key"))).find("not a regular file"),
            std::string::npos);
  TlsFiles bad_interval = Files(Path("a.crt"), Path("a.key"));
  bad_interval.reload_interval_s = 0;
  EXPECT_NE(message(bad_interval).find("--tls_reload_s"), std::string::npos);
}

}  // namespace
}  // namespace rankd::server
