#include "engine/model/safetensors.h"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Exists(const std::string& path) {
  return std::ifstream(path).good();
}

// A file from raw parts: 8-byte little-endian header length, header, data.
std::string WriteRaw(const std::string& name, const std::string& header,
                     const std::string& data, int64_t claimed_len = -1) {
  const std::string path = TmpPath(name);
  std::string bytes(8, '\0');
  const uint64_t len = claimed_len >= 0 ? claimed_len : header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(len >> (8 * i));
  bytes += header;
  bytes += data;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The whole tensor, read with ReadTensor.
std::vector<uint8_t> Bytes(const SafetensorsFile& f, const TensorInfo& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.size_bytes));
  const absl::Status s = f.ReadTensor(t, 0, t.size_bytes, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::string OpenError(const std::string& path) {
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f =
      SafetensorsFile::Open(path);
  EXPECT_FALSE(f.ok()) << "opened " << path;
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument)
      << f.status();
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(path));
  return std::string(f.status().message());
}

TEST(SafetensorsTest, DtypeNamesAndSizes) {
  EXPECT_STREQ(TensorDtypeName(TensorDtype::kBF16), "BF16");
  EXPECT_STREQ(TensorDtypeName(TensorDtype::kI64), "I64");
  EXPECT_EQ(TensorDtypeBytes(TensorDtype::kF32), 4);
  EXPECT_EQ(TensorDtypeBytes(TensorDtype::kF16), 2);
  EXPECT_EQ(TensorDtypeBytes(TensorDtype::kI64), 8);
  EXPECT_EQ(TensorDtypeBytes(TensorDtype::kBool), 1);
}

TEST(SafetensorsTest, RoundTripWithDataFillAndMetadata) {
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, -6.5f};
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x7bff};  // 1, -2, 65504
  const std::vector<int64_t> keys = {-7, 0, 1LL << 40, 9};
  std::vector<TensorToWrite> tensors;
  // Odd-sized 2-byte tensor first: the writer must still align the others.
  tensors.push_back({"half", TensorDtype::kF16, {3}, h.data(), nullptr});
  tensors.push_back({"w", TensorDtype::kF32, {2, 3}, w.data(), nullptr});
  TensorToWrite filled{"filled", TensorDtype::kU8, {5}, nullptr, nullptr};
  filled.fill = [](int64_t offset, absl::Span<uint8_t> chunk) {
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = 100 + offset + i;
  };
  tensors.push_back(filled);
  tensors.push_back({"keys", TensorDtype::kI64, {4}, keys.data(), nullptr});
  tensors.push_back({"empty", TensorDtype::kF32, {0, 4}, nullptr, nullptr});

  const std::string path = TmpPath("round_trip.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, tensors, {{"format", "pt"}, {"model", "mini"}})
          .ok());
  EXPECT_FALSE(Exists(path + ".tmp"));

  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsFile& f = **file;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"},
                                                {"model", "mini"}}));

  const TensorInfo* tw = f.Find("w");
  ASSERT_NE(tw, nullptr);
  EXPECT_EQ(tw->dtype, TensorDtype::kF32);
  EXPECT_EQ(tw->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(tw->size_bytes, 24);
  EXPECT_EQ(tw->name, "w");
  EXPECT_EQ(std::memcmp(Bytes(f, *tw).data(), w.data(), 24), 0);

  const TensorInfo* th = f.Find("half");
  ASSERT_NE(th, nullptr);
  EXPECT_EQ(th->dtype, TensorDtype::kF16);
  EXPECT_EQ(std::memcmp(Bytes(f, *th).data(), h.data(), 6), 0);

  const TensorInfo* tk = f.Find("keys");
  ASSERT_NE(tk, nullptr);
  EXPECT_EQ(tk->dtype, TensorDtype::kI64);
  EXPECT_EQ(std::memcmp(Bytes(f, *tk).data(), keys.data(), 32), 0);

  const TensorInfo* tf = f.Find("filled");
  ASSERT_NE(tf, nullptr);
  ASSERT_EQ(tf->size_bytes, 5);
  const std::vector<uint8_t> filled_bytes = Bytes(f, *tf);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(filled_bytes[i], 100 + i);

  const TensorInfo* te = f.Find("empty");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(te->size_bytes, 0);
  EXPECT_TRUE(Bytes(f, *te).empty());

  EXPECT_EQ(f.Find("nope"), nullptr);

  // Every tensor starts at a file offset aligned to its element size.
  for (const auto& [name, info] : f.tensors()) {
    EXPECT_EQ(info.file_offset % TensorDtypeBytes(info.dtype), 0) << name;
  }
}

// The safetensors Python package rejects files whose tensors leave gaps or
// do not end at the end of the file; files rankd writes must load there.
TEST(SafetensorsTest, WrittenLayoutIsContiguousAndAligned) {
  const std::vector<uint8_t> b = {1, 2, 3};
  const std::vector<uint16_t> h = {1, 2, 3};
  const std::vector<float> f = {1, 2, 3};
  const std::vector<int64_t> k = {1};
  const std::string path = TmpPath("contiguous.safetensors");
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"b", TensorDtype::kU8, {3}, b.data(), nullptr},
                                {"h", TensorDtype::kBF16, {3}, h.data(), nullptr},
                                {"f", TensorDtype::kF32, {3}, f.data(), nullptr},
                                {"k", TensorDtype::kI64, {1}, k.data(), nullptr}})
                  .ok());
  const std::string bytes = ReadFile(path);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + len) % 8, 0u);
  const int64_t data_size = bytes.size() - 8 - len;
  EXPECT_EQ(data_size, 3 + 6 + 12 + 8);

  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Sorted by start offset, each tensor begins where the previous ended.
  std::vector<std::pair<int64_t, int64_t>> spans;
  const int64_t base = (*file)->Find("k")->file_offset;  // largest element: first
  EXPECT_EQ(base, 8 + static_cast<int64_t>(len));
  for (const auto& [name, info] : (*file)->tensors()) {
    spans.emplace_back(info.file_offset - base,
                       info.file_offset - base + info.size_bytes);
    EXPECT_EQ((info.file_offset - base) % TensorDtypeBytes(info.dtype), 0)
        << name;
  }
  std::sort(spans.begin(), spans.end());
  int64_t end = 0;
  for (const auto& [b_off, e_off] : spans) {
    EXPECT_EQ(b_off, end);
    end = e_off;
  }
  EXPECT_EQ(end, data_size);
}

TEST(SafetensorsTest, FillIsCalledInChunksOf64MiB) {
  const int64_t size = (int64_t{64} << 20) + 12;
  std::vector<std::pair<int64_t, int64_t>> calls;
  TensorToWrite t{"big", TensorDtype::kU8, {size}, nullptr, nullptr};
  t.fill = [&calls](int64_t offset, absl::Span<uint8_t> chunk) {
    calls.emplace_back(offset, chunk.size());
    for (size_t i = 0; i < chunk.size(); ++i) {
      chunk[i] = static_cast<uint8_t>((offset + i) * 7);
    }
  };
  const std::string path = TmpPath("big.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {t}).ok());
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{
                       {0, int64_t{64} << 20}, {int64_t{64} << 20, 12}}));
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* info = (*file)->Find("big");
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->size_bytes, size);
  const std::vector<uint8_t> bytes = Bytes(**file, *info);
  for (int64_t i : {int64_t{0}, int64_t{1}, (int64_t{64} << 20) - 1,
                    int64_t{64} << 20, size - 1}) {
    EXPECT_EQ(bytes[i], static_cast<uint8_t>(i * 7)) << i;
  }
  std::remove(path.c_str());
}

// ReadTensor reads any byte range of a tensor, and nothing outside it.
TEST(SafetensorsTest, ReadTensorRanges) {
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  const std::string path = TmpPath("ranges.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"u", TensorDtype::kU8, {1000},
                                       data.data(), nullptr}})
                  .ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo& t = *(*file)->Find("u");
  std::vector<uint8_t> part(100, 0xee);
  ASSERT_TRUE((*file)->ReadTensor(t, 900, 100, part.data()).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 900));
  EXPECT_TRUE((*file)->ReadTensor(t, 1000, 0, part.data()).ok());
  for (auto [offset, bytes] : {std::pair<int64_t, int64_t>{901, 100},
                               {-1, 10}, {0, -1}, {1001, 0}}) {
    const absl::Status s = (*file)->ReadTensor(t, offset, bytes, part.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << offset << " " << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat(path, ": tensor 'u': cannot read ")));
  }
}

// A file truncated between Open (header parsed) and a tensor read: an error
// naming the file and tensor, never a crash (no mapping to fault on).
TEST(SafetensorsTest, FileTruncatedAfterOpen) {
  const std::vector<float> a(64, 1.5f), b(64, -2.5f);
  const std::string path = TmpPath("truncated_later.safetensors");
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"a", TensorDtype::kF32, {64}, a.data(), nullptr},
                                {"b", TensorDtype::kF32, {64}, b.data(), nullptr}})
                  .ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo& ta = *(*file)->Find("a");
  const TensorInfo& tb = *(*file)->Find("b");
  const TensorInfo& last = ta.file_offset > tb.file_offset ? ta : tb;
  // Cut the last tensor in half.
  ASSERT_EQ(truncate(path.c_str(), last.file_offset + 128), 0);
  std::vector<float> out(64);
  absl::Status s = (*file)->ReadTensor(last, 0, 256, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat(path, ": tensor '", last.name,
                                     "': file changed or truncated while "
                                     "loading (got 128 of 256 bytes at file "
                                     "offset ",
                                     last.file_offset, ")")));
  // The part still in the file reads fine; an empty file fails every read.
  EXPECT_TRUE((*file)->ReadTensor(last, 0, 128, out.data()).ok());
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  for (const TensorInfo* t : {&ta, &tb}) {
    s = (*file)->ReadTensor(*t, 4, 8, out.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("tensor '", t->name,
                                       "': file changed or truncated while "
                                       "loading (got 0 of 8 bytes")));
  }
}

std::set<std::string> OpenDescriptors() {
  std::set<std::string> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(e.path().filename().string());
  }
  return fds;
}

// The file holds one descriptor, close-on-exec (a server that runs helper
// processes must not leak model files into them), closed with the object.
TEST(SafetensorsTest, OneCloseOnExecDescriptorClosedByTheDestructor) {
  const float x = 1;
  const std::string path = TmpPath("fd.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"x", TensorDtype::kF32, {1}, &x, nullptr}}).ok());
  const std::set<std::string> before = OpenDescriptors();
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::set<std::string> during = OpenDescriptors();
  std::vector<std::string> added;
  for (const std::string& fd : during) {
    if (before.count(fd) == 0) added.push_back(fd);
  }
  // The directory_iterator's own descriptor is closed by then.
  ASSERT_EQ(added.size(), 1u);
  const int fd = std::stoi(added[0]);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  file = absl::StatusOr<std::shared_ptr<const SafetensorsFile>>(nullptr);
  EXPECT_EQ(OpenDescriptors(), before);
  // Failed opens close theirs too.
  OpenError(WriteRaw("fd_bad.safetensors", "[1]", ""));
  EXPECT_EQ(OpenDescriptors(), before);
}

// A corrupt length is refused before anything is allocated for the header.
TEST(SafetensorsTest, HeaderOverTheFormatLimit) {
  const std::string path =
      WriteRaw("huge_header.safetensors", "{}", "", 150'000'000);
  ASSERT_EQ(truncate(path.c_str(), 200'000'000), 0);  // sparse: costs nothing
  EXPECT_THAT(OpenError(path),
              HasSubstr("header length 150000000 is over the format's limit "
                        "of 100000000 bytes"));
  std::remove(path.c_str());
}

TEST(SafetensorsTest, GetChecksDtypeAndShape) {
  const std::vector<float> w(6, 1.0f);
  const std::string path = TmpPath("get.safetensors");
  ASSERT_TRUE(WriteSafetensors(
                  path, {{"bot_l.0.weight", TensorDtype::kF32, {2, 3}, w.data(),
                          nullptr}})
                  .ok());
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsFile& f = **file;

  absl::StatusOr<const TensorInfo*> ok =
      f.Get("bot_l.0.weight", TensorDtype::kF32, {2, 3});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->size_bytes, 24);

  absl::StatusOr<const TensorInfo*> shape =
      f.Get("bot_l.0.weight", TensorDtype::kF32, {2, 4});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shape.status().message()),
              HasSubstr(absl::StrCat(path, ": tensor 'bot_l.0.weight': "
                                           "expected shape [2, 4], got [2, 3]")));

  absl::StatusOr<const TensorInfo*> rank =
      f.Get("bot_l.0.weight", TensorDtype::kF32, {6});
  EXPECT_THAT(std::string(rank.status().message()),
              HasSubstr("expected shape [6], got [2, 3]"));

  absl::StatusOr<const TensorInfo*> dtype =
      f.Get("bot_l.0.weight", TensorDtype::kF16, {2, 3});
  EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dtype.status().message()),
              HasSubstr("tensor 'bot_l.0.weight': expected dtype F16, got F32"));

  absl::StatusOr<const TensorInfo*> missing =
      f.Get("bot_l.2.weight", TensorDtype::kF32, {1, 2});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("tensor 'bot_l.2.weight' not found (expected F32 [1, 2])"));
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  const float x = 1;
  const std::string path = TmpPath("bad_write.safetensors");
  absl::Status dup = WriteSafetensors(
      path, {{"a", TensorDtype::kF32, {1}, &x, nullptr},
             {"a", TensorDtype::kF32, {1}, &x, nullptr}});
  EXPECT_THAT(std::string(dup.message()), HasSubstr("duplicate tensor name 'a'"));

  absl::Status no_data =
      WriteSafetensors(path, {{"a", TensorDtype::kF32, {1}, nullptr, nullptr}});
  EXPECT_THAT(std::string(no_data.message()),
              HasSubstr("tensor 'a': neither data nor fill given"));

  absl::Status negative =
      WriteSafetensors(path, {{"a", TensorDtype::kF32, {-1}, &x, nullptr}});
  EXPECT_THAT(std::string(negative.message()),
              HasSubstr("tensor 'a': negative dimension -1"));

  absl::Status reserved = WriteSafetensors(
      path, {{"__metadata__", TensorDtype::kF32, {1}, &x, nullptr}});
  EXPECT_THAT(std::string(reserved.message()),
              HasSubstr("invalid tensor name '__metadata__'"));
  EXPECT_FALSE(Exists(path));

  absl::Status no_dir = WriteSafetensors(
      TmpPath("no/such/dir/x.safetensors"),
      {{"a", TensorDtype::kF32, {1}, &x, nullptr}});
  EXPECT_FALSE(no_dir.ok());
  EXPECT_THAT(std::string(no_dir.message()), HasSubstr("no/such/dir"));
}

TEST(SafetensorsTest, WriterReplacesExistingFile) {
  const float a = 1, b = 2;
  const std::string path = TmpPath("replace.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"a", TensorDtype::kF32, {1}, &a, nullptr}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {{"b", TensorDtype::kF32, {1}, &b, nullptr}}).ok());
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Find("a"), nullptr);
  ASSERT_NE((*file)->Find("b"), nullptr);
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  const std::string path = TmpPath("does_not_exist.safetensors");
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f =
      SafetensorsFile::Open(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(path));
}

TEST(SafetensorsTest, TruncatedFile) {
  const std::string path = TmpPath("truncated.safetensors");
  std::ofstream(path, std::ios::binary) << std::string("\x10\0\0", 3);
  EXPECT_THAT(OpenError(path),
              HasSubstr("file is 3 bytes, shorter than the 8-byte header length"));
  std::ofstream(path, std::ios::binary | std::ios::trunc);  // 0 bytes
  EXPECT_THAT(OpenError(path), HasSubstr("file is 0 bytes"));
}

TEST(SafetensorsTest, HeaderLengthBeyondFile) {
  const std::string path = WriteRaw("long_header.safetensors", "{}", "", 1000);
  EXPECT_THAT(OpenError(path),
              HasSubstr("header length 1000 is beyond the file: only 2 bytes"));
}

TEST(SafetensorsTest, InvalidJson) {
  EXPECT_THAT(OpenError(WriteRaw("bad_json.safetensors", "{\"a\": [1,", "")),
              HasSubstr("header is not valid JSON"));
  EXPECT_THAT(OpenError(WriteRaw("array.safetensors", "[1, 2]", "")),
              HasSubstr("header must be a JSON object, got array"));
}

TEST(SafetensorsTest, UnknownDtype) {
  const std::string path = WriteRaw(
      "dtype.safetensors",
      R"({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})",
      "xx");
  EXPECT_THAT(OpenError(path), HasSubstr("tensor 'a': unknown dtype \"F8_E4M3\""));
}

TEST(SafetensorsTest, NegativeShape) {
  const std::string path = WriteRaw(
      "neg.safetensors",
      R"({"a": {"dtype": "F32", "shape": [-2, 2], "data_offsets": [0, 16]}})",
      std::string(16, '\0'));
  EXPECT_THAT(OpenError(path), HasSubstr("tensor 'a': negative shape value -2"));
}

TEST(SafetensorsTest, NonIntegerShape) {
  const std::string path = WriteRaw(
      "float_shape.safetensors",
      R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
      std::string(4, '\0'));
  EXPECT_THAT(OpenError(path), HasSubstr("tensor 'a': \"shape\" must hold integers"));
}

TEST(SafetensorsTest, ByteSizeMismatch) {
  const std::string path = WriteRaw(
      "size.safetensors",
      R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})",
      std::string(16, '\0'));
  EXPECT_THAT(OpenError(path),
              HasSubstr("tensor 'a': data_offsets [0, 12] span 12 bytes, but F32 "
                        "[2, 2] needs 16 bytes"));
}

TEST(SafetensorsTest, HugeShapeDoesNotOverflow) {
  const std::string path = WriteRaw(
      "huge.safetensors",
      R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})",
      std::string(16, '\0'));
  EXPECT_THAT(OpenError(path), HasSubstr("needs more than 2^63 bytes"));
}

TEST(SafetensorsTest, OffsetsOutsideDataSection) {
  const std::string path = WriteRaw(
      "oob.safetensors",
      R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
      std::string(16, '\0'));
  EXPECT_THAT(OpenError(path),
              HasSubstr("tensor 'a': data_offsets [8, 24] end beyond the data "
                        "section of 16 bytes"));
  EXPECT_THAT(
      OpenError(WriteRaw(
          "reversed.safetensors",
          R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})",
          std::string(16, '\0'))),
      HasSubstr("data_offsets must be [begin, end] with begin <= end, got [8, 4]"));
}

TEST(SafetensorsTest, OverlappingTensors) {
  const std::string path = WriteRaw(
      "overlap.safetensors",
      R"({"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
          "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
          "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
      std::string(24, '\0'));
  EXPECT_THAT(OpenError(path),
              HasSubstr("tensors 'a' (bytes 0..16) and 'b' (bytes 8..24) overlap"));
}

TEST(SafetensorsTest, NonObjectEntry) {
  const std::string path =
      WriteRaw("entry.safetensors", R"({"a": [1, 2, 3]})", "");
  EXPECT_THAT(OpenError(path), HasSubstr("tensor 'a': entry must be an object"));
  EXPECT_THAT(
      OpenError(WriteRaw("no_offsets.safetensors",
                         R"({"a": {"dtype": "F32", "shape": [1]}})", "")),
      HasSubstr("tensor 'a': missing \"data_offsets\""));
}

TEST(SafetensorsTest, Metadata) {
  EXPECT_THAT(
      OpenError(WriteRaw("meta.safetensors",
                         R"({"__metadata__": {"format": 1}})", "")),
      HasSubstr("\"__metadata__\" value of \"format\" must be a string, got 1"));
  EXPECT_THAT(OpenError(WriteRaw("meta2.safetensors",
                                 R"({"__metadata__": "pt"})", "")),
              HasSubstr("\"__metadata__\" must be an object"));
  // Headers written by other tools may be unpadded; gaps are tolerated.
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f =
      SafetensorsFile::Open(WriteRaw(
          "meta_ok.safetensors",
          R"({"__metadata__": {"format": "pt"},
              "x": {"dtype": "I8", "shape": [2], "data_offsets": [1, 3]}})",
          "\x01\x02\x03"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ(Bytes(**f, *(*f)->Find("x"))[0], 2);
}

// Issue 17, defect 2: an array nested 100,000 deep in a 200 KB header
// crashed the process (the error path dumped the value recursively and
// overflowed the stack). It is refused before parsing, naming the file and
// the depth limit.
TEST(SafetensorsTest, DeeplyNestedHeaderIsRefused) {
  constexpr int kDepth = 100'000;
  const std::string deep =
      absl::StrCat(std::string(kDepth, '['), std::string(kDepth, ']'));
  const std::string path = WriteRaw("deep.safetensors",
                                    absl::StrCat(R"({"a": )", deep, "}"), "");
  const std::string msg = OpenError(path);
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("more than ", kSafetensorsMaxJsonDepth,
                                          " levels deep")));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("the limit is ", kSafetensorsMaxJsonDepth)));
  EXPECT_LT(msg.size(), path.size() + 300) << msg;

  // Deep in the metadata, and deep objects, too.
  std::string objects;
  for (int i = 0; i < kDepth; ++i) objects += R"({"k":)";
  objects += "1";
  objects += std::string(kDepth, '}');
  EXPECT_THAT(OpenError(WriteRaw("deep_meta.safetensors",
                                 absl::StrCat(R"({"__metadata__": )", objects, "}"),
                                 "")),
              HasSubstr("levels deep"));
}

TEST(SafetensorsTest, NestingUpToTheLimitReachesTheEntryChecks) {
  // The header object is level 1: the value may nest limit - 1 more.
  const int inner = kSafetensorsMaxJsonDepth - 1;
  const std::string value =
      absl::StrCat(std::string(inner, '['), std::string(inner, ']'));
  const std::string msg = OpenError(
      WriteRaw("limit.safetensors", absl::StrCat(R"({"a": )", value, "}"), ""));
  EXPECT_THAT(msg, HasSubstr("tensor 'a': entry must be an object"));
  EXPECT_THAT(msg, Not(HasSubstr("levels deep")));
}

TEST(SafetensorsTest, BracketsInsideStringsAreNotNesting) {
  // 1000 brackets, an escaped quote and an escaped backslash in strings.
  const std::string text = absl::StrCat(std::string(1000, '['), R"(\"\\)",
                                        std::string(1000, '{'));
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> f =
      SafetensorsFile::Open(WriteRaw(
          "brackets.safetensors",
          absl::StrCat(R"({"__metadata__": {"note": ")", text, R"("},
              "x": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}})"),
          "\x07"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->metadata().at("note").size(), 2002u);
}

// Names and values quoted in errors are cut to kMaxQuotedBytes (plus the
// total size), so a megabyte-long name or value gives a short message.
TEST(SafetensorsTest, QuotedTextInErrorsIsBounded) {
  std::string ints = "[0";
  for (int i = 1; i < 100'000; ++i) absl::StrAppend(&ints, ",", i);
  ints += "]";
  std::string msg = OpenError(
      WriteRaw("long_value.safetensors", absl::StrCat(R"({"a": )", ints, "}"), ""));
  EXPECT_THAT(msg, HasSubstr("entry must be an object {dtype, shape, data_offsets}, "
                             "got [0,1,2,3,"));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("... (", ints.size(), " bytes)")));
  EXPECT_LT(msg.size(), 600u) << msg.substr(0, 1000);

  const std::string name(1 << 20, 'n');
  msg = OpenError(WriteRaw(
      "long_name.safetensors",
      absl::StrCat(R"({")", name, R"(": {"dtype": "X", "shape": [1], "data_offsets": [0, 1]}})"),
      "x"));
  EXPECT_THAT(msg, HasSubstr("unknown dtype"));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("... (", name.size(), " bytes)")));
  EXPECT_LT(msg.size(), 600u) << msg.substr(0, 1000);

  const std::string dtype(1 << 20, 'D');
  msg = OpenError(WriteRaw(
      "long_dtype.safetensors",
      absl::StrCat(R"({"a": {"dtype": ")", dtype, R"(", "shape": [1], "data_offsets": [0, 1]}})"),
      "x"));
  EXPECT_LT(msg.size(), 600u) << msg.substr(0, 1000);

  // The JSON parser's own message quotes the last token (here a 1 MiB
  // unterminated string).
  msg = OpenError(WriteRaw("long_token.safetensors",
                           absl::StrCat(R"({"a": ")", std::string(1 << 20, 's')), ""));
  EXPECT_THAT(msg, HasSubstr("header is not valid JSON"));
  EXPECT_LT(msg.size(), 800u) << msg.substr(0, 1000);

  msg = OpenError(WriteRaw(
      "long_meta.safetensors",
      absl::StrCat(R"({"__metadata__": {")", name, R"(": )", ints, "}}"), ""));
  EXPECT_THAT(msg, HasSubstr("must be a string, got [0,1,2"));
  EXPECT_LT(msg.size(), 800u) << msg.substr(0, 1000);
}

// Issue 17, defect 4: a FIFO as the weights file blocked open() forever
// (the test's timeout catches a regression); devices and directories are
// refused the same way, naming the file and its type.
TEST(SafetensorsTest, FifoIsRefusedWithoutBlocking) {
  const std::string path = TmpPath("fifo.safetensors");
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0) << strerror(errno);
  EXPECT_THAT(OpenError(path),
              HasSubstr(absl::StrCat(path, ": is a FIFO (named pipe), not a regular file")));
}

TEST(SafetensorsTest, DevicesAndDirectoriesAreRefused) {
  EXPECT_THAT(OpenError("/dev/zero"),
              HasSubstr("/dev/zero: is a character device, not a regular file"));
  const std::string dir = TmpPath("dir.safetensors");
  std::filesystem::create_directories(dir);
  EXPECT_THAT(OpenError(dir), HasSubstr("is a directory, not a regular file"));
  // A symlink to a regular file is fine (model stores use them).
  const std::string target = WriteRaw(
      "link_target.safetensors",
      R"({"x": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}})", "\x01");
  const std::string link = TmpPath("link.safetensors");
  std::remove(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_TRUE(SafetensorsFile::Open(link).ok());
}

}  // namespace
}  // namespace rankd::engine
