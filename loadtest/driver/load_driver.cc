#include "loadtest/driver/load_driver.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/option_checks.h"
#include "loadtest/driver/process_cpu.h"
#include "loadtest/driver/recorder.h"

namespace rankd::loadtest {
namespace {

using SteadyClock = std::chrono::steady_clock;

const char* CodeName(int code) {
  static const char* kNames[kNumCodes] = {
      "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  return code >= 0 && code < kNumCodes ? kNames[code] : "UNKNOWN";
}

int64_t SecondsToNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

absl::Status CheckStepSpec(const StepSpec& spec) {
  const bool open = spec.mode == StepSpec::Mode::kOpen;
  if (open && (!(spec.rate_rps > 0) || !std::isfinite(spec.rate_rps))) {
    return absl::InvalidArgumentError(absl::StrCat("rate: must be > 0, got ", spec.rate_rps));
  }
  if (!open && spec.concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("concurrency: must be >= 1, got ", spec.concurrency));
  }
  if (!(spec.warmup_s >= 0) || !std::isfinite(spec.warmup_s)) {
    return absl::InvalidArgumentError(absl::StrCat("warmup_s: must be >= 0, got ", spec.warmup_s));
  }
  if (!(spec.duration_s > 0) || !std::isfinite(spec.duration_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration_s: must be > 0, got ", spec.duration_s));
  }
  return absl::OkStatus();
}

}  // namespace

// The state of one Run(): shared by the sender, reporter and completion threads
// until every call has completed.
struct LoadDriver::Step {
  Step(const LoadDriver::Options& o, const StepSpec& s)
      : options(o),
        spec(s),
        warmup_ns(SecondsToNs(s.warmup_s)),
        end_ns(SecondsToNs(s.warmup_s + s.duration_s)),
        recorder(warmup_ns, end_ns),
        deadline(absl::Microseconds(static_cast<int64_t>(o.deadline_ms * 1000.0))) {}

  int64_t NowNs() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - t0).count();
  }
  void SleepUntilNs(int64_t t) const {
    if (t > NowNs()) std::this_thread::sleep_until(t0 + std::chrono::nanoseconds(t));
  }
  // Sleeps until `spin_ns` before `t`, then spins until `t` (Options::spin_us).
  void WaitUntilNs(int64_t t, int64_t spin_ns) const {
    if (t - spin_ns > NowNs()) SleepUntilNs(t - spin_ns);
    while (NowNs() < t) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  // Sends one request scheduled for `scheduled_ns`; closed loop (user >= 0):
  // for `user`, and the send time is its schedule (there is no other).
  void Send(int64_t scheduled_ns, int user) {
    const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
    const size_t index = i % options.pool->size();
    const int candidates = (*options.pool)[index]->num_candidates();
    const int64_t sent_ns = NowNs();
    if (user >= 0) scheduled_ns = sent_ns;
    recorder.RecordSend(scheduled_ns, sent_ns, candidates);
    in_flight.fetch_add(1, std::memory_order_relaxed);
    inside_send() = true;
    options.sender->Send(
        index, deadline, [this, scheduled_ns, sent_ns, candidates, user](const SendResult& r) {
          const int64_t done_ns = NowNs();
          recorder.RecordCompletion(scheduled_ns, sent_ns, done_ns, r.code, candidates);
          if (options.response_log != nullptr) {
            LogRow(scheduled_ns, sent_ns, done_ns, r.code, r.version);
          }
          if (user >= 0) NextForUser(user);
          in_flight.fetch_sub(1, std::memory_order_acq_rel);
        });
    inside_send() = false;
  }

  void LogRow(int64_t scheduled_ns, int64_t sent_ns, int64_t done_ns, absl::StatusCode code,
              int64_t version) {
    ResponseRow row;
    row.scheduled_unix_ns = unix_t0_ns + scheduled_ns;
    row.sent_unix_ns = unix_t0_ns + sent_ns;
    row.done_unix_ns = unix_t0_ns + done_ns;
    row.version = version;
    row.step = spec.index;
    row.code = code;
    options.response_log->Append(row);
  }

  // True while this thread is inside ScoreSender::Send (a completion then runs inline).
  static bool& inside_send() {
    thread_local bool inside = false;
    return inside;
  }

  // Closed loop: the user's next request, or its end.
  void NextForUser(int user) {
    const int64_t now = NowNs();
    if (now >= end_ns) {
      active_users.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
    if (inside_send()) {  // inline completion: no recursion
      absl::MutexLock lock(&mu);
      deferred.push_back(user);
      return;
    }
    Send(now, user);
  }

  // Closed loop helper: sends for users whose completion ran inline.
  void DeferredLoop() {
    for (;;) {
      int user;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Step* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
              return !s->deferred.empty() || s->stop;
            },
            this));
        if (deferred.empty()) return;
        user = deferred.front();
        deferred.pop_front();
      }
      NextForUser(user);
    }
  }

  void OpenSender(int thread_index) {
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // wake within ~1 us of the send time
    ArrivalSchedule::Options so;
    so.arrival = spec.arrival;
    so.rate_per_s = spec.rate_rps / options.sender_threads;
    so.phase_ns = static_cast<int64_t>(thread_index * 1e9 / spec.rate_rps);
    so.seed = spec.seed * 7919 + thread_index;
    auto schedule = ArrivalSchedule::Create(so);
    if (!schedule.ok()) return;  // validated before
    for (;;) {
      const int64_t at = schedule->Next();
      if (at >= end_ns) break;
      WaitUntilNs(at, options.spin_us * 1000);
      while (in_flight.load(std::memory_order_relaxed) >= options.max_in_flight) {
        cap_waits.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      Send(at, /*user=*/-1);
    }
  }

  void Reporter() {
    const int64_t interval_ns = std::max<int64_t>(SecondsToNs(options.interval_s), 1000000);
    int64_t interval_start = 0;
    for (;;) {
      const int64_t boundary = interval_start + interval_ns;
      // Wake at the interval's end, or at the warm-up's end for the scrape.
      const int64_t wake = (!warm_scraped && warmup_ns < boundary) ? warmup_ns : boundary;
      bool stopping;
      {
        absl::MutexLock lock(&mu);
        mu.AwaitWithDeadline(absl::Condition(&stop),
                             absl::Now() + absl::Nanoseconds(std::max<int64_t>(wake - NowNs(), 0)));
        stopping = stop;
      }
      if (!warm_scraped && NowNs() >= warmup_ns) {
        warm_scraped = true;
        if (options.scrape != nullptr) warm_snapshot = options.scrape();
        warm_scrape_ns = NowNs();
        warm_cpu_s = ProcessCpuSeconds();
      }
      const int64_t now = NowNs();
      if (!stopping && now < boundary) continue;
      Recorder::Interval iv = recorder.TakeInterval();
      const int64_t end = stopping ? std::min(now, boundary) : boundary;
      if (!stopping || iv.completed > 0) {
        IntervalStats st;
        st.start_s = interval_start / 1e9;
        st.length_s = (end - interval_start) / 1e9;
        st.warmup = interval_start < warmup_ns;
        st.completed = iv.completed;
        st.errors = iv.errors;
        st.p50_us = iv.latency.Percentile(50) / 1e3;
        st.p99_us = iv.latency.Percentile(99) / 1e3;
        st.max_us = iv.latency.max() / 1e3;
        st.in_flight = in_flight.load(std::memory_order_relaxed);
        intervals.push_back(st);
        if (options.on_interval) options.on_interval(st);
      }
      if (stopping) return;
      interval_start = boundary;
    }
  }

  // Starts the clock and sends the step's traffic (open: the sender threads;
  // closed: spec.concurrency users), waits until every call has completed and
  // stops the reporter. Returns the step clock's time of the drain; sets
  // *drained_cpu_s to the process CPU time then.
  int64_t Drive(double* drained_cpu_s) {
    const bool open = spec.mode == StepSpec::Mode::kOpen;
    t0 = SteadyClock::now();
    unix_t0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    std::thread reporter([this] { Reporter(); });
    std::vector<std::thread> threads;
    if (open) {
      for (int t = 0; t < options.sender_threads; ++t) {
        threads.emplace_back([this, t] { OpenSender(t); });
      }
      for (auto& t : threads) t.join();
      threads.clear();
    } else {
      threads.emplace_back([this] { DeferredLoop(); });
      active_users = spec.concurrency;
      for (int u = 0; u < spec.concurrency; ++u) Send(NowNs(), u);
      while (active_users.load(std::memory_order_acquire) > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    // Every call has a deadline, so this ends.
    while (in_flight.load(std::memory_order_acquire) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const int64_t drained_ns = NowNs();
    *drained_cpu_s = ProcessCpuSeconds();
    {
      absl::MutexLock lock(&mu);
      stop = true;
    }
    reporter.join();
    for (auto& t : threads) t.join();
    return drained_ns;
  }

  // The client's figures of the finished step (Drive returned drained_ns and
  // drained_cpu_s); the server's are added by the caller.
  StepResult ClientResult(int64_t drained_ns, double drained_cpu_s) {
    const bool open = spec.mode == StepSpec::Mode::kOpen;
    const Recorder::Totals totals = recorder.GetTotals();
    StepResult r;
    r.mode = open ? "open" : "closed";
    r.arrival = open ? ArrivalName(spec.arrival) : "";
    r.target_rps = open ? spec.rate_rps : 0;
    r.concurrency = open ? 0 : spec.concurrency;
    r.warmup_s = spec.warmup_s;
    r.duration_s = spec.duration_s;
    const double d = spec.duration_s;
    r.sent = totals.sent;
    r.mean_candidates =
        totals.sent > 0 ? static_cast<double>(totals.sent_candidates) / totals.sent : 0;
    r.completed = totals.completed;
    r.sent_rps = totals.sent / d;
    r.achieved_rps = totals.arrived_in_window / d;
    r.ok_rps = totals.ok / d;
    r.candidates_per_s = totals.ok_candidates / d;
    r.ok = totals.ok;
    r.errors = totals.completed - totals.ok;
    for (int c = 0; c < kNumCodes; ++c) {
      if (c != 0 && totals.window_codes[c] > 0) {
        r.errors_by_code[CodeName(c)] = totals.window_codes[c];
      }
      if (totals.total_codes[c] > 0) r.total_by_code[CodeName(c)] = totals.total_codes[c];
    }
    r.latency = Summarize(totals.latency, options.slo_percentile);
    r.service = Summarize(totals.service, options.slo_percentile);
    r.send_lag = Summarize(totals.send_lag, options.slo_percentile);
    r.late_sends = totals.late_sends;
    r.in_flight_cap_waits = cap_waits.load();
    // Behind: the in-flight cap held sends back, or more than 1% (and at least
    // 10) of the sends left more than 1 ms after their scheduled time.
    r.client_behind = (open && totals.late_sends >= 10 && totals.late_sends * 100 > totals.sent) ||
                      r.in_flight_cap_waits > 0;
    r.intervals = std::move(intervals);
    // The warm-up's end (its scrape) to the drain: the server window's span.
    if (warm_scraped && drained_ns > warm_scrape_ns) {
      r.client_cpu_cores = (drained_cpu_s - warm_cpu_s) / ((drained_ns - warm_scrape_ns) / 1e9);
    }
    return r;
  }

  const LoadDriver::Options& options;
  const StepSpec spec;
  const int64_t warmup_ns;
  const int64_t end_ns;
  Recorder recorder;
  const absl::Duration deadline;  // of each call
  SteadyClock::time_point t0;
  int64_t unix_t0_ns = 0;  // the wall clock at t0 (response log rows)
  std::atomic<uint64_t> next{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int> active_users{0};
  std::atomic<int64_t> cap_waits{0};

  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::deque<int> deferred ABSL_GUARDED_BY(mu);

  // Reporter thread only, until it is joined.
  bool warm_scraped = false;
  absl::StatusOr<PromSnapshot> warm_snapshot = absl::UnavailableError("not scraped");
  int64_t warm_scrape_ns = 0;
  double warm_cpu_s = 0;  // ProcessCpuSeconds() right after that scrape
  std::vector<IntervalStats> intervals;
};

absl::StatusOr<std::unique_ptr<LoadDriver>> LoadDriver::Create(const Options& options) {
  if (options.sender == nullptr) return absl::InvalidArgumentError("sender: none given");
  if (options.pool == nullptr || options.pool->empty()) {
    return absl::InvalidArgumentError("pool: no requests");
  }
  if (absl::Status s = client::FirstError({
          client::CheckAtLeast("sender_threads", options.sender_threads, 1),
          client::CheckAtLeast("max_in_flight", options.max_in_flight, 1),
          client::CheckInRange("spin_us", options.spin_us, 0, 100000),
          client::CheckAbove("deadline_ms", options.deadline_ms, 0),
          client::CheckAbove("interval_s", options.interval_s, 0),
      });
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<LoadDriver>(new LoadDriver(options));
}

LoadDriver::LoadDriver(const Options& options) : options_(options) {}
LoadDriver::~LoadDriver() = default;

absl::StatusOr<StepResult> LoadDriver::Run(const StepSpec& spec, std::string* warning) {
  if (absl::Status s = CheckStepSpec(spec); !s.ok()) return s;
  auto step = std::make_unique<Step>(options_, spec);
  absl::StatusOr<PromSnapshot> before = absl::UnavailableError("not scraped");
  if (options_.scrape != nullptr) before = options_.scrape();
  const auto before_time = SteadyClock::now();
  double drained_cpu_s = 0;
  const int64_t drained_ns = step->Drive(&drained_cpu_s);
  absl::StatusOr<PromSnapshot> after = absl::UnavailableError("not scraped");
  if (options_.scrape != nullptr) after = options_.scrape();
  const auto after_time = SteadyClock::now();

  StepResult r = step->ClientResult(drained_ns, drained_cpu_s);
  std::string warnings;
  if (options_.scrape != nullptr) {
    if (!before.ok() || !after.ok() || !step->warm_snapshot.ok()) {
      const absl::Status& bad = !before.ok() ? before.status()
                                : !after.ok() ? after.status()
                                              : step->warm_snapshot.status();
      absl::StrAppend(&warnings, "server metrics not available for this step: ", bad.ToString());
    } else {
      const double total_span = std::chrono::duration<double>(after_time - before_time).count();
      r.server_total = ServerDelta(*before, *after, options_.models, total_span);
      r.server_window = ServerDelta(*step->warm_snapshot, *after, options_.models,
                                    (drained_ns - step->warm_scrape_ns) / 1e9);
    }
  }
  if (warning != nullptr) *warning = warnings;
  return r;
}

}  // namespace rankd::loadtest
