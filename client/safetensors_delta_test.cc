// The delta file reader: valid files of every row dtype, and hostile or
// malformed ones, each rejected with the tensor and the reason (never a
// crash).
#include "client/safetensors_delta.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string U64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

// A file of `header` JSON and `data_bytes` bytes of data.
std::string File(const std::string& header, size_t data_bytes) {
  return U64(header.size()) + header + std::string(data_bytes, '\x01');
}

std::string Error(const std::string& bytes) {
  auto parsed = ParseDelta(bytes, "d.safetensors");
  EXPECT_FALSE(parsed.ok());
  if (!parsed.ok()) {
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  }
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(SafetensorsDeltaTest, RoundTripsTablesOfEveryDtype) {
  TableDelta user;
  user.table = "t_user";
  user.ids = {3, 1, 2};
  user.dim = 2;
  user.dtype = RowDtype::kF32;
  const float values[] = {1, 2, 3, 4, 5, 6};
  user.row_bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  TableDelta item;
  item.table = "emb.t_item";  // dots in a table name: the last one splits
  item.ids = {10};
  item.dim = 3;
  item.dtype = RowDtype::kBF16;
  item.row_bytes = "abcdef";
  item.delete_keys = {7, 8};
  TableDelta gone;
  gone.table = "t_half";
  gone.dtype = RowDtype::kF16;
  gone.dim = 1;
  gone.ids = {5};
  gone.row_bytes = "xy";
  auto parsed = ParseDelta(WriteDelta({user, item, gone}), "d");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 3u);
  const TableDelta& i = (*parsed)[0];  // by name
  EXPECT_EQ(i.table, "emb.t_item");
  EXPECT_EQ(i.dtype, RowDtype::kBF16);
  EXPECT_EQ(i.dim, 3);
  EXPECT_EQ(i.row_bytes, "abcdef");
  EXPECT_THAT(i.delete_keys, ElementsAre(7, 8));
  EXPECT_EQ((*parsed)[1].dtype, RowDtype::kF16);
  const TableDelta& u = (*parsed)[2];
  EXPECT_EQ(u.table, "t_user");
  EXPECT_THAT(u.ids, ElementsAre(3, 1, 2));
  EXPECT_EQ(u.row_bytes, user.row_bytes);
  EXPECT_EQ(u.dtype, RowDtype::kF32);
}

TEST(SafetensorsDeltaTest, DeleteOnlyTableAndMetadata) {
  auto parsed = ParseDelta(
      File(R"({"__metadata__":{"step":"7"},"t.delete":{"dtype":"I64","shape":[2],)"
           R"("data_offsets":[0,16]}})",
           16),
      "d");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)[0].delete_keys.size(), 2u);
  EXPECT_TRUE((*parsed)[0].ids.empty());
}

TEST(SafetensorsDeltaTest, HeaderErrors) {
  EXPECT_THAT(Error("abc"), HasSubstr("shorter than its header length"));
  EXPECT_THAT(Error(U64(uint64_t{1} << 62) + "{}"), HasSubstr("over the limit"));
  EXPECT_THAT(Error(U64(~uint64_t{0}) + "{}"), HasSubstr("over the limit"));
  EXPECT_THAT(Error(U64(100) + "{}"), HasSubstr("runs past the end of the file"));
  EXPECT_THAT(Error(File("{\"a\":", 0)), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(Error(File("[1, 2]", 0)), HasSubstr("header is not a JSON object"));
  EXPECT_THAT(Error(File("{}", 0)), HasSubstr("no tables"));
  EXPECT_THAT(Error(File(std::string(100000, '[') + std::string(100000, ']'), 0)),
              HasSubstr("nested deeper"));
  EXPECT_THAT(Error(File(R"({"__metadata__": 3})", 0)), HasSubstr("__metadata__"));
}

TEST(SafetensorsDeltaTest, TensorErrorsNameTheTensor) {
  struct Case {
    std::string header;
    size_t data;
    std::string want;
  };
  const std::vector<Case> cases = {
      {R"({"t.ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16,
       R"(tensor "t.ids": no "t.rows" for it)"},
      {R"({"t.rows":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]}})", 8,
       R"(tensor "t.rows": no "t.ids" for it)"},
      {R"({"t.ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
       R"("t.rows":{"dtype":"F32","shape":[3,1],"data_offsets":[16,28]}})",
       28, R"(tensor "t.rows": [3, 1] rows for 2 ids in "t.ids")"},
      {R"({"t.ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8,
       R"(tensor "t.ids": must be I64 [n], got I32 [2])"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
       R"("t.rows":{"dtype":"F64","shape":[1,1],"data_offsets":[8,16]}})",
       16, R"(tensor "t.rows": dtype F64: rows must be F32, F16 or BF16)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
       R"("t.rows":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12, R"(tensor "t.rows": must be [n, dim] with dim >= 1, got [1])"},
      {R"({"t.ids":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1,
       R"(tensor "t.ids": unknown dtype "Q8")"},
      {R"({"t.ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 8,
       R"(tensor "t.ids": data_offsets [0, 16] are outside the file's data (8 bytes))"},
      {R"({"t.ids":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", 8,
       R"(tensor "t.ids": I64 [2] is 16 bytes, but data_offsets span 8)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[8,0]}})", 8,
       R"(are outside the file's data)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[-8,0]}})", 8,
       R"(are outside the file's data)"},
      {R"({"t.ids":{"dtype":"I64","shape":[4611686018427387904, 4],"data_offsets":[0,8]}})", 8,
       R"(tensor "t.ids": shape too large)"},
      {R"({"t.ids":{"dtype":"I64","shape":[-1],"data_offsets":[0,8]}})", 8,
       R"(shape holds something other than sizes >= 0)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1.5],"data_offsets":[0,8]}})", 8,
       R"(shape holds something other than sizes >= 0)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[0]}})", 8,
       R"(no "data_offsets" [begin, end])"},
      {R"({"t.ids":{"shape":[1],"data_offsets":[0,8]}})", 8, R"(no "dtype" string)"},
      {R"({"t.ids":{"dtype":"I64","data_offsets":[0,8]}})", 8, R"(no "shape" array)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8],"x":1}})", 8,
       R"(unknown header field "x")"},
      {R"({"t.ids":7})", 0, R"(tensor "t.ids": header entry is not an object)"},
      {R"({"t.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8,
       R"(tensor "t.weight": not <table>.ids, <table>.rows or <table>.delete)"},
      {R"({".ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8,
       R"(not <table>.ids)"},
      {R"({"t.ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
       R"("t.delete":{"dtype":"I64","shape":[1],"data_offsets":[4,12]}})",
       12, R"(data overlaps tensor "t.ids")"},
  };
  for (const Case& c : cases) {
    const std::string error = Error(File(c.header, c.data));
    EXPECT_THAT(error, HasSubstr(c.want)) << c.header;
    EXPECT_THAT(error, HasSubstr("d.safetensors: ")) << c.header;
  }
}

TEST(SafetensorsDeltaTest, RandomBytesNeverCrash) {
  std::mt19937 rng(16);
  const std::string valid = [] {
    TableDelta t;
    t.table = "t";
    t.ids = {1, 2};
    t.dim = 2;
    t.row_bytes.assign(16, 'a');
    t.delete_keys = {9};
    return WriteDelta({t});
  }();
  ASSERT_TRUE(ParseDelta(valid, "v").ok());
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (rng() % 5 == 0) bytes.resize(rng() % bytes.size());
    auto parsed = ParseDelta(bytes, "fuzz");  // ok or an error; never a crash
    if (parsed.ok()) {
      for (const TableDelta& t : *parsed) {
        EXPECT_EQ(t.row_bytes.size(), t.ids.size() * t.dim * RowDtypeSize(t.dtype));
      }
    }
  }
}

TEST(SafetensorsDeltaTest, ReadDeltaFileNamesAMissingFile) {
  auto missing = ReadDeltaFile("/nonexistent/delta.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/delta.safetensors"));
}

}  // namespace
}  // namespace rankd::client
