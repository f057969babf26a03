// Fuzz target: an update log file (engine/updates/update_log.h) written by
// UpdateLog::Append and then damaged in arbitrary ways -> UpdateLog::Open's
// recovery, ForEach and a further Append.
//
// A byte fuzzer would rarely get past the records' CRC-32C checks, so the
// input is a script instead: the records are appended through the real
// Append (valid checksums), and only then is the file damaged.
//   byte 0: how many records to append (mod 9);
//   each record: a spec byte (bits 0-5: a length n; bit 6: the payload is
//     a whole valid record of the n bytes followed by the n bytes again, as
//     a client's rows may hold any bytes), the n bytes, a target version
//     byte (signed);
//   then damage operations to the end of the input, each an op byte and its
//   arguments: op % 3 == 0 overwrite (offset: 2 bytes, count byte mod 32,
//   the bytes), 1 truncate (offset: 2 bytes), 2 add bytes at the end (count
//   byte mod 64, the bytes). Offsets are taken modulo the file's size + 1.
// Missing bytes read as zero, so every input is a script.
//
// Checked beyond "no crash":
//   - Open fails only with FAILED_PRECONDITION (the file header) or
//     DATA_LOSS, and only when something was damaged;
//   - a log that opens is as long on disk as it says (a torn tail is cut
//     off), reads back through ForEach exactly the records recovery() counts, and every record
//     appended wholly before the first damaged byte is among them, unchanged, at its offset;
//   - when the only damage is a truncation, Open succeeds and keeps exactly
//     the records that end at or before the cut;
//   - an opened log takes another Append, reads it back last, and opens
//     again cleanly (no torn tail, the same records plus that one): a
//     recovered log is a valid log.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/updates/crc32c.h"
#include "engine/updates/update_log.h"

namespace {

using rankd::engine::UpdateLog;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

// The log's path in a private temporary directory (tmpfs where there is
// one: every execution writes and syncs the file), removed at exit.
const std::string& LogPath() {
  static const std::string* path = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string base = tmp != nullptr ? tmp : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    std::string templ = base + "/rankd_updlog_fuzz_XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) Fail("mkdtemp failed");
    std::atexit([] {
      unlink(LogPath().c_str());
      rmdir(LogPath().substr(0, LogPath().rfind('/')).c_str());
    });
    return new std::string(templ + "/fuzz.updlog");
  }();
  return *path;
}

// Reads the script; bytes past the end read as zero.
class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Low byte first (two statements: the operands of `|` are unsequenced).
  uint16_t U16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | (Byte() << 8));
  }
  std::string Bytes(size_t n) {
    std::string out(n, '\0');
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(Byte());
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The bytes of one record as the file format has them (update_log.h),
// written here independently of UpdateLog.
std::string EncodeRecord(int64_t target, const std::string& payload) {
  std::string h(UpdateLog::kRecordHeaderBytes, '\0');
  auto put = [&h](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) h[at + i] = static_cast<char>(v >> (8 * i));
  };
  put(0, UpdateLog::kRecordMagic, 4);
  put(4, payload.size(), 4);
  put(8, static_cast<uint64_t>(target), 8);
  put(16, rankd::engine::Crc32c(absl::string_view(h.data(), 16)), 4);
  put(20, rankd::engine::Crc32c(payload), 4);
  return h + payload;
}

struct Appended {
  int64_t offset = 0;
  int64_t end = 0;
  int64_t target = 0;
  std::string payload;
};

absl::StatusOr<std::unique_ptr<UpdateLog>> OpenLog() {
  UpdateLog::Options options;
  options.path = LogPath();
  options.sync = false;
  return UpdateLog::Open(options);
}

std::vector<Appended> AppendRecords(Script& script) {
  unlink(LogPath().c_str());
  absl::StatusOr<std::unique_ptr<UpdateLog>> opened = OpenLog();
  if (!opened.ok()) Fail("a new log does not open: " + opened.status().ToString());
  UpdateLog* log = opened->get();
  std::vector<Appended> records;
  const int n = script.Byte() % 9;
  for (int i = 0; i < n; ++i) {
    Appended r;
    const uint8_t spec = script.Byte();
    const std::string bytes = script.Bytes(spec % 64);
    r.target = static_cast<int8_t>(script.Byte());
    r.payload = (spec & 0x40) != 0 ? EncodeRecord(r.target + 1, bytes) + bytes : bytes;
    r.offset = log->size_bytes();
    absl::Status s = log->Append(r.target, r.payload);
    if (!s.ok()) Fail("Append failed: " + s.ToString());
    r.end = log->size_bytes();
    records.push_back(std::move(r));
  }
  return records;
}

// What the damage did: where its first byte is and whether it was only cuts.
struct Damage {
  int64_t first = INT64_MAX;  // lowest offset changed (INT64_MAX: none)
  bool only_truncation = true;
};

Damage DamageFile(Script& script, int64_t size) {
  const int fd = open(LogPath().c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) Fail("cannot open the log to damage it");
  Damage d;
  while (!script.done()) {
    const uint8_t op = script.Byte() % 3;
    if (op == 1) {  // truncate
      const int64_t at = script.U16() % (size + 1);
      if (ftruncate(fd, at) != 0) Fail("ftruncate failed");
      if (at < size) d.first = std::min(d.first, at);
      size = at;
      continue;
    }
    // 0: overwrite at an offset; 2: add bytes at the end.
    const int64_t at = op == 0 ? script.U16() % (size + 1) : size;
    const std::string bytes = script.Bytes(script.Byte() % (op == 0 ? 32 : 64));
    if (bytes.empty()) continue;
    if (pwrite(fd, bytes.data(), bytes.size(), at) != static_cast<ssize_t>(bytes.size())) {
      Fail("pwrite failed");
    }
    d.first = std::min(d.first, at);
    d.only_truncation = false;
    size = std::max<int64_t>(size, at + static_cast<int64_t>(bytes.size()));
  }
  close(fd);
  return d;
}

// Every record of the log, read through ForEach (which must succeed).
std::vector<Appended> ReadAll(const UpdateLog& log) {
  std::vector<Appended> out;
  absl::StatusOr<int64_t> end = log.ForEach(0, [&](const UpdateLog::Record& r) {
    Appended a;
    a.offset = r.offset;
    a.target = r.target_version;
    a.payload = std::string(r.payload);
    a.end = r.offset + UpdateLog::kRecordHeaderBytes + static_cast<int64_t>(r.payload.size());
    out.push_back(std::move(a));
    return absl::OkStatus();
  });
  if (!end.ok()) Fail("ForEach of an opened log failed: " + end.status().ToString());
  if (*end != log.size_bytes()) Fail("ForEach stopped before the log's end");
  return out;
}

bool Same(const Appended& a, const Appended& b) {
  return a.offset == b.offset && a.end == b.end && a.target == b.target && a.payload == b.payload;
}

// The log as opened: records() and ForEach agree, and every record
// appended wholly before the first damaged byte is read back unchanged.
std::vector<Appended> CheckOpened(const UpdateLog& log, const std::vector<Appended>& appended,
                                  const Damage& damage) {
  std::vector<Appended> read = ReadAll(log);
  struct stat st;
  if (stat(LogPath().c_str(), &st) != 0 || st.st_size != log.size_bytes()) {
    Fail("the file's size is not the recovered log's (a torn tail left on disk)");
  }
  if (static_cast<int64_t>(read.size()) != log.recovery().records ||
      log.records() != log.recovery().records) {
    Fail("ForEach, records() and recovery() disagree on the record count");
  }
  size_t intact = 0;
  while (intact < appended.size() && appended[intact].end <= damage.first) ++intact;
  if (read.size() < intact) Fail("recovery lost an undamaged record");
  for (size_t i = 0; i < intact; ++i) {
    if (!Same(read[i], appended[i])) Fail(absl::StrCat("undamaged record ", i, " changed"));
  }
  if (damage.only_truncation && read.size() != intact) {
    Fail("a truncated log kept a record past the cut");
  }
  return read;
}

// An opened log takes one more record and opens again cleanly with it.
void CheckAppendAndReopen(std::unique_ptr<UpdateLog> log, std::vector<Appended> read) {
  Appended extra;
  extra.offset = log->size_bytes();
  extra.target = 7;
  extra.payload = "after recovery";
  absl::Status s = log->Append(extra.target, extra.payload);
  if (!s.ok()) Fail("Append after recovery failed: " + s.ToString());
  extra.end = log->size_bytes();
  read.push_back(extra);
  log.reset();  // releases the lock
  absl::StatusOr<std::unique_ptr<UpdateLog>> again = OpenLog();
  if (!again.ok()) Fail("a recovered log does not open again: " + again.status().ToString());
  if ((*again)->recovery().torn_offset != -1) Fail("a recovered log has a torn tail again");
  const std::vector<Appended> reread = ReadAll(**again);
  if (reread.size() != read.size()) Fail("reopening changed the record count");
  for (size_t i = 0; i < read.size(); ++i) {
    if (!Same(reread[i], read[i])) Fail(absl::StrCat("reopening changed record ", i));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script script(data, size);
  const std::vector<Appended> appended = AppendRecords(script);
  const int64_t written = appended.empty() ? UpdateLog::kFileHeaderBytes : appended.back().end;
  const Damage damage = DamageFile(script, written);

  absl::StatusOr<std::unique_ptr<UpdateLog>> log = OpenLog();
  if (!log.ok()) {
    const absl::StatusCode code = log.status().code();
    if (code != absl::StatusCode::kFailedPrecondition && code != absl::StatusCode::kDataLoss) {
      Fail("Open failed with an unexpected code: " + log.status().ToString());
    }
    if (damage.first == INT64_MAX) Fail("an undamaged log does not open");
    if (damage.only_truncation) Fail("a truncated log does not open: " + log.status().ToString());
    return 0;
  }
  std::vector<Appended> read = CheckOpened(**log, appended, damage);
  CheckAppendAndReopen(*std::move(log), std::move(read));
  return 0;
}
