// The life of one model version in the server:
//
//   UNLOADED --load--> LOADING --ok--> READY --unload--> DRAINING --idle--> UNLOADED
//                         |                                 
//                         +--error--> FAILED --files changed / forced--> LOADING
//
// A FAILED version keeps the fingerprint of the files that failed, and is
// loaded again only when its files' fingerprint differs (or an operator
// forces it): a broken version is never retried in a loop. Times come from an
// injected clock, so tests run on a FakeClock.
//
// Threading: not thread-safe; the ModelManager guards each record.
#ifndef RANKD_SERVER_LIFECYCLE_VERSION_STATE_H_
#define RANKD_SERVER_LIFECYCLE_VERSION_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rankd/v1/model_control.pb.h"

namespace rankd::server {

using rankd::v1::VersionState;

// "LOADING", "READY", ...
const char* VersionStateName(VersionState state);

class VersionRecord {
 public:
  // A version the server has seen but not loaded: UNLOADED since `now`.
  explicit VersionRecord(absl::Time now) : since_(now) {}

  VersionState state() const { return state_; }
  absl::Time since() const { return since_; }
  // FAILED: the file and why (empty otherwise).
  const std::string& reason() const { return reason_; }

  // Whether a load may start now for files with `fingerprint`: UNLOADED, or
  // FAILED with other files than those that failed. `force` (an operator's
  // LoadModel) allows any FAILED or UNLOADED version.
  bool MayLoad(uint64_t fingerprint, bool force) const;

  // The transitions of the diagram; FAILED_PRECONDITION naming both states
  // for any other (a bug in the caller, never a user's error).
  absl::Status StartLoading(absl::Time now);
  absl::Status Ready(absl::Time now);
  absl::Status Failed(absl::Time now, std::string reason, uint64_t fingerprint);
  absl::Status StartDraining(absl::Time now);
  absl::Status Unloaded(absl::Time now);

 private:
  absl::Status Move(VersionState from, VersionState to, absl::Time now);

  VersionState state_ = rankd::v1::UNLOADED;
  absl::Time since_;
  std::string reason_;
  uint64_t failed_fingerprint_ = 0;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_VERSION_STATE_H_
