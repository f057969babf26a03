#include "server/lifecycle/update_logs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace rankd::server {

absl::StatusOr<std::unique_ptr<UpdateLogs>> UpdateLogs::Create(const std::string& dir) {
  auto bad = [&dir](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--update_log_dir: ", dir, ": ", why));
  };
  if (dir.empty()) return absl::InvalidArgumentError("--update_log_dir: empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return bad(absl::StrCat("cannot create the directory: ", ec.message()));
  if (!std::filesystem::is_directory(dir, ec)) return bad("not a directory");
  // Writable: a file can be created, written and synced there.
  const std::string probe = absl::StrCat(dir, "/.rankd-write-check.", getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return bad(absl::StrCat("cannot create a file there: ", strerror(errno)));
  const bool written = write(fd, "ok\n", 3) == 3 && fsync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  unlink(probe.c_str());
  if (!written) return bad(absl::StrCat("cannot write a file there: ", strerror(saved_errno)));
  spdlog::info("update log: acknowledged embedding updates are logged under {}", dir);
  return std::unique_ptr<UpdateLogs>(new UpdateLogs(dir));
}

std::string UpdateLogs::PathOf(const std::string& model) const {
  return absl::StrCat(dir_, "/", model, ".updlog");
}

absl::StatusOr<engine::UpdateLog*> UpdateLogs::Get(const std::string& model, bool create) {
  absl::MutexLock lock(&mu_);
  auto it = logs_.find(model);
  if (it != logs_.end()) return it->second.get();
  engine::UpdateLog::Options o;
  o.path = PathOf(model);
  std::error_code ec;
  if (!create && !std::filesystem::exists(o.path, ec)) return nullptr;
  absl::StatusOr<std::unique_ptr<engine::UpdateLog>> log = engine::UpdateLog::Open(o);
  if (!log.ok()) return log.status();
  const engine::UpdateLog::Recovery& r = (*log)->recovery();
  if (r.torn_offset >= 0) {
    spdlog::warn(
        "update log {}: cut off a torn tail of {} bytes at offset {} ({}): an append "
        "interrupted by a crash, never acknowledged",
        o.path, r.torn_bytes, r.torn_offset, r.torn_reason);
  }
  spdlog::info("update log {}: {} records, {} bytes", o.path, r.records, r.bytes);
  return logs_.emplace(model, *std::move(log)).first->second.get();
}

}  // namespace rankd::server
