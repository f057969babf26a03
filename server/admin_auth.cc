#include "server/admin_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace rankd::server {
namespace {

constexpr int64_t kMaxTokenFileBytes = 4096;

struct FileState {
  int64_t mtime_ns = -1;
  int64_t size = -1;
};

absl::StatusOr<FileState> StatTokenFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_token_file: ", path, ": cannot stat (missing?)"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_token_file: ", path, ": not a regular file"));
  }
  if (st.st_size > kMaxTokenFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_token_file: ", path, ": larger than 4 KiB"));
  }
  return FileState{static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size)};
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admin_token_file: ", path, ": cannot open for reading"));
  }
  std::stringstream s;
  s << f.rdbuf();
  return ParseToken("--admin_token_file", path, s.str());
}

std::array<uint8_t, 32> Sha256(absl::string_view bytes) {
  std::array<uint8_t, 32> out;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), out.data());
  return out;
}

}  // namespace

absl::StatusOr<std::string> ParseToken(const std::string& flag, const std::string& path,
                                       const std::string& text) {
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": empty"));
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": ", path, ": the token must be printable ASCII without spaces"));
    }
  }
  return token;
}

absl::StatusOr<std::unique_ptr<AdminAuth>> AdminAuth::Create(const std::string& token_file) {
  std::unique_ptr<AdminAuth> auth(new AdminAuth(token_file));
  if (token_file.empty()) return auth;
  absl::StatusOr<FileState> state = StatTokenFile(token_file);
  if (!state.ok()) return state.status();
  absl::StatusOr<std::string> token = ReadToken(token_file);
  if (!token.ok()) return token.status();
  absl::MutexLock lock(&auth->mu_);
  auth->token_digest_ = Sha256(*token);
  auth->file_mtime_ns_ = state->mtime_ns;
  auth->file_size_ = state->size;
  return auth;
}

void AdminAuth::RefreshToken() {
  absl::StatusOr<FileState> state = StatTokenFile(token_file_);
  if (!state.ok()) return;  // keep the last good token
  {
    absl::MutexLock lock(&mu_);
    if (state->mtime_ns == file_mtime_ns_ && state->size == file_size_) return;
  }
  absl::StatusOr<std::string> token = ReadToken(token_file_);
  if (!token.ok()) return;
  absl::MutexLock lock(&mu_);
  token_digest_ = Sha256(*token);
  file_mtime_ns_ = state->mtime_ns;
  file_size_ = state->size;
}

grpc::Status AdminAuth::Check(const grpc::ServerContext& context) {
  if (!requires_token()) return grpc::Status::OK;
  RefreshToken();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "admin API: no \"authorization: Bearer <token>\" metadata "
                        "(rankd serve --admin_token_file is set; rankctl --token_file)");
  }
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ")) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "admin API: the authorization metadata is not \"Bearer <token>\"");
  }
  const Digest offered = Sha256(value);
  Digest expected;
  {
    absl::MutexLock lock(&mu_);
    expected = token_digest_;
  }
  if (CRYPTO_memcmp(offered.data(), expected.data(), expected.size()) != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "admin API: wrong bearer token");
  }
  return grpc::Status::OK;
}

}  // namespace rankd::server
