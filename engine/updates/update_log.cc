#include "engine/updates/update_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/updates/crc32c.h"

namespace rankd::engine {
namespace {

constexpr char kFileMagic[8] = {'R', 'K', 'D', 'U', 'P', 'L', 'O', 'G'};
constexpr uint32_t kFormatVersion = 1;
constexpr int64_t kChunkBytes = 1 << 20;  // reads while checking and scanning

absl::Status IoError(const std::string& path, const std::string& what) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", strerror(errno)));
}

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}
uint64_t GetU64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}

// Reads up to `n` bytes at `offset` (fewer only at the end of the file).
absl::StatusOr<int64_t> PReadUpTo(int fd, const std::string& path, char* buf, int64_t n,
                                  int64_t offset) {
  int64_t done = 0;
  while (done < n) {
    const ssize_t r = pread(fd, buf + done, n - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError(path, absl::StrCat("read at offset ", offset + done));
    if (r == 0) break;
    done += r;
  }
  return done;
}

absl::Status PWriteAll(int fd, const std::string& path, const char* data, int64_t n,
                       int64_t offset) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, data, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return IoError(path, absl::StrCat("write at offset ", offset));
    data += w;
    n -= w;
    offset += w;
  }
  return absl::OkStatus();
}

// What the bytes at one offset hold.
enum class Verdict { kValid, kIncomplete, kBadHeader, kTooLarge, kBadPayload };

struct Probe {
  Verdict verdict = Verdict::kValid;
  // The header's magic and CRC check out, so `length` is the record's own.
  bool header_valid = false;
  uint32_t length = 0;
  int64_t target = 0;
  int64_t bytes_read = 0;  // header and payload bytes the probe read
};

std::string Describe(const Probe& p) {
  switch (p.verdict) {
    case Verdict::kValid:
      return "valid";
    case Verdict::kIncomplete:
      return "incomplete record";
    case Verdict::kBadHeader:
      return "bad record header (magic or CRC)";
    case Verdict::kTooLarge:
      return absl::StrCat("record length ", p.length, " is over max_record_bytes");
    case Verdict::kBadPayload:
      return "payload CRC mismatch";
  }
  return "?";
}

// The record header encoded (magic, length, target, header CRC, payload CRC).
void EncodeRecordHeader(uint32_t length, int64_t target, uint32_t payload_crc, char* out) {
  PutU32(UpdateLog::kRecordMagic, out);
  PutU32(length, out + 4);
  PutU64(static_cast<uint64_t>(target), out + 8);
  PutU32(Crc32c(absl::string_view(out, 16)), out + 16);
  PutU32(payload_crc, out + 20);
}

// Checks the record at `offset` of a file of `size` bytes, reading its
// payload in chunks (never allocating its claimed length).
absl::StatusOr<Probe> ProbeRecord(int fd, const std::string& path, int64_t offset, int64_t size,
                                  int64_t max_record_bytes) {
  Probe p;
  if (size - offset < UpdateLog::kRecordHeaderBytes) {
    p.verdict = Verdict::kIncomplete;
    return p;
  }
  char h[UpdateLog::kRecordHeaderBytes];
  absl::StatusOr<int64_t> got = PReadUpTo(fd, path, h, sizeof(h), offset);
  if (!got.ok()) return got.status();
  p.bytes_read = *got;
  if (GetU32(h) != UpdateLog::kRecordMagic || GetU32(h + 16) != Crc32c(absl::string_view(h, 16))) {
    p.verdict = Verdict::kBadHeader;
    return p;
  }
  p.header_valid = true;
  p.length = GetU32(h + 4);
  p.target = static_cast<int64_t>(GetU64(h + 8));
  if (p.length > max_record_bytes) {
    p.verdict = Verdict::kTooLarge;
    return p;
  }
  if (offset + UpdateLog::kRecordHeaderBytes + p.length > size) {
    p.verdict = Verdict::kIncomplete;
    return p;
  }
  std::vector<char> buf(std::min<int64_t>(p.length, kChunkBytes));
  uint32_t crc = 0;
  for (int64_t done = 0; done < p.length;) {
    const int64_t n = std::min<int64_t>(p.length - done, kChunkBytes);
    got = PReadUpTo(fd, path, buf.data(), n, offset + UpdateLog::kRecordHeaderBytes + done);
    if (!got.ok()) return got.status();
    p.bytes_read += *got;
    if (*got != n) {
      p.verdict = Verdict::kIncomplete;
      return p;
    }
    crc = Crc32c(absl::string_view(buf.data(), n), crc);
    done += n;
  }
  if (crc != GetU32(h + 20)) p.verdict = Verdict::kBadPayload;
  return p;
}

// The scan for a valid record after a damaged one (FindValidRecord) probes
// every record magic it finds, payload CRC included, and probes may
// overlap: a file forged with many record headers whose lengths run to its
// end would cost time quadratic in its size. So the probes may read at most
// kScanReadFactor times the bytes scanned (plus kScanReadSlack); past that
// the file is refused as damaged (DATA_LOSS), which is also what any real
// valid record found there would mean. A real torn tail holds no such
// headers: its scan reads about its own length.
constexpr int64_t kScanReadFactor = 8;
constexpr int64_t kScanReadSlack = 64 << 20;
constexpr int64_t kNoValidRecord = -1;
constexpr int64_t kTooCostlyToTell = -2;

// The most bytes the probes of a scan of `scanned_bytes` may read.
int64_t ScanReadBudget(int64_t scanned_bytes) {
  return kScanReadFactor * scanned_bytes + kScanReadSlack;
}

// The offset of the first valid record that starts at `start` or after it;
// kNoValidRecord when there is none, kTooCostlyToTell when the probes' read
// budget ran out first.
absl::StatusOr<int64_t> FindValidRecord(int fd, const std::string& path, int64_t start,
                                        int64_t size, int64_t max_record_bytes) {
  char magic[4];
  PutU32(UpdateLog::kRecordMagic, magic);
  std::vector<char> buf(kChunkBytes + 3);
  const int64_t max_probe_bytes = ScanReadBudget(size - start);
  int64_t probed_bytes = 0;
  for (int64_t base = start; base + UpdateLog::kRecordHeaderBytes <= size; base += kChunkBytes) {
    absl::StatusOr<int64_t> got = PReadUpTo(fd, path, buf.data(), kChunkBytes + 3, base);
    if (!got.ok()) return got.status();
    for (int64_t i = 0; i + 4 <= *got && i < kChunkBytes; ++i) {
      if (std::memcmp(buf.data() + i, magic, 4) != 0) continue;
      absl::StatusOr<Probe> p = ProbeRecord(fd, path, base + i, size, max_record_bytes);
      if (!p.ok()) return p.status();
      if (p->verdict == Verdict::kValid) return base + i;
      probed_bytes += p->bytes_read;
      if (probed_bytes > max_probe_bytes) return kTooCostlyToTell;
    }
  }
  return kNoValidRecord;
}

absl::Status SyncParentDirectory(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir, "open");
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return IoError(dir, "fsync");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<UpdateLog>> UpdateLog::Open(const Options& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("UpdateLog: path is required");
  if (options.max_record_bytes < 1 ||
      options.max_record_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UpdateLog: max_record_bytes must be in [1, 4294967295], got ", options.max_record_bytes));
  }
  const int fd = open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(options.path, "open");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const bool held = errno == EWOULDBLOCK;
    absl::Status s = held ? absl::FailedPreconditionError(
                                absl::StrCat(options.path,
                                             ": locked by another update log (another rankd "
                                             "serving with the same --update_log_dir?)"))
                          : IoError(options.path, "flock");
    close(fd);
    return s;
  }
  std::unique_ptr<UpdateLog> log(new UpdateLog(options, fd));  // closes fd from here
  struct stat st;
  if (fstat(fd, &st) != 0) return IoError(options.path, "stat");
  if (absl::Status s = log->Recover(st.st_size); !s.ok()) return s;
  return log;
}

UpdateLog::~UpdateLog() { close(fd_); }  // releases the flock

absl::Status UpdateLog::WriteFileHeader() {
  char header[kFileHeaderBytes] = {};
  std::memcpy(header, kFileMagic, sizeof(kFileMagic));
  PutU32(kFormatVersion, header + 8);
  if (ftruncate(fd_, 0) != 0) return IoError(options_.path, "truncate");
  if (absl::Status s = PWriteAll(fd_, options_.path, header, sizeof(header), 0); !s.ok()) {
    return s;
  }
  if (fdatasync(fd_) != 0) return IoError(options_.path, "fdatasync");
  return SyncParentDirectory(options_.path);  // a new file's name is durable too
}

absl::Status UpdateLog::Recover(int64_t size) {
  const std::string& path = options_.path;
  char header[kFileHeaderBytes];
  absl::StatusOr<int64_t> got = PReadUpTo(fd_, path, header, std::min(size, kFileHeaderBytes), 0);
  if (!got.ok()) return got.status();
  const int64_t magic_bytes = std::min<int64_t>(*got, sizeof(kFileMagic));
  if (std::memcmp(header, kFileMagic, magic_bytes) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not an update log (no RKDUPLOG header); move it away"));
  }
  if (size < kFileHeaderBytes) {
    // Empty, or a crash while the header of a new file was written.
    if (size > 0) {
      recovery_.torn_offset = 0;
      recovery_.torn_bytes = size;
      recovery_.torn_reason = "incomplete file header";
    }
    if (absl::Status s = WriteFileHeader(); !s.ok()) return s;
    size = 0;
  } else if (GetU32(header + 8) != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": update log format version ",
                                                      GetU32(header + 8), " (this rankd reads ",
                                                      kFormatVersion, ")"));
  }
  int64_t offset = kFileHeaderBytes;
  int64_t records = 0;
  while (offset < size) {
    absl::StatusOr<Probe> p = ProbeRecord(fd_, path, offset, size, options_.max_record_bytes);
    if (!p.ok()) return p.status();
    if (p->verdict == Verdict::kValid) {
      ++records;
      offset += kRecordHeaderBytes + p->length;
      continue;
    }
    if (p->verdict == Verdict::kTooLarge) {
      return absl::DataLossError(absl::StrCat(path, ": record at offset ", offset, ": ",
                                              Describe(*p), " (", options_.max_record_bytes,
                                              "): the file is damaged"));
    }
    // A record whose header checks out owns the bytes its length claims:
    // they are its payload (a client's rows may hold any bytes, the bytes
    // of a valid record included), so a later record can start only after
    // them. With a bad header, any later byte may start one.
    const int64_t search_from =
        p->header_valid ? offset + kRecordHeaderBytes + p->length : offset + 1;
    absl::StatusOr<int64_t> next =
        FindValidRecord(fd_, path, search_from, size, options_.max_record_bytes);
    if (!next.ok()) return next.status();
    if (*next == kTooCostlyToTell) {
      return absl::DataLossError(absl::StrCat(
          path, ": ", Describe(*p), " at offset ", offset, ", and the ", size - search_from,
          " bytes after it hold so many overlapping record headers that checking them would read "
          "over ",
          ScanReadBudget(size - search_from),
          " bytes: the file is damaged (not a crash during an append); refusing to replay it"));
    }
    if (*next >= 0) {
      return absl::DataLossError(absl::StrCat(
          path, ": ", Describe(*p), " at offset ", offset,
          ", but a valid record follows at offset ", *next,
          ": the file is damaged (not a crash during an append); refusing to replay it"));
    }
    // A crash in the middle of the last append: that record was never
    // acknowledged. Cut it off.
    recovery_.torn_offset = offset;
    recovery_.torn_bytes = size - offset;
    recovery_.torn_reason = Describe(*p);
    if (ftruncate(fd_, offset) != 0) return IoError(path, "truncate the torn tail");
    if (fdatasync(fd_) != 0) return IoError(path, "fdatasync");
    break;
  }
  recovery_.records = records;
  recovery_.bytes = offset;
  absl::MutexLock lock(&mu_);
  end_ = offset;
  records_ = records;
  return absl::OkStatus();
}

absl::Status UpdateLog::Append(int64_t target_version, absl::string_view payload) {
  if (static_cast<int64_t>(payload.size()) > options_.max_record_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": a record of ", payload.size(),
                                                   " bytes; at most ", options_.max_record_bytes));
  }
  char header[kRecordHeaderBytes];
  EncodeRecordHeader(static_cast<uint32_t>(payload.size()), target_version, Crc32c(payload),
                     header);
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  const int64_t total = kRecordHeaderBytes + static_cast<int64_t>(payload.size());
  absl::Status s;
  // One pwritev (header and payload without copying); loops on short writes.
  for (int64_t done = 0; done < total && s.ok();) {
    iovec iov[2];
    int n = 0;
    if (done < kRecordHeaderBytes) {
      iov[n++] = {header + done, static_cast<size_t>(kRecordHeaderBytes - done)};
    }
    const int64_t in_payload = std::max<int64_t>(0, done - kRecordHeaderBytes);
    iov[n++] = {const_cast<char*>(payload.data()) + in_payload,
                payload.size() - static_cast<size_t>(in_payload)};
    const ssize_t w = pwritev(fd_, iov, n, end_ + done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) s = IoError(path(), absl::StrCat("append at offset ", end_ + done));
    if (w == 0) s = absl::InternalError(absl::StrCat(path(), ": append wrote nothing"));
    if (w > 0) done += w;
  }
  if (s.ok() && options_.sync && fdatasync(fd_) != 0) s = IoError(path(), "fdatasync");
  if (!s.ok()) {
    // Nothing of the record may stay: a later append would follow garbage.
    if (ftruncate(fd_, end_) != 0) {
      broken_ = IoError(path(), absl::StrCat("cannot cut a failed append back to offset ", end_,
                                             " (restart to recover the log)"));
    }
    return s;
  }
  end_ += total;
  ++records_;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> UpdateLog::ForEach(
    int64_t from, const std::function<absl::Status(const Record&)>& fn) const {
  absl::ReaderMutexLock readers(&readers_mu_);
  int64_t end = 0;
  {
    absl::MutexLock lock(&mu_);
    end = end_;
  }
  int64_t offset = from == 0 ? kFileHeaderBytes : from;
  if (offset < kFileHeaderBytes || offset > end) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": ForEach from offset ", from,
                                                   " outside the log [", kFileHeaderBytes, ", ",
                                                   end, "]"));
  }
  std::string payload;
  while (offset < end) {
    char h[kRecordHeaderBytes];
    absl::StatusOr<int64_t> got = PReadUpTo(fd_, path(), h, sizeof(h), offset);
    if (!got.ok()) return got.status();
    const uint32_t length = *got == kRecordHeaderBytes ? GetU32(h + 4) : 0;
    if (*got != kRecordHeaderBytes || GetU32(h) != kRecordMagic ||
        GetU32(h + 16) != Crc32c(absl::string_view(h, 16)) || length > options_.max_record_bytes ||
        offset + kRecordHeaderBytes + length > end) {
      return absl::DataLossError(
          absl::StrCat(path(), ": record at offset ", offset, ": bad header (changed on disk)"));
    }
    payload.resize(length);
    got = PReadUpTo(fd_, path(), payload.data(), length, offset + kRecordHeaderBytes);
    if (!got.ok()) return got.status();
    if (*got != length || Crc32c(payload) != GetU32(h + 20)) {
      return absl::DataLossError(absl::StrCat(path(), ": record at offset ", offset,
                                              ": payload CRC mismatch (changed on disk)"));
    }
    Record r;
    r.offset = offset;
    r.target_version = static_cast<int64_t>(GetU64(h + 8));
    r.payload = payload;
    if (absl::Status s = fn(r); !s.ok()) return s;
    offset += kRecordHeaderBytes + length;
  }
  return offset;
}

absl::Status UpdateLog::Truncate() {
  absl::WriterMutexLock readers(&readers_mu_);
  absl::MutexLock lock(&mu_);
  if (ftruncate(fd_, kFileHeaderBytes) != 0) return IoError(path(), "truncate");
  if (fsync(fd_) != 0) return IoError(path(), "fsync");
  end_ = kFileHeaderBytes;
  records_ = 0;
  broken_ = absl::OkStatus();  // whatever a failed append left is gone
  return absl::OkStatus();
}

int64_t UpdateLog::size_bytes() const {
  absl::MutexLock lock(&mu_);
  return end_;
}

int64_t UpdateLog::records() const {
  absl::MutexLock lock(&mu_);
  return records_;
}

}  // namespace rankd::engine
