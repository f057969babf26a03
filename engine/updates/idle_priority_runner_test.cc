#include "engine/updates/idle_priority_runner.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_limit.h"
#include "kernels/cpu/thread_priority.h"

namespace rankd::engine {
namespace {

TEST(IdlePriorityRunner, RunsOnAnIdleHelperThreadAndWaits) {
  IdlePriorityRunner runner("test-idle");
  EXPECT_FALSE(runner.idle_policy());  // no thread before the first Run
  std::thread::id ran_on;
  bool ran_idle = false;
  runner.Run([&] {
    ran_on = std::this_thread::get_id();
    ran_idle = kernels::ThisThreadIsIdle();
  });
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(ran_idle);
  EXPECT_TRUE(runner.idle_policy());
  EXPECT_FALSE(kernels::ThisThreadIsIdle());  // the caller keeps its policy
  // Later closures run on the same thread.
  std::thread::id again;
  runner.Run([&] { again = std::this_thread::get_id(); });
  EXPECT_EQ(again, ran_on);
}

// A helper thread the process cannot start (its task limit reached): the
// closures run on the caller's thread, this Run's and every later one's,
// instead of std::thread's exception ending the process.
TEST(IdlePriorityRunner, WithoutAHelperThreadClosuresRunOnTheCaller) {
  if (kernels::testing::kUnderSanitizer) {
    GTEST_SKIP() << "needs an unsanitized fork (thread_limit.h)";
  }
  EXPECT_EXIT(
      {
        IdlePriorityRunner runner("test-idle");
        // Nothing left for a thread stack: every start fails.
        kernels::testing::LimitAddressSpaceInThisChildOrExit(0);
        std::thread::id first;
        std::thread::id second;
        runner.Run([&] { first = std::this_thread::get_id(); });
        runner.Run([&] { second = std::this_thread::get_id(); });
        const bool on_caller =
            first == std::this_thread::get_id() && second == std::this_thread::get_id();
        std::fprintf(stderr, "on the caller: %d, inline: %d\n", on_caller, runner.runs_inline());
        std::_Exit(on_caller && runner.runs_inline() && !runner.idle_policy() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "on the caller: 1, inline: 1");
}

TEST(IdlePriorityRunner, ClosuresFromManyThreadsRunOneAtATime) {
  IdlePriorityRunner runner("test-idle");
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int runs = 0;  // written only inside closures: a race here is a bug
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        runner.Run([&] {
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          ++runs;
          inside.fetch_sub(1);
        });
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(runs, 800);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(IdlePriorityRunner, DestroysWithoutEverRunning) {
  IdlePriorityRunner runner("test-idle");  // no thread started: nothing to join
}

}  // namespace
}  // namespace rankd::engine
