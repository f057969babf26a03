#include "client/tls.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace rankd::client {
namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::string& flag, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": cannot stat (missing?)"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": not a regular file"));
  }
  if (st.st_size > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": larger than 1 MiB"));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": cannot open for reading"));
  }
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

absl::StatusOr<Security> LoadSecurity(const SecurityFiles& files) {
  Security out;
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file: give both (a client certificate) or neither");
  }
  if (!files.cert_file.empty() && files.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file: needs --tls_ca_file (a client certificate is sent over TLS only)");
  }
  if (!files.ca_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadSmallFile("--tls_ca_file", files.ca_file);
    if (!ca.ok()) return ca.status();
    if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_ca_file: ", files.ca_file, ": no PEM certificate in it"));
    }
    ssl.pem_root_certs = *ca;
    if (!files.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadSmallFile("--tls_cert_file", files.cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadSmallFile("--tls_key_file", files.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    out.credentials = grpc::SslCredentials(ssl);
  }
  if (!files.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSmallFile("--token_file", files.token_file);
    if (!token.ok()) return token.status();
    out.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
    if (out.bearer_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: ", files.token_file, ": empty token"));
    }
    for (char c : out.bearer_token) {
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--token_file: ", files.token_file,
            ": the token must be printable ASCII without spaces (it travels in a header)"));
      }
    }
  }
  return out;
}

}  // namespace rankd::client
