#include "server/http/connection_threads.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace rankd::server {
namespace {

// Connections that stay open (tasks that block) each hold a thread; up to
// the maximum, a new one still starts at once.
TEST(ConnectionThreadsTest, BlockedTasksDoNotDelayNewOnesBelowTheMaximum) {
  ConnectionThreads pool(8);
  absl::Notification release;
  std::atomic<int> started{0};
  for (int i = 0; i < 7; ++i) {
    pool.enqueue([&] {
      started.fetch_add(1);
      release.WaitForNotification();
    });
  }
  absl::Notification ran;
  pool.enqueue([&] { ran.Notify(); });
  // No sleeps: the 8th task can only run on an 8th thread, since 7 threads
  // are blocked until `release`.
  ran.WaitForNotification();
  EXPECT_EQ(pool.threads(), 8);
  release.Notify();
  pool.shutdown();
  EXPECT_EQ(started.load(), 7);
}

TEST(ConnectionThreadsTest, PastTheMaximumTasksQueueAndRunWhenAThreadFrees) {
  ConnectionThreads pool(2);
  absl::Notification release;
  std::atomic<int> done{0};
  for (int i = 0; i < 2; ++i) {
    pool.enqueue([&] {
      release.WaitForNotification();
      done.fetch_add(1);
    });
  }
  for (int i = 0; i < 5; ++i) pool.enqueue([&] { done.fetch_add(1); });
  EXPECT_EQ(pool.threads(), 2);  // never more than the maximum
  release.Notify();
  pool.shutdown();  // runs what is queued, then joins
  EXPECT_EQ(done.load(), 7);
}

TEST(ConnectionThreadsTest, IdleThreadsAreReused) {
  ConnectionThreads pool(64);
  for (int i = 0; i < 50; ++i) {
    absl::Notification ran;
    pool.enqueue([&] { ran.Notify(); });
    ran.WaitForNotification();
    while (pool.busy() != 0) std::this_thread::yield();  // back to idle
  }
  EXPECT_EQ(pool.threads(), 1);
  pool.shutdown();
  pool.shutdown();  // idempotent
  EXPECT_EQ(pool.threads(), 0);
}

}  // namespace
}  // namespace rankd::server
