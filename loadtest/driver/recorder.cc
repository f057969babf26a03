#include "loadtest/driver/recorder.h"

#include <atomic>

namespace rankd::loadtest {

Recorder::Recorder(int64_t window_start_ns, int64_t window_end_ns)
    : window_start_ns_(window_start_ns), window_end_ns_(window_end_ns) {}

Recorder::Shard& Recorder::MyShard() {
  static std::atomic<int> next{0};
  thread_local const int index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shards_[index];
}

void Recorder::RecordSend(int64_t scheduled_ns, int64_t sent_ns, int candidates) {
  if (!InWindow(scheduled_ns)) return;
  Shard& s = MyShard();
  absl::MutexLock lock(&s.mu);
  const int64_t lag = sent_ns - scheduled_ns;
  s.totals.send_lag.Record(lag);
  if (lag > kLateSendNs) ++s.totals.late_sends;
  ++s.totals.sent;
  s.totals.sent_candidates += candidates;
}

void Recorder::RecordCompletion(int64_t scheduled_ns, int64_t sent_ns, int64_t done_ns,
                                absl::StatusCode code, int candidates) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kNumCodes) c = static_cast<int>(absl::StatusCode::kUnknown);
  const bool ok = code == absl::StatusCode::kOk;
  Shard& s = MyShard();
  absl::MutexLock lock(&s.mu);
  s.interval.latency.Record(done_ns - scheduled_ns);
  ++s.interval.completed;
  if (!ok) ++s.interval.errors;
  ++s.totals.total_codes[c];
  if (InWindow(done_ns)) ++s.totals.arrived_in_window;
  if (!InWindow(scheduled_ns)) return;
  ++s.totals.window_codes[c];
  ++s.totals.completed;
  s.totals.latency.Record(done_ns - scheduled_ns);
  s.totals.service.Record(done_ns - sent_ns);
  if (ok) {
    ++s.totals.ok;
    s.totals.ok_candidates += candidates;
  }
}

Recorder::Interval Recorder::TakeInterval() {
  Interval out;
  Interval empty;
  for (Shard& s : shards_) {
    {
      absl::MutexLock lock(&s.mu);
      std::swap(s.interval, empty);
    }
    out.latency.Merge(empty.latency);
    out.completed += empty.completed;
    out.errors += empty.errors;
    empty.latency.Clear();
    empty.completed = empty.errors = 0;
  }
  return out;
}

Recorder::Totals Recorder::GetTotals() const {
  Totals out;
  for (const Shard& s : shards_) {
    absl::MutexLock lock(&s.mu);
    const Totals& t = s.totals;
    out.latency.Merge(t.latency);
    out.service.Merge(t.service);
    out.send_lag.Merge(t.send_lag);
    out.sent += t.sent;
    out.sent_candidates += t.sent_candidates;
    out.late_sends += t.late_sends;
    out.completed += t.completed;
    out.ok += t.ok;
    out.ok_candidates += t.ok_candidates;
    out.arrived_in_window += t.arrived_in_window;
    for (int c = 0; c < kNumCodes; ++c) {
      out.window_codes[c] += t.window_codes[c];
      out.total_codes[c] += t.total_codes[c];
    }
  }
  return out;
}

}  // namespace rankd::loadtest
