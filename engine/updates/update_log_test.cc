#include "engine/updates/update_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/updates/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;

// (target version, payload) of every record, read back with ForEach.
using Entries = std::vector<std::pair<int64_t, std::string>>;

Entries ReadAll(const UpdateLog& log) {
  Entries out;
  absl::StatusOr<int64_t> end = log.ForEach(0, [&](const UpdateLog::Record& r) {
    out.emplace_back(r.target_version, std::string(r.payload));
    return absl::OkStatus();
  });
  EXPECT_TRUE(end.ok()) << end.status();
  return out;
}

std::string Payload(int i, size_t size) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>((i * 131 + k * 7) & 0xFF);
  return s;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

void AppendBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f << bytes;
}

// A record header as UpdateLog writes it (for hand-made damage).
std::string RecordHeader(uint32_t length, int64_t target, uint32_t payload_crc) {
  std::string h(UpdateLog::kRecordHeaderBytes, '\0');
  auto put32 = [&h](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) h[at + i] = static_cast<char>(v >> (8 * i));
  };
  put32(0, UpdateLog::kRecordMagic);
  put32(4, length);
  for (int i = 0; i < 8; ++i)
    h[8 + i] = static_cast<char>(static_cast<uint64_t>(target) >> (8 * i));
  put32(16, Crc32c(absl::string_view(h.data(), 16)));
  put32(20, payload_crc);
  return h;
}

class UpdateLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "/", info->name(), ".updlog");
    std::remove(path_.c_str());
  }

  std::unique_ptr<UpdateLog> Open(int64_t max_record_bytes = int64_t{1} << 30) {
    UpdateLog::Options o;
    o.path = path_;
    o.max_record_bytes = max_record_bytes;
    absl::StatusOr<std::unique_ptr<UpdateLog>> log = UpdateLog::Open(o);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? *std::move(log) : nullptr;
  }
  absl::Status OpenError() {
    UpdateLog::Options o;
    o.path = path_;
    absl::StatusOr<std::unique_ptr<UpdateLog>> log = UpdateLog::Open(o);
    return log.status();
  }

  // Three records (targets 0, 2, 0; the second with an empty payload);
  // returns the offset of each.
  std::vector<int64_t> WriteThree() {
    std::unique_ptr<UpdateLog> log = Open();
    std::vector<int64_t> offsets;
    const std::vector<std::pair<int64_t, std::string>> want = {
        {0, Payload(1, 1000)}, {2, ""}, {0, Payload(3, 70000)}};
    for (const auto& [target, payload] : want) {
      offsets.push_back(log->size_bytes());
      EXPECT_TRUE(log->Append(target, payload).ok());
    }
    return offsets;
  }

  std::string path_;
};

TEST(Crc32cTest, KnownValuesAndChaining) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  const std::string text = Payload(5, 1001);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, size_t{500}, text.size()}) {
    EXPECT_EQ(Crc32c(text.substr(cut), Crc32c(text.substr(0, cut))), Crc32c(text)) << cut;
  }
}

TEST_F(UpdateLogTest, AppendReadRoundTripAndReopen) {
  std::unique_ptr<UpdateLog> log = Open();
  EXPECT_EQ(log->size_bytes(), UpdateLog::kFileHeaderBytes);
  EXPECT_EQ(log->recovery().torn_offset, -1);
  const Entries want = {{0, Payload(1, 1000)}, {7, ""}, {-1, Payload(2, 3 << 20)}, {0, "x"}};
  for (const auto& [target, payload] : want) ASSERT_TRUE(log->Append(target, payload).ok());
  EXPECT_EQ(log->records(), 4);
  EXPECT_EQ(ReadAll(*log), want);
  const int64_t size = log->size_bytes();
  EXPECT_EQ(FileSize(path_), size);
  log.reset();

  log = Open();
  EXPECT_EQ(log->recovery().records, 4);
  EXPECT_EQ(log->recovery().torn_offset, -1);
  EXPECT_EQ(log->size_bytes(), size);
  EXPECT_EQ(ReadAll(*log), want);
}

TEST_F(UpdateLogTest, ForEachFromAnEarlierEndReadsOnlyWhatFollows) {
  std::unique_ptr<UpdateLog> log = Open();
  ASSERT_TRUE(log->Append(0, "a").ok());
  ASSERT_TRUE(log->Append(3, "b").ok());
  std::vector<std::string> seen;
  auto collect = [&seen](const UpdateLog::Record& r) {
    seen.emplace_back(r.payload);
    return absl::OkStatus();
  };
  absl::StatusOr<int64_t> end = log->ForEach(0, collect);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, log->size_bytes());
  ASSERT_TRUE(log->Append(0, "c").ok());
  absl::StatusOr<int64_t> end2 = log->ForEach(*end, collect);
  ASSERT_TRUE(end2.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*end2, log->size_bytes());
  // The callback's error stops the walk and comes back.
  absl::StatusOr<int64_t> stopped =
      log->ForEach(0, [](const UpdateLog::Record&) { return absl::CancelledError("enough"); });
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(log->ForEach(*end2 + 1, collect).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(UpdateLogTest, EmptyFileGetsAHeader) {
  WriteFile(path_, "");
  std::unique_ptr<UpdateLog> log = Open();
  EXPECT_EQ(log->recovery().records, 0);
  EXPECT_EQ(log->recovery().torn_offset, -1);
  EXPECT_TRUE(ReadAll(*log).empty());
  EXPECT_EQ(FileSize(path_), UpdateLog::kFileHeaderBytes);
  ASSERT_TRUE(log->Append(0, "p").ok());
  log.reset();
  EXPECT_EQ(Open()->recovery().records, 1);
}

TEST_F(UpdateLogTest, TornFileHeaderIsRewritten) {
  WriteFile(path_, "RKDUP");  // a crash while a new log's header was written
  std::unique_ptr<UpdateLog> log = Open();
  EXPECT_EQ(log->recovery().torn_offset, 0);
  EXPECT_EQ(log->recovery().torn_bytes, 5);
  EXPECT_EQ(FileSize(path_), UpdateLog::kFileHeaderBytes);
}

TEST_F(UpdateLogTest, OtherFilesAreRefused) {
  WriteFile(path_, "{\"not\": \"a log\"}\n");
  absl::Status s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(path_));
  std::string future = std::string("RKDUPLOG") + std::string("\x02\0\0\0\0\0\0\0", 8);
  WriteFile(path_, future);
  s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("format version 2"));
}

// Each way the last append can be cut short by a crash: the tail is cut
// off, the records before it stay, and appends go on after them.
TEST_F(UpdateLogTest, TornTailIsTruncated) {
  const std::string good = [&] {
    WriteThree();
    return ReadFile(path_);
  }();
  const int64_t end = static_cast<int64_t>(good.size());
  const std::string payload = Payload(9, 5000);
  const std::string header = RecordHeader(payload.size(), 0, Crc32c(payload));
  std::string bad_crc = header + payload;
  bad_crc[header.size() + 100] ^= 0x10;
  const std::vector<std::pair<std::string, std::string>> tails = {
      {"part of a header", header.substr(0, 10)},
      {"a header without its payload", header},
      {"half the payload", header + payload.substr(0, 2500)},
      {"a payload CRC mismatch", bad_crc},
      {"zeros (size grew, data never written)", std::string(4096, '\0')},
      {"a huge length in a header whose CRC does not match",
       [] {
         std::string h = RecordHeader(0xFFFFFFF0u, 0, 0);
         h[17] ^= 1;
         return h + "garbage";
       }()},
  };
  for (const auto& [what, tail] : tails) {
    SCOPED_TRACE(what);
    WriteFile(path_, good + tail);
    std::unique_ptr<UpdateLog> log = Open();
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->recovery().records, 3);
    EXPECT_EQ(log->recovery().torn_offset, end);
    EXPECT_EQ(log->recovery().torn_bytes, static_cast<int64_t>(tail.size()));
    EXPECT_FALSE(log->recovery().torn_reason.empty());
    EXPECT_EQ(FileSize(path_), end);
    ASSERT_TRUE(log->Append(4, "after").ok());
    log.reset();
    log = Open();
    EXPECT_EQ(log->recovery().torn_offset, -1);
    const Entries entries = ReadAll(*log);
    ASSERT_EQ(entries.size(), 4u);
    EXPECT_EQ(entries[3], (std::pair<int64_t, std::string>{4, "after"}));
  }
}

// A torn last record whose payload holds the bytes of a whole valid record
// (a client's raw rows may hold any bytes): its header is valid, so what
// lies inside its claimed length is payload, not a record that follows, and
// the tail is cut as torn instead of refused as damage.
TEST_F(UpdateLogTest, TornRecordHoldingARecordInItsPayloadIsTruncated) {
  WriteThree();
  const int64_t end = FileSize(path_);
  const std::string inner_payload = "looks like a record";
  const std::string inner =
      RecordHeader(inner_payload.size(), 5, Crc32c(inner_payload)) + inner_payload;
  const std::string payload = Payload(7, 100) + inner + Payload(8, 100);
  const std::string header = RecordHeader(payload.size(), 0, Crc32c(payload));
  // Torn after the inner record, and complete but with a payload CRC mismatch.
  std::string bad_crc = header + payload;
  bad_crc[header.size() + 10] ^= 0x10;
  for (const std::string& tail : {header + payload.substr(0, 100 + inner.size() + 10), bad_crc}) {
    WriteFile(path_, ReadFile(path_).substr(0, end) + tail);
    std::unique_ptr<UpdateLog> log = Open();
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->recovery().records, 3);
    EXPECT_EQ(log->recovery().torn_offset, end);
    EXPECT_EQ(FileSize(path_), end);
  }
  // A valid record after such a bad one is still damage, not a torn tail.
  WriteFile(path_, ReadFile(path_).substr(0, end) + bad_crc + inner);
  absl::Status s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("offset ", end)));
}

// A bad record followed by many overlapping record headers, each valid
// and claiming the bytes up to the file's end, with a payload CRC that does
// not match: checking them all would read the tail once per header (time
// quadratic in the file's size). Open refuses the file as damaged once the
// checks read over their budget; a tail with a few such headers is still
// checked in full and cut as torn.
TEST_F(UpdateLogTest, TailForgedWithManyRecordHeadersIsRefused) {
  WriteThree();
  const int64_t end = FileSize(path_);
  auto forged_tail = [](int headers, int64_t spacing) {
    // Starts with a bad record header ("xxxx" is no magic): the scan for a
    // valid record after it starts at its next byte.
    std::string tail(static_cast<size_t>(headers * spacing), 'x');
    for (int k = 1; k < headers; ++k) {
      const size_t at = static_cast<size_t>(k * spacing);
      const uint32_t length =
          static_cast<uint32_t>(tail.size() - at - UpdateLog::kRecordHeaderBytes);
      tail.replace(at, UpdateLog::kRecordHeaderBytes, RecordHeader(length, 0, 12345));
    }
    return tail;
  };
  // 4 headers: the checks read ~6 MiB, within the budget: a torn tail.
  WriteFile(path_, ReadFile(path_).substr(0, end) + forged_tail(4, 1 << 20));
  {
    std::unique_ptr<UpdateLog> log = Open();
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->recovery().records, 3);
    EXPECT_EQ(log->recovery().torn_offset, end);
  }
  // 512 headers 2 KiB apart: ~256 MiB of checks against a budget of
  // 8 x 1 MiB + 64 MiB.
  const std::string bytes = ReadFile(path_).substr(0, end) + forged_tail(512, 2048);
  WriteFile(path_, bytes);
  absl::Status s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("offset ", end)));
  EXPECT_THAT(s.message(), HasSubstr("overlapping record headers"));
  EXPECT_EQ(ReadFile(path_), bytes) << "a refused log must stay as it was";
}

// Damage with a valid record after it is not a crash's doing: refused,
// naming the file and the offset, nothing skipped and nothing truncated.
TEST_F(UpdateLogTest, CorruptMiddleIsRefused) {
  const std::vector<int64_t> offsets = WriteThree();
  const std::string good = ReadFile(path_);
  struct Damage {
    std::string what;
    int64_t at;  // byte flipped
    int64_t record;
  };
  const std::vector<Damage> damages = {
      {"first record's payload", offsets[0] + UpdateLog::kRecordHeaderBytes + 10, offsets[0]},
      {"second record's magic", offsets[1], offsets[1]},
      {"second record's length", offsets[1] + 5, offsets[1]},
      {"second record's target", offsets[1] + 8, offsets[1]},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    std::string bytes = good;
    bytes[d.at] ^= 0x40;
    WriteFile(path_, bytes);
    absl::Status s = OpenError();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr(path_));
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("offset ", d.record)));
    EXPECT_EQ(ReadFile(path_), bytes) << "a refused log must stay as it was";
  }
}

// A length field over max_record_bytes with a valid header CRC: refused
// before anything of that size is allocated (the record is never read).
TEST_F(UpdateLogTest, HugeLengthFieldIsRefused) {
  WriteThree();
  const int64_t end = FileSize(path_);
  AppendBytes(path_, RecordHeader(0xFFFFFFFFu, 0, 0) + "tail");
  absl::Status s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("offset ", end)));
  EXPECT_THAT(s.message(), HasSubstr("4294967295"));

  // The limit is an option: a smaller one refuses a record of 70000 bytes.
  WriteFile(path_, "");
  WriteThree();
  UpdateLog::Options o;
  o.path = path_;
  o.max_record_bytes = 4096;
  absl::StatusOr<std::unique_ptr<UpdateLog>> small = UpdateLog::Open(o);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kDataLoss) << small.status();
  // Appends over the limit are refused and leave nothing behind.
  std::remove(path_.c_str());
  small = UpdateLog::Open(o);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)->Append(0, std::string(4097, 'x')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*small)->size_bytes(), UpdateLog::kFileHeaderBytes);
}

TEST_F(UpdateLogTest, DamageAfterOpenIsDataLossOnRead) {
  const std::vector<int64_t> offsets = WriteThree();
  std::unique_ptr<UpdateLog> log = Open();
  std::string bytes = ReadFile(path_);
  bytes[offsets[2] + UpdateLog::kRecordHeaderBytes + 1] ^= 1;
  const int fd = open(path_.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  close(fd);
  int seen = 0;
  absl::StatusOr<int64_t> end = log->ForEach(0, [&seen](const UpdateLog::Record&) {
    ++seen;
    return absl::OkStatus();
  });
  EXPECT_EQ(end.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(end.status().message(), HasSubstr(absl::StrCat("offset ", offsets[2])));
  EXPECT_EQ(seen, 2);
}

TEST_F(UpdateLogTest, TruncateDropsEveryRecordDurably) {
  WriteThree();
  std::unique_ptr<UpdateLog> log = Open();
  EXPECT_EQ(log->records(), 3);
  ASSERT_TRUE(log->Truncate().ok());
  EXPECT_EQ(log->records(), 0);
  EXPECT_EQ(log->size_bytes(), UpdateLog::kFileHeaderBytes);
  EXPECT_EQ(FileSize(path_), UpdateLog::kFileHeaderBytes);
  EXPECT_TRUE(ReadAll(*log).empty());
  ASSERT_TRUE(log->Append(5, "new").ok());
  log.reset();
  log = Open();
  EXPECT_EQ(ReadAll(*log), (Entries{{5, "new"}}));
}

TEST_F(UpdateLogTest, SecondOpenOfTheSameFileIsRefused) {
  std::unique_ptr<UpdateLog> log = Open();
  absl::Status s = OpenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("locked"));
  log.reset();
  EXPECT_TRUE(OpenError().ok());
}

TEST_F(UpdateLogTest, BadOptionsAndPaths) {
  UpdateLog::Options o;
  EXPECT_EQ(UpdateLog::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.path = path_;
  o.max_record_bytes = int64_t{1} << 32;
  EXPECT_EQ(UpdateLog::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_record_bytes = 1024;
  o.path = "/nonexistent-dir/x.updlog";
  absl::Status s = UpdateLog::Open(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir/x.updlog"));
}

}  // namespace
}  // namespace rankd::engine
