// Who may call the admin API (rankd.v1.ModelControl: load, unload, label,
// update embeddings, snapshot).
//
// With --admin_token_file every admin call must carry
// "authorization: Bearer <token>"; anything else is UNAUTHENTICATED. The
// token is compared in constant time (SHA-256 of both sides, then
// CRYPTO_memcmp: neither the token's bytes nor its length leak through
// timing). The file is re-read when it changes (mtime or size), so a rotated
// token applies without a restart; a file that cannot be read keeps the last
// good token. With mTLS on the admin listener (--tls_client_ca_file) the
// handshake itself admits only verified clients; a token, when also given,
// is still required.
//
// Thread-safe: Check runs on gRPC's threads concurrently.
#ifndef RANKD_SERVER_ADMIN_AUTH_H_
#define RANKD_SERVER_ADMIN_AUTH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"

namespace rankd::server {

class AdminAuth {
 public:
  // `token_file` "" = no token (then only mTLS or loopback protect the admin
  // listener). INVALID_ARGUMENT naming --admin_token_file: missing, not a
  // regular file, over 4 KiB, empty, or characters a header cannot carry.
  static absl::StatusOr<std::unique_ptr<AdminAuth>> Create(const std::string& token_file);

  // OK, or UNAUTHENTICATED saying what was missing (never the token).
  grpc::Status Check(const grpc::ServerContext& context);

  // Whether a token is required.
  bool requires_token() const { return !token_file_.empty(); }

 private:
  using Digest = std::array<uint8_t, 32>;
  explicit AdminAuth(std::string token_file) : token_file_(std::move(token_file)) {}
  // Re-reads the token file when its mtime or size changed.
  void RefreshToken();

  const std::string token_file_;
  absl::Mutex mu_;
  Digest token_digest_ ABSL_GUARDED_BY(mu_) = {};
  int64_t file_mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t file_size_ ABSL_GUARDED_BY(mu_) = -1;
};

// The token in a file's text (surrounding whitespace stripped), or
// INVALID_ARGUMENT naming `flag`.
absl::StatusOr<std::string> ParseToken(const std::string& flag, const std::string& path,
                                       const std::string& text);

}  // namespace rankd::server

#endif  // RANKD_SERVER_ADMIN_AUTH_H_
