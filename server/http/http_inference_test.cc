#include "server/http/http_inference.h"

#include "gtest/gtest.h"

namespace rankd::server {
namespace {

TEST(HttpInferenceTest, JsonContentTypes) {
  for (const char* ok : {"", "application/json", "Application/JSON; charset=utf-8",
                         " application/json ", "application/vnd.rankd+json",
                         "application/x-www-form-urlencoded"}) {
    EXPECT_TRUE(IsJsonContentType(ok)) << ok;
  }
  for (const char* bad : {"text/plain", "application/octet-stream", "multipart/form-data; b=x",
                          "application/jsonx", "text/json+x"}) {
    EXPECT_FALSE(IsJsonContentType(bad)) << bad;
  }
}

}  // namespace
}  // namespace rankd::server
