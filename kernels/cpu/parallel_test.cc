#include "kernels/cpu/parallel.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_limit.h"

namespace rankd::kernels {
namespace {

// Every item is visited exactly once, whatever the split.
TEST(ParallelChunksTest, CoversEveryItemOnce) {
  for (int threads : {1, 3, 8}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{4096}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      ParallelChunks(n, 100, threads, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << i << " of " << n << ", " << threads;
      }
    }
  }
}

// Helpers the process cannot start are done without: the work still
// completes, on the threads that did start (the caller's at least); before,
// std::thread's exception ended the process.
TEST(ParallelChunksTest, HelpersThatCannotStartAreDoneWithout) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "needs an unsanitized fork (thread_limit.h)";
  EXPECT_EXIT(
      {
        testing::LimitAddressSpaceInThisChildOrExit(int64_t{32} << 20);
        std::atomic<int64_t> sum{0};
        ParallelChunks(100000, 10, 64, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) sum.fetch_add(i);
        });
        std::fprintf(stderr, "sum %lld\n", static_cast<long long>(sum.load()));
        std::_Exit(sum.load() == int64_t{100000} * 99999 / 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "sum 4999950000");
}

}  // namespace
}  // namespace rankd::kernels
