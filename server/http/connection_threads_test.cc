#include "server/http/connection_threads.h"

#include <atomic>
#include <functional>
#include <system_error>
#include <thread>
#include <utility>

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

// A thread the process cannot start (std::thread throws std::system_error
// at its task limit) leaves the connection queued for a busy thread instead
// of ending the process; once threads can be started again, they are.
TEST(ConnectionThreadsTest, AThreadThatCannotStartLeavesTheTaskQueued) {
  std::atomic<int> allowed{1};
  ConnectionThreads pool(8, [&](std::function<void()> fn) {
    if (allowed.fetch_sub(1) <= 0) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "pthread_create");
    }
    return std::thread(std::move(fn));
  });
  absl::Notification release;
  std::atomic<int> done{0};
  pool.enqueue([&] {
    release.WaitForNotification();
    done.fetch_add(1);
  });
  for (int i = 0; i < 3; ++i) pool.enqueue([&] { done.fetch_add(1); });
  EXPECT_EQ(pool.threads(), 1);
  EXPECT_EQ(pool.start_failures(), 3);
  EXPECT_EQ(done.load(), 0);  // queued behind the one blocked thread
  release.Notify();
  while (done.load() != 4) std::this_thread::yield();  // the one thread ran them all
  // Threads can be started again: the next connection gets a new one while
  // the first is blocked.
  allowed.store(1);
  absl::Notification release2, ran;
  pool.enqueue([&] { release2.WaitForNotification(); });
  while (pool.busy() != 1) std::this_thread::yield();
  pool.enqueue([&] { ran.Notify(); });
  ran.WaitForNotification();
  EXPECT_EQ(pool.threads(), 2);
  release2.Notify();
  pool.shutdown();
}

}  // namespace
}  // namespace rankd::server
