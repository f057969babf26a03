// Runs without a GPU: a cache's arguments are checked before anything is
// allocated. The shared cache on a GPU: shared_cache_gpu_test.cc.
#include "engine/cuda/embedding_cache.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

using ::testing::HasSubstr;

EmbeddingCache::Member Table(const std::string& name, int64_t rows, int64_t warm) {
  static char host_rows[16];  // never read: creation fails before any copy
  EmbeddingCache::Member m;
  m.table = name;
  m.num_rows = rows;
  m.host_rows = host_rows;
  m.warm_rows = warm;
  return m;
}

TEST(EmbeddingCacheTest, RefusesBadArgumentsNamingTheTables) {
  EmbeddingCache::Options o;
  o.capacity_rows = 10;
  auto none = EmbeddingCache::Create(std::vector<EmbeddingCache::Member>{}, 64, o);
  EXPECT_THAT(none.status().message(), HasSubstr("at least one table"));

  o.capacity_rows = 0;
  auto empty = EmbeddingCache::Create({Table("a", 100, 0), Table("b", 100, 0)}, 64, o);
  EXPECT_THAT(empty.status().message(), HasSubstr("cache of tables a, b: capacity 0 rows"));

  o.capacity_rows = 10;
  auto too_warm = EmbeddingCache::Create({Table("a", 100, 6), Table("b", 100, 6)}, 64, o);
  EXPECT_THAT(too_warm.status().message(),
              HasSubstr("the warm-start rows (12) exceed the capacity (10)"));

  auto bad_warm = EmbeddingCache::Create({Table("a", 100, 0), Table("b", 5, 6)}, 64, o);
  EXPECT_THAT(bad_warm.status().message(), HasSubstr("table b has 5 rows, 6 warm-start rows"));

  EmbeddingCache::Member no_rows = Table("c", 100, 0);
  no_rows.host_rows = nullptr;
  auto missing = EmbeddingCache::Create({no_rows}, 64, o);
  EXPECT_THAT(missing.status().message(), HasSubstr("table c has 100 rows"));

  EmbeddingCache::Member big_log = Table("d", 100, 0);
  big_log.log_entries = int64_t{1} << 40;
  auto log = EmbeddingCache::Create({big_log}, 64, o);
  EXPECT_THAT(log.status().message(), HasSubstr("table d: access log of 1099511627776 entries"));

  auto row_bytes = EmbeddingCache::Create({Table("e", 100, 0)}, 0, o);
  EXPECT_THAT(row_bytes.status().message(), HasSubstr("row_bytes must be > 0"));

  o.sample_shift = 31;
  auto shift = EmbeddingCache::Create({Table("f", 100, 0)}, 64, o);
  EXPECT_THAT(shift.status().message(), HasSubstr("sample_shift must be in [0, 30]"));
}

}  // namespace
}  // namespace rankd::engine::cuda
