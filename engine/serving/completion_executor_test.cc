#include "engine/serving/completion_executor.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_limit.h"

namespace rankd::engine {
namespace {

std::unique_ptr<CompletionExecutor> MakeExecutor(int threads) {
  CompletionExecutor::Options options;
  options.num_threads = threads;
  auto executor = CompletionExecutor::Create(options);
  EXPECT_TRUE(executor.ok()) << executor.status();
  return std::move(executor).value();
}

TEST(CompletionExecutorTest, RejectsBadOptions) {
  CompletionExecutor::Options options;
  options.num_threads = 0;
  auto bad = CompletionExecutor::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("num_threads"), std::string::npos);

  options.num_threads = 1;
  options.thread_name = "a-name-longer-than-15";
  bad = CompletionExecutor::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("thread_name"), std::string::npos);
}

// Many producers, several threads: each task runs exactly once.
// Threads the process cannot start (its task limit reached) fail Create
// with RESOURCE_EXHAUSTED naming the thread; those started are joined and
// the process goes on (before, std::thread's exception ended it).
TEST(CompletionExecutorTest, ThreadsThatCannotStartFailCreate) {
  if (kernels::testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an unsanitized fork (thread_limit.h)";
  EXPECT_EXIT(
      {
        kernels::testing::LimitAddressSpaceInThisChildOrExit(int64_t{32} << 20);
        CompletionExecutor::Options options;
        options.num_threads = 16;
        auto executor = CompletionExecutor::Create(options);
        std::fprintf(stderr, "%s\n", executor.status().ToString().c_str());
        std::_Exit(absl::IsResourceExhausted(executor.status()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "RESOURCE_EXHAUSTED: cannot start completion thread [0-9]+ of 16: Resource temporarily "
      "unavailable");
}

TEST(CompletionExecutorTest, EveryTaskRunsExactlyOnce) {
  constexpr int kProducers = 4, kPerProducer = 2000;
  auto executor = MakeExecutor(3);
  std::vector<std::atomic<int>> runs(kProducers * kPerProducer);
  for (auto& r : runs) r.store(0);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        const int id = p * kPerProducer + i;
        executor->Run([&runs, id] { runs[id].fetch_add(1); });
      }
    });
  }
  for (std::thread& t : producers) t.join();
  executor->Shutdown();
  for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i;
  EXPECT_EQ(executor->tasks_run(), kProducers * kPerProducer);
}

// Shutdown runs what is still queued (the thread is held busy while tasks
// queue up behind it) before it returns.
TEST(CompletionExecutorTest, ShutdownDrainsQueuedTasks) {
  auto executor = MakeExecutor(1);
  absl::Notification started, release;
  executor->Run([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) executor->Run([&ran] { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 0);  // the only thread is held
  std::thread shutdown([&] { executor->Shutdown(); });
  release.Notify();
  shutdown.join();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(executor->tasks_run(), 101);
}

// With one thread, tasks finish in the order Run was called.
TEST(CompletionExecutorTest, OneThreadKeepsOrder) {
  auto executor = MakeExecutor(1);
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 500; ++i) {
    executor->Run([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    });
  }
  executor->Shutdown();
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(order[i], i);
}

// After Shutdown nothing is dropped: the task runs on the caller, at once.
TEST(CompletionExecutorTest, RunAfterShutdownRunsInline) {
  auto executor = MakeExecutor(2);
  executor->Shutdown();
  executor->Shutdown();  // idempotent
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  executor->Run([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(executor->tasks_run(), 1);
}

// Captures are destroyed after the task ran (no task object outlives the
// executor), including move-only ones.
TEST(CompletionExecutorTest, MoveOnlyCapturesAreReleased) {
  auto shared = std::make_shared<int>(7);
  std::atomic<int> sum{0};
  {
    auto executor = MakeExecutor(2);
    for (int i = 0; i < 50; ++i) {
      auto owned = std::make_unique<int>(i);
      executor->Run([&sum, shared, owned = std::move(owned)] { sum.fetch_add(*owned + *shared); });
    }
  }  // destructor = Shutdown
  EXPECT_EQ(sum.load(), 49 * 50 / 2 + 50 * 7);
  EXPECT_EQ(shared.use_count(), 1);
}

}  // namespace
}  // namespace rankd::engine
