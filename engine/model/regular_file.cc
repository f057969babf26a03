#include "engine/model/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rankd::engine {
namespace {

absl::Status CannotOpen(const std::string& path, const char* what, int err) {
  const std::string message = absl::StrCat(path, ": cannot ", what, ": ", strerror(err));
  return err == ENOENT ? absl::NotFoundError(message)
                       : absl::FailedPreconditionError(message);
}

absl::Status CheckRegular(const std::string& path, mode_t mode) {
  if (S_ISREG(mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": is ", FileTypeName(mode),
                   ", not a regular file (model files must be regular "
                   "files: reading anything else can block or never end)"));
}

}  // namespace

const char* FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of unknown type";
}

absl::StatusOr<int> OpenRegularFile(const std::string& path, struct stat* st) {
  struct stat before;
  if (stat(path.c_str(), &before) != 0) return CannotOpen(path, "open", errno);
  if (absl::Status s = CheckRegular(path, before.st_mode); !s.ok()) return s;
  // O_NONBLOCK: if the path became a FIFO since the stat, open() returns at
  // once instead of waiting for a writer (and fstat below refuses it).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return CannotOpen(path, "open", errno);
  struct stat after;
  if (fstat(fd, &after) != 0) {
    const int err = errno;
    close(fd);
    return CannotOpen(path, "stat", err);
  }
  if (absl::Status s = CheckRegular(path, after.st_mode); !s.ok()) {
    close(fd);
    return s;
  }
  if (st != nullptr) *st = after;
  return fd;
}

}  // namespace rankd::engine
