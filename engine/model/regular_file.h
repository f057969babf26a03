// Opening a model's files for reading without ever blocking on them: only
// regular files are opened. A FIFO (named pipe) as a weights file blocked
// open() until a writer came, i.e. forever; a character device (/dev/zero,
// /dev/urandom) never ends; a directory reads as nothing.
#ifndef RANKD_ENGINE_MODEL_REGULAR_FILE_H_
#define RANKD_ENGINE_MODEL_REGULAR_FILE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace rankd::engine {

// What a file type is, for error messages: "a FIFO (named pipe)",
// "a character device", "a directory", ...
const char* FileTypeName(mode_t mode);

// Opens `path` read-only (O_CLOEXEC) if it is a regular file (after
// following symlinks) and returns the descriptor, which the caller closes.
// The type is checked with stat() before the open and again with fstat()
// on the open descriptor, and the open itself is O_NONBLOCK, so a file
// swapped for a FIFO in between cannot block it either (O_NONBLOCK changes
// nothing for reads of a regular file). `st`, if not null, receives the
// fstat() of the open file.
// Errors name the path: NOT_FOUND (missing), FAILED_PRECONDITION (cannot
// stat or open, e.g. permissions), INVALID_ARGUMENT for another type
// ("<path>: is a FIFO (named pipe), not a regular file").
absl::StatusOr<int> OpenRegularFile(const std::string& path,
                                    struct stat* st = nullptr);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_REGULAR_FILE_H_
