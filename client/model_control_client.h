// C++ client of rankd's admin API (rankd.v1.ModelControl): list, load and
// unload model versions, point version labels at them, stream online
// embedding updates (with retries) and save snapshots.
//
// The server serves this API on its admin listener only (default
// 127.0.0.1:8503, loopback-only unless configured otherwise), never on the
// public port, so the default target is localhost:8503. One client owns one
// gRPC channel and is thread-safe. Errors come back as absl::Status with the
// server's canonical code and message unchanged (client/status_conversion.h):
// NOT_FOUND naming what exists for an unknown model or version,
// FAILED_PRECONDITION for a label pointed at a version that is not READY.
//
//   rankd::client::ModelControlClient::Options options;  // localhost:8503
//   auto admin = rankd::client::ModelControlClient::Create(options);
//   if (!admin.ok()) return admin.status();
//   auto loaded = (*admin)->LoadModel("mini", {3});  // waits: READY or FAILED
//   auto labelled = (*admin)->SetVersionLabel("mini", "stable", 3);
#ifndef RANKD_CLIENT_MODEL_CONTROL_CLIENT_H_
#define RANKD_CLIENT_MODEL_CONTROL_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/call_options.h"
#include "client/embedding_update.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "rankd/v1/model_control.grpc.pb.h"

namespace rankd::client {

class ModelControlClient {
 public:
  struct Options {
    // gRPC target of rankd's admin listener (--admin_host, --admin_port).
    std::string target = "localhost:8503";
    // Deadline of ListModels and SetVersionLabel unless CallOptions::deadline
    // is set. They only read or flip server state, but an operator's call
    // should not fail because the server is busy loading something else.
    int64_t deadline_ms = 10000;
    // Deadline of LoadModel and UnloadModel unless CallOptions::deadline is
    // set. They return only when every version asked for is READY or FAILED
    // (load: reading files, placing tables on the GPU, warm-up) or drained
    // (unload: admitted requests finish first); a large model takes minutes.
    int64_t load_deadline_ms = 600000;
    // Deadline of one UpdateEmbeddings stream (each attempt) and of
    // SaveSnapshot (writes every table of a version) unless
    // CallOptions::deadline is set.
    int64_t update_deadline_ms = 600000;
    // UpdateEmbeddings: how many times a stream that failed with UNAVAILABLE
    // or DEADLINE_EXCEEDED (the server never answered) is sent again, whole
    // and with the same sequence numbers: the server skips the messages it
    // had already applied. Other errors are final.
    int update_retries = 3;
    // Wait before the first retry; doubled for each next one, at most 10 s.
    int64_t retry_backoff_ms = 200;
    // 0: Create() returns at once and the channel connects on the first call.
    // > 0: Create() waits up to this long for a connection and returns
    // UNAVAILABLE without one (as RankingClient::Options::connect_timeout_ms).
    int64_t connect_timeout_ms = 0;
    // Largest message sent or received (ListModels of a server with very many
    // models and versions is the largest).
    int64_t max_message_bytes = 64 << 20;
    // Channel credentials; null = plaintext, fine on loopback. Off loopback
    // the admin listener wants mTLS or a token (client/tls.h loads both).
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // Sent as "authorization: Bearer <token>" on every call (rankd serve
    // --admin_token_file); "" = none.
    std::string bearer_token;
  };

  // Validates `options` (INVALID_ARGUMENT naming the field) and creates the
  // channel; see Options::connect_timeout_ms for when it connects.
  static absl::StatusOr<std::unique_ptr<ModelControlClient>> Create(const Options& options);

  ModelControlClient(const ModelControlClient&) = delete;
  ModelControlClient& operator=(const ModelControlClient&) = delete;

  // Every model the server knows of (`model` "" = all, by name) with every
  // version it has tried: state, failure reason, labels, timings, memory.
  absl::StatusOr<rankd::v1::ListModelsResponse> ListModels(absl::string_view model = "",
                                                           const CallOptions& call = {}) const;

  // Loads (or forces a reload of) `versions` of `model`; empty = what the
  // model's version policy selects. Returns once each is READY or FAILED: a
  // version that failed to load is not an error of the call; look at its
  // VersionStatus (state FAILED, reason).
  absl::StatusOr<rankd::v1::LoadModelResponse> LoadModel(absl::string_view model,
                                                         absl::Span<const int64_t> versions = {},
                                                         const CallOptions& call = {}) const;

  // Drains and unloads `versions` of `model`; empty = all of them.
  absl::StatusOr<rankd::v1::UnloadModelResponse> UnloadModel(
      absl::string_view model, absl::Span<const int64_t> versions = {},
      const CallOptions& call = {}) const;

  // Points `label` of `model` at `version` (which must be READY), or removes
  // the label (version 0).
  absl::StatusOr<rankd::v1::SetVersionLabelResponse> SetVersionLabel(
      absl::string_view model, absl::string_view label, int64_t version,
      const CallOptions& call = {}) const;

  // Streams `messages` in order over one UpdateEmbeddings call and stores
  // the server's summary in `out` (applied messages and duplicates, per
  // model version and table). Retries as Options::update_retries says;
  // `attempts` (optional) gets the number of streams sent. An error keeps the
  // server's code and message (which names the table, the message and how
  // many before it were applied); after retries, UNAVAILABLE or
  // DEADLINE_EXCEEDED say how many attempts were made. With `pacer` (not
  // owned; client/embedding_update.h), each message waits for
  // pacer->Pace(MessageRows(message)) before it is written, the messages of
  // a retry too: the stream keeps to the pacer's rate.
  absl::Status UpdateEmbeddings(const std::vector<rankd::v1::EmbeddingUpdate>& messages,
                                rankd::v1::UpdateSummary* out, const CallOptions& call = {},
                                int* attempts = nullptr, RowPacer* pacer = nullptr) const;

  // Writes `version` of `model` (0 = its newest READY one) as a new version
  // directory, `new_version` (0 = one above the repository's highest), that
  // the server adopts in place. Never retried.
  absl::StatusOr<rankd::v1::SaveSnapshotResponse> SaveSnapshot(absl::string_view model,
                                                               int64_t version = 0,
                                                               int64_t new_version = 0,
                                                               const CallOptions& call = {}) const;

  const Options& options() const { return options_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  ModelControlClient(const Options& options, std::shared_ptr<grpc::Channel> channel);

  const Options options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<rankd::v1::ModelControl::Stub> stub_;
};

}  // namespace rankd::client

#endif  // RANKD_CLIENT_MODEL_CONTROL_CLIENT_H_
