#include "engine/cuda/pack_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

TEST(PackPoolTest, RunsEveryTaskOnce) {
  PackPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 4, 50, 1000}) {
    std::vector<std::atomic<int>> runs(n);
    pool.Run(n, [&](int64_t i) { runs[i].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i << " of " << n;
  }
}

// Several workers packing at once share the pool; each Run returns only
// after its own tasks are done.
TEST(PackPoolTest, ConcurrentCallersEachSeeTheirTasksDone) {
  PackPool pool(2);
  auto parallel = pool.AsParallelFor();
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        std::vector<int> out(37, 0);
        parallel(37, [&](int64_t i) { out[i] = static_cast<int>(i) + 1; });
        for (int i = 0; i < 37; ++i) {
          if (out[i] != i + 1) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(PackPoolTest, DefaultSizeIsBounded) {
  EXPECT_GE(PackPool::DefaultThreads(), 0);
  EXPECT_LE(PackPool::DefaultThreads(), 8);
}

}  // namespace
}  // namespace rankd::engine::cuda
