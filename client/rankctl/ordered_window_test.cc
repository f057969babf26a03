#include "client/rankctl/ordered_window.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace rankd::rankctl {
namespace {

using Window = OrderedWindow<int>;

std::shared_ptr<Window::Slot> MakeSlot(int64_t line) {
  auto slot = std::make_shared<Window::Slot>();
  slot->line = line;
  return slot;
}

TEST(OrderedWindow, TakesDoneSlotsInInputOrder) {
  Window window;
  auto a = MakeSlot(1), b = MakeSlot(2), c = MakeSlot(3);
  window.Push(a, true);
  window.Push(b, true);
  window.Push(c, true);
  window.Complete(c.get(), 30);
  window.Complete(b.get(), 20);
  EXPECT_TRUE(window.TakeDone(false).empty());  // the oldest is still out
  window.Complete(a.get(), 10);
  std::vector<std::shared_ptr<Window::Slot>> done = window.TakeDone(true);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(*done[0]->result, 10);
  EXPECT_EQ(*done[1]->result, 20);
  EXPECT_EQ(*done[2]->result, 30);
}

// The hang of `rankctl score` at a server's SIGTERM: the oldest call was
// slow, every later one failed at once, the window filled up behind it, and
// once the oldest finished the consumer still waited for fewer held lines,
// which only it can take out.
TEST(OrderedWindow, FullWindowOpensWhenItsOldestCallEnds) {
  constexpr int kMaxInFlight = 4;
  constexpr size_t kMaxSlots = 8;
  Window window;
  auto oldest = MakeSlot(1);
  window.Push(oldest, true);
  for (int line = 2; line <= static_cast<int>(kMaxSlots); ++line) {
    auto slot = MakeSlot(line);
    window.Push(slot, true);
    window.Complete(slot.get(), line);  // failed (or answered) at once
  }
  std::atomic<bool> returned{false};
  absl::Notification waiting;
  std::thread consumer([&] {
    waiting.Notify();
    window.WaitForRoom(kMaxInFlight, kMaxSlots);
    returned = true;
  });
  waiting.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(returned.load()) << "room while the oldest of a full window is out";
  window.Complete(oldest.get(), 1);
  consumer.join();  // hangs (test timeout) with the old condition
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(window.TakeDone(false).size(), kMaxSlots);
}

TEST(OrderedWindow, WaitsWhileTooManyCallsAreInFlight) {
  Window window;
  auto a = MakeSlot(1), b = MakeSlot(2);
  window.Push(a, true);
  window.Push(b, true);
  std::atomic<bool> returned{false};
  std::thread consumer([&] {
    window.WaitForRoom(/*max_in_flight=*/2, /*max_slots=*/100);
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(returned.load());
  window.Complete(b.get(), 2);  // a later call ending frees a call's room
  consumer.join();
  EXPECT_TRUE(returned.load());
}

}  // namespace
}  // namespace rankd::rankctl
