#include "engine/cuda/hot_set.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "engine/cuda/reader_gate.h"
#include "gtest/gtest.h"

namespace rankd::engine::cuda {
namespace {

std::vector<int64_t> Repeat(int64_t row, int times) { return std::vector<int64_t>(times, row); }

TEST(HotSetTest, FillsFreeSlotsWithTheHottestRows) {
  HotSet h(100, 3);
  std::vector<int64_t> s;
  for (int64_t r : {7, 7, 7, 9, 9, 1, 50, 50, 50, 50}) s.push_back(r);
  HotSet::Change c = h.Plan(s, 100);
  ASSERT_EQ(c.admit_rows.size(), 3u);
  EXPECT_EQ(c.admit_rows[0], 50);
  EXPECT_EQ(c.admit_rows[1], 7);
  EXPECT_EQ(c.admit_rows[2], 9);
  EXPECT_TRUE(c.evict_rows.empty());
  h.Apply(c);
  EXPECT_EQ(h.occupied(), 3);
  EXPECT_GE(h.SlotOf(50), 0);
  EXPECT_EQ(h.SlotOf(1), -1);
}

TEST(HotSetTest, PrefillWithListedRowsLeavesTheRestFree) {
  HotSet h(100, 4);
  const std::vector<int64_t> warm = {40, 3};
  h.Prefill(warm);
  EXPECT_EQ(h.SlotOf(40), 0);
  EXPECT_EQ(h.SlotOf(3), 1);
  EXPECT_EQ(h.SlotOf(0), -1);
  EXPECT_EQ(h.occupied(), 2);
  // The two free slots fill first; the unseen warm rows then give way.
  HotSet::Change c = h.Plan({7, 7, 8, 8, 9}, 10);
  ASSERT_EQ(c.admit_rows.size(), 3u);
  EXPECT_EQ(c.evict_rows.size(), 1u);
  std::vector<int32_t> free_slots(c.admit_slots.begin(), c.admit_slots.begin() + 2);
  std::sort(free_slots.begin(), free_slots.end());
  EXPECT_EQ(free_slots, (std::vector<int32_t>{2, 3}));
  h.Apply(c);
  EXPECT_EQ(h.occupied(), 4);
  EXPECT_GE(h.SlotOf(9), 0);
}

TEST(HotSetTest, ReplacesOnlyStrictlyHotterRowsAndFollowsShiftingTraffic) {
  HotSet h(1000, 2);
  h.Prefill();  // rows 0 and 1
  EXPECT_EQ(h.SlotOf(0), 0);
  EXPECT_EQ(h.SlotOf(1), 1);
  // Row 5 is hot: it replaces one of the unseen prefilled rows.
  std::vector<int64_t> s = Repeat(5, 10);
  auto more = Repeat(0, 4);
  s.insert(s.end(), more.begin(), more.end());
  HotSet::Change c = h.Plan(s, 10);
  ASSERT_EQ(c.admit_rows, std::vector<int64_t>{5});
  ASSERT_EQ(c.evict_rows, std::vector<int64_t>{1});  // 1 was never seen; 0 was
  EXPECT_EQ(c.admit_slots, c.evict_slots);
  h.Apply(c);
  // Equal counts do not churn.
  HotSet::Change none = h.Plan({}, 10);
  EXPECT_TRUE(none.empty());
  // Traffic moves to rows 8 and 9: after a few refreshes they are cached.
  for (int i = 0; i < 6; ++i) {
    std::vector<int64_t> t = Repeat(8, 20);
    auto nine = Repeat(9, 20);
    t.insert(t.end(), nine.begin(), nine.end());
    h.Apply(h.Plan(t, 10));
  }
  EXPECT_GE(h.SlotOf(8), 0);
  EXPECT_GE(h.SlotOf(9), 0);
  EXPECT_EQ(h.SlotOf(5), -1);
  EXPECT_EQ(h.occupied(), 2);
}

TEST(HotSetTest, BoundsChangesPerRefreshAndIgnoresBadRows) {
  HotSet h(1 << 20, 1000);
  std::vector<int64_t> s;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100000; ++i) s.push_back(static_cast<int64_t>(rng() % (1 << 20)));
  s.push_back(-1);
  s.push_back(int64_t{1} << 40);
  HotSet::Change c = h.Plan(s, 64);
  EXPECT_EQ(c.admit_rows.size(), 64u);
  for (int64_t r : c.admit_rows) EXPECT_TRUE(r >= 0 && r < (1 << 20));
  h.Apply(c);
  // Slots stay a bijection after many refreshes.
  for (int round = 0; round < 50; ++round) {
    std::vector<int64_t> t;
    for (int i = 0; i < 2000; ++i) t.push_back(static_cast<int64_t>(rng() % 5000));
    h.Apply(h.Plan(t, 200));
  }
  std::vector<int> used(1000, 0);
  int cached = 0;
  for (int64_t r = 0; r < 5000; ++r) {
    const int32_t slot = h.SlotOf(r);
    if (slot < 0) continue;
    ASSERT_LT(slot, 1000);
    EXPECT_EQ(used[slot]++, 0) << "slot " << slot << " holds two rows";
    ++cached;
  }
  EXPECT_LE(cached, 1000);
}

TEST(HotSetTest, ZeroCapacityNeverChanges) {
  HotSet h(10, 0);
  EXPECT_TRUE(h.Plan(Repeat(3, 5), 10).empty());
}

TEST(ReaderGateTest, WaitsForBatchesInFlightOnly) {
  ReaderGate gate(4);
  const int a = gate.AddReader();
  const int b = gate.AddReader();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  gate.WaitForReaders();  // nobody inside: returns at once
  gate.Enter(a);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    gate.WaitForReaders();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load()) << "the writer must wait for reader a's batch";
  // A batch entered after the writer started does not hold it.
  gate.Enter(b);
  gate.Exit(a);
  writer.join();
  EXPECT_TRUE(done.load());
  gate.Exit(b);
}

TEST(ReaderGateTest, RefusesReadersBeyondItsSize) {
  ReaderGate gate(1);
  EXPECT_EQ(gate.AddReader(), 0);
  EXPECT_EQ(gate.AddReader(), -1);
}

}  // namespace
}  // namespace rankd::engine::cuda
