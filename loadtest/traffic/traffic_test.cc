#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "loadtest/traffic/candidate_count.h"
#include "loadtest/traffic/request_file.h"
#include "loadtest/traffic/request_generator.h"

namespace rankd::loadtest {
namespace {

rankd::v1::ModelInfo MiniInfo() {
  rankd::v1::ModelInfo m;
  m.set_name("mini");
  m.set_version(1);
  m.set_num_dense(13);
  const char* names[] = {"cat_0", "cat_1", "user"};
  const int64_t rows[] = {1000, 50, 7};
  for (int i = 0; i < 3; ++i) {
    auto* f = m.add_features();
    f->set_name(names[i]);
    f->set_table(names[i]);
    f->set_num_rows(rows[i]);
    f->set_request_level(i == 2);
    f->set_dim(16);
  }
  return m;
}

TEST(CandidateCountTest, ParsesAndSamplesInRange) {
  std::mt19937_64 rng(3);
  auto fixed = CandidateCount::Parse("256");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->Sample(rng), 256);
  EXPECT_EQ(fixed->ToString(), "256");
  auto uni = CandidateCount::Parse("uniform:16:32");
  ASSERT_TRUE(uni.ok());
  std::map<int, int> seen;
  for (int i = 0; i < 10000; ++i) ++seen[uni->Sample(rng)];
  EXPECT_EQ(seen.size(), 17u);
  EXPECT_EQ(seen.begin()->first, 16);
  EXPECT_EQ(seen.rbegin()->first, 32);
  auto ln = CandidateCount::Parse("lognormal:64:1:512");
  ASSERT_TRUE(ln.ok());
  std::vector<int> v;
  for (int i = 0; i < 20001; ++i) v.push_back(ln->Sample(rng));
  std::sort(v.begin(), v.end());
  EXPECT_GE(v.front(), 1);
  EXPECT_LE(v.back(), 512);
  EXPECT_NEAR(v[10000], 64, 4);  // the median
  EXPECT_EQ(ln->max(), 512);
}

TEST(CandidateCountTest, ErrorsNameTheFlag) {
  for (const char* bad : {"0", "-1", "abc", "uniform:5", "uniform:9:3", "lognormal:64:1",
                          "lognormal:0:1:10", "gauss:1:2", "2000000"}) {
    auto c = CandidateCount::Parse(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("--candidates: ", 0), 0u) << c.status();
  }
}

TEST(RequestGeneratorTest, RequestsMatchTheModel) {
  GeneratorOptions o;
  o.candidates = *CandidateCount::Parse("uniform:1:8");
  o.ids_per_bag = 2;
  o.ids_per_bag_by_feature = {{"cat_1", 3}};
  o.shared_features = {"cat_0"};
  o.pool_size = 50;
  o.version = 1;
  auto pool = GenerateRequests(MiniInfo(), o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(pool->size(), 50u);
  for (const auto& r : *pool) {
    const int b = r->num_candidates();
    ASSERT_GE(b, 1);
    ASSERT_LE(b, 8);
    EXPECT_EQ(r->model(), "mini");
    EXPECT_EQ(r->version(), 1);
    EXPECT_EQ(r->dense_size(), b * 13);
    for (float d : r->dense()) {
      EXPECT_GE(d, 0.0f);
      EXPECT_LT(d, 4.0f);
    }
    ASSERT_EQ(r->sparse_size(), 3);
    // cat_0: shared by flag -> one bag of 2.
    EXPECT_EQ(r->sparse(0).lengths_size(), 1);
    EXPECT_EQ(r->sparse(0).ids_size(), 2);
    // cat_1: per candidate, 3 ids each (per-feature size).
    EXPECT_EQ(r->sparse(1).lengths_size(), b);
    EXPECT_EQ(r->sparse(1).ids_size(), 3 * b);
    // user: request-level -> one bag.
    EXPECT_EQ(r->sparse(2).lengths_size(), 1);
    const int64_t rows[] = {1000, 50, 7};
    for (int f = 0; f < 3; ++f) {
      for (int64_t id : r->sparse(f).ids()) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, rows[f]);
      }
    }
  }
}

TEST(RequestGeneratorTest, VersionLabelIsSent) {
  GeneratorOptions o;
  o.pool_size = 3;
  o.version_label = "canary";
  auto pool = GenerateRequests(MiniInfo(), o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (const auto& r : *pool) {
    EXPECT_EQ(r->version(), 0);
    EXPECT_EQ(r->version_label(), "canary");
  }
}

TEST(RequestGeneratorTest, IdsAreSkewedAndSeeded) {
  GeneratorOptions o;
  o.candidates = CandidateCount::Fixed(100);
  o.zipf_alpha = 1.2;
  o.pool_size = 20;
  auto a = GenerateRequests(MiniInfo(), o);
  auto b = GenerateRequests(MiniInfo(), o);
  ASSERT_TRUE(a.ok() && b.ok());
  std::map<int64_t, int> freq;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i]->SerializeAsString(), (*b)[i]->SerializeAsString());
    for (int64_t id : (*a)[i]->sparse(0).ids()) ++freq[id];
  }
  int top = 0;
  for (const auto& [id, n] : freq) top = std::max(top, n);
  EXPECT_GT(top, 2000 / 20);  // the hottest of 1000 rows takes far more than 1/1000
  o.seed = 2;
  auto c = GenerateRequests(MiniInfo(), o);
  EXPECT_NE((*c)[0]->SerializeAsString(), (*a)[0]->SerializeAsString());
}

TEST(RequestGeneratorTest, RejectsBadOptions) {
  GeneratorOptions o;
  o.shared_features = {"nope"};
  auto r = GenerateRequests(MiniInfo(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shared_features"), std::string::npos);
  o = {};
  o.pool_size = 0;
  EXPECT_FALSE(GenerateRequests(MiniInfo(), o).ok());
  o = {};
  o.zipf_alpha = -1;
  EXPECT_FALSE(GenerateRequests(MiniInfo(), o).ok());
  EXPECT_FALSE(GenerateRequests(rankd::v1::ModelInfo(), GeneratorOptions()).ok());
}

TEST(RequestFileTest, ReadsJsonLinesAndNamesBadLines) {
  const std::string dir = testing::TempDir();
  const std::string good = dir + "/good.jsonl";
  {
    std::ofstream f(good);
    f << "{\"model\": \"mini\", \"numCandidates\": 2, \"dense\": [1, 2]}\n\n"
      << "{\"model\": \"other\", \"numCandidates\": 1}\n";
  }
  auto pool = ReadRequestFiles({good, good});
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(pool->size(), 4u);
  EXPECT_EQ((*pool)[0]->num_candidates(), 2);
  EXPECT_EQ((*pool)[1]->model(), "other");

  const std::string bad = dir + "/bad.jsonl";
  {
    std::ofstream f(bad);
    f << "{\"model\": \"mini\"}\n{\"model\": 3, \"bogus\": [}\n";
  }
  auto err = ReadRequestFiles({bad});
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("bad.jsonl:2:"), std::string::npos) << err.status();
  auto missing = ReadRequestFiles({dir + "/none.jsonl"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.jsonl: cannot open"), std::string::npos);
  const std::string empty = dir + "/empty.jsonl";
  { std::ofstream f(empty); }
  EXPECT_FALSE(ReadRequestFiles({empty}).ok());
}

}  // namespace
}  // namespace rankd::loadtest
