#include "client/model_control_client.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/connect.h"
#include "client/option_checks.h"
#include "client/status_conversion.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace rankd::client {
namespace {

absl::Status Validate(const ModelControlClient::Options& o) {
  if (o.target.empty()) return absl::InvalidArgumentError("target: must not be empty");
  return FirstError({
      CheckAbove("deadline_ms", o.deadline_ms, 0),
      CheckAbove("load_deadline_ms", o.load_deadline_ms, 0),
      CheckAbove("update_deadline_ms", o.update_deadline_ms, 0),
      CheckAtLeast("update_retries", o.update_retries, 0),
      CheckAtLeast("retry_backoff_ms", o.retry_backoff_ms, 0),
      CheckAtLeast("connect_timeout_ms", o.connect_timeout_ms, 0),
      // gRPC takes message limits as int.
      CheckInRange("max_message_bytes", o.max_message_bytes, 1, INT_MAX),
  });
}

// Runs the unary call `method` of `stub` on `request` with `call` applied
// (its deadline, or `default_deadline_ms`) and the bearer token.
template <typename Method, typename Request>
auto Unary(rankd::v1::ModelControl::Stub* stub, Method method, const Request& request,
           const CallOptions& call, int64_t default_deadline_ms, const std::string& bearer_token) {
  grpc::ClientContext context;
  ApplyCallOptions(call, absl::Milliseconds(default_deadline_ms), &context, bearer_token);
  return CallUnary(*stub, method, &context, request);
}

// LoadModel's and UnloadModel's request: the model and its versions.
template <typename Request>
Request VersionsRequest(absl::string_view model, absl::Span<const int64_t> versions) {
  Request request;
  request.set_model(std::string(model));
  request.mutable_versions()->Add(versions.begin(), versions.end());
  return request;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelControlClient>> ModelControlClient::Create(
    const Options& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      OpenChannel(options.target, options.credentials, args, options.connect_timeout_ms);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<ModelControlClient>(new ModelControlClient(options, *std::move(channel)));
}

ModelControlClient::ModelControlClient(const Options& options,
                                       std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      stub_(rankd::v1::ModelControl::NewStub(channel_)) {}

absl::StatusOr<rankd::v1::ListModelsResponse> ModelControlClient::ListModels(
    absl::string_view model, const CallOptions& call) const {
  rankd::v1::ListModelsRequest request;
  request.set_model(std::string(model));
  return Unary(stub_.get(), &rankd::v1::ModelControl::Stub::ListModels, request, call,
               options_.deadline_ms, options_.bearer_token);
}

absl::StatusOr<rankd::v1::LoadModelResponse> ModelControlClient::LoadModel(
    absl::string_view model, absl::Span<const int64_t> versions, const CallOptions& call) const {
  return Unary(stub_.get(), &rankd::v1::ModelControl::Stub::LoadModel,
               VersionsRequest<rankd::v1::LoadModelRequest>(model, versions), call,
               options_.load_deadline_ms, options_.bearer_token);
}

absl::StatusOr<rankd::v1::UnloadModelResponse> ModelControlClient::UnloadModel(
    absl::string_view model, absl::Span<const int64_t> versions, const CallOptions& call) const {
  return Unary(stub_.get(), &rankd::v1::ModelControl::Stub::UnloadModel,
               VersionsRequest<rankd::v1::UnloadModelRequest>(model, versions), call,
               options_.load_deadline_ms, options_.bearer_token);
}

absl::StatusOr<rankd::v1::SetVersionLabelResponse> ModelControlClient::SetVersionLabel(
    absl::string_view model, absl::string_view label, int64_t version,
    const CallOptions& call) const {
  rankd::v1::SetVersionLabelRequest request;
  request.set_model(std::string(model));
  request.set_label(std::string(label));
  request.set_version(version);
  return Unary(stub_.get(), &rankd::v1::ModelControl::Stub::SetVersionLabel, request, call,
               options_.deadline_ms, options_.bearer_token);
}

absl::Status ModelControlClient::UpdateEmbeddings(
    const std::vector<rankd::v1::EmbeddingUpdate>& messages, rankd::v1::UpdateSummary* out,
    const CallOptions& call, int* attempts, RowPacer* pacer) const {
  absl::Duration backoff = absl::Milliseconds(options_.retry_backoff_ms);
  absl::Status status;
  int attempt = 0;
  for (; attempt <= options_.update_retries; ++attempt) {
    if (attempt > 0) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(10));
    }
    grpc::ClientContext context;
    ApplyCallOptions(call, absl::Milliseconds(options_.update_deadline_ms), &context,
                     options_.bearer_token);
    rankd::v1::UpdateSummary summary;
    std::unique_ptr<grpc::ClientWriter<rankd::v1::EmbeddingUpdate>> writer =
        stub_->UpdateEmbeddings(&context, &summary);
    for (const rankd::v1::EmbeddingUpdate& m : messages) {
      if (pacer != nullptr) pacer->Pace(MessageRows(m));
      // false: the stream is broken (the server ended it, or the network);
      // Finish says why.
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    const grpc::Status finished = writer->Finish();
    if (finished.ok()) {
      if (attempts != nullptr) *attempts = attempt + 1;
      if (out != nullptr) *out = std::move(summary);
      return absl::OkStatus();
    }
    status = FromGrpcStatus(finished);
    // The server never answered: send everything again (it skips the
    // sequences it already applied). Anything else is its answer.
    if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
      if (attempts != nullptr) *attempts = attempt + 1;
      return status;
    }
  }
  if (attempts != nullptr) *attempts = attempt;
  if (attempt <= 1) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), " (after ", attempt,
                                                  " attempts)"));
}

absl::StatusOr<rankd::v1::SaveSnapshotResponse> ModelControlClient::SaveSnapshot(
    absl::string_view model, int64_t version, int64_t new_version, const CallOptions& call) const {
  rankd::v1::SaveSnapshotRequest request;
  request.set_model(std::string(model));
  request.set_version(version);
  request.set_new_version(new_version);
  return Unary(stub_.get(), &rankd::v1::ModelControl::Stub::SaveSnapshot, request, call,
               options_.update_deadline_ms, options_.bearer_token);
}

}  // namespace rankd::client
