#include "kernels/cpu/thread_priority.h"

#include <thread>

#include "gtest/gtest.h"

namespace rankd::kernels {
namespace {

// Runs `fn` on a fresh thread (so the test process's own nice is untouched)
// and returns what it returns.
template <typename F>
auto OnNewThread(F fn) {
  decltype(fn()) out{};
  std::thread t([&] { out = fn(); });
  t.join();
  return out;
}

TEST(ThreadPriority, RaisesOnlyTheCallingThreadsNice) {
  const int before = ThisThreadNice();
  const std::pair<int, int> got = OnNewThread([&] {
    const int rc = LowerThisThreadPriority(3);
    return std::make_pair(rc, ThisThreadNice());
  });
  ASSERT_EQ(got.first, 0);
  EXPECT_EQ(got.second, std::min(kMaxNice, before + 3));
  EXPECT_EQ(ThisThreadNice(), before);  // other threads keep theirs
}

TEST(ThreadPriority, CapsAtTheMaximum) {
  const int nice = OnNewThread([] {
    EXPECT_EQ(LowerThisThreadPriority(1000), 0);
    return ThisThreadNice();
  });
  EXPECT_EQ(nice, kMaxNice);
}

TEST(ThreadPriority, ZeroOrNegativeChangesNothing) {
  const int before = ThisThreadNice();
  const int nice = OnNewThread([] {
    EXPECT_EQ(LowerThisThreadPriority(0), 0);
    EXPECT_EQ(LowerThisThreadPriority(-5), 0);
    return ThisThreadNice();
  });
  EXPECT_EQ(nice, before);
}

TEST(ThreadPriority, ThreadsStartWithTheirCreatorsValue) {
  const int before = ThisThreadNice();
  const int child = OnNewThread([] {
    EXPECT_EQ(LowerThisThreadPriority(2), 0);
    return OnNewThread([] { return ThisThreadNice(); });
  });
  EXPECT_EQ(child, std::min(kMaxNice, before + 2));
}

TEST(ThreadPriority, IdlePolicyIsTheCallingThreadsOnly) {
  ASSERT_FALSE(ThisThreadIsIdle());
  const std::pair<int, bool> got = OnNewThread([] {
    const int rc = MakeThisThreadIdle();
    return std::make_pair(rc, ThisThreadIsIdle());
  });
  ASSERT_EQ(got.first, 0);
  EXPECT_TRUE(got.second);
  EXPECT_FALSE(ThisThreadIsIdle());  // the caller keeps its policy
}

}  // namespace
}  // namespace rankd::kernels
