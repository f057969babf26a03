// UpdateLogs: the update log of each model under `rankd serve
// --update_log_dir` (one engine::UpdateLog per model, `<dir>/<model>.updlog`;
// format and crash semantics in engine/updates/update_log.h). ModelManager
// appends each accepted update message to its model's log before the
// message is acknowledged, replays the log onto every version it loads, and
// truncates it after a snapshot that holds everything it says
// (model_manager.h, ApplyUpdate / SaveSnapshot).
//
// Ownership: owns the open logs (each holds a flock on its file until the
// server exits). Threading: thread-safe; a log is opened once and stays
// open, so the pointers handed out live as long as this object.
#ifndef RANKD_SERVER_LIFECYCLE_UPDATE_LOGS_H_
#define RANKD_SERVER_LIFECYCLE_UPDATE_LOGS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/updates/update_log.h"

namespace rankd::server {

class UpdateLogs {
 public:
  // `dir` is created when missing and must be a writable directory;
  // INVALID_ARGUMENT naming --update_log_dir otherwise.
  static absl::StatusOr<std::unique_ptr<UpdateLogs>> Create(const std::string& dir);

  // The model's log, opened and recovered at the first call (a torn tail
  // is cut off with a warning). With `create` false, null when the model
  // has no log file yet (nothing to replay). The UpdateLog::Open errors
  // otherwise (DATA_LOSS naming the file and offset for a damaged log); a
  // failed open is tried again at the next call.
  absl::StatusOr<engine::UpdateLog*> Get(const std::string& model, bool create);

  std::string PathOf(const std::string& model) const;
  const std::string& dir() const { return dir_; }

 private:
  explicit UpdateLogs(std::string dir) : dir_(std::move(dir)) {}

  const std::string dir_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<engine::UpdateLog>> logs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_UPDATE_LOGS_H_
