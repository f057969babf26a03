#include "server/lifecycle/version_state.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rankd::server {

const char* VersionStateName(VersionState state) {
  switch (state) {
    case rankd::v1::LOADING:
      return "LOADING";
    case rankd::v1::READY:
      return "READY";
    case rankd::v1::DRAINING:
      return "DRAINING";
    case rankd::v1::UNLOADED:
      return "UNLOADED";
    case rankd::v1::FAILED:
      return "FAILED";
    default:
      return "UNSPECIFIED";
  }
}

bool VersionRecord::MayLoad(uint64_t fingerprint, bool force) const {
  if (state_ == rankd::v1::UNLOADED) return true;
  if (state_ != rankd::v1::FAILED) return false;
  return force || fingerprint != failed_fingerprint_;
}

absl::Status VersionRecord::Move(VersionState from, VersionState to, absl::Time now) {
  if (state_ != from) {
    return absl::FailedPreconditionError(absl::StrCat("version state: cannot go to ",
                                                      VersionStateName(to), " from ",
                                                      VersionStateName(state_)));
  }
  state_ = to;
  since_ = now;
  return absl::OkStatus();
}

absl::Status VersionRecord::StartLoading(absl::Time now) {
  if (state_ == rankd::v1::FAILED) {
    state_ = rankd::v1::UNLOADED;  // FAILED -> LOADING: a retry
  }
  absl::Status s = Move(rankd::v1::UNLOADED, rankd::v1::LOADING, now);
  if (s.ok()) reason_.clear();
  return s;
}

absl::Status VersionRecord::Ready(absl::Time now) {
  return Move(rankd::v1::LOADING, rankd::v1::READY, now);
}

absl::Status VersionRecord::Failed(absl::Time now, std::string reason, uint64_t fingerprint) {
  absl::Status s = Move(rankd::v1::LOADING, rankd::v1::FAILED, now);
  if (!s.ok()) return s;
  reason_ = std::move(reason);
  failed_fingerprint_ = fingerprint;
  return absl::OkStatus();
}

absl::Status VersionRecord::StartDraining(absl::Time now) {
  return Move(rankd::v1::READY, rankd::v1::DRAINING, now);
}

absl::Status VersionRecord::Unloaded(absl::Time now) {
  return Move(rankd::v1::DRAINING, rankd::v1::UNLOADED, now);
}

}  // namespace rankd::server
