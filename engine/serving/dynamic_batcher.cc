#include "engine/serving/dynamic_batcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rankd::engine {

absl::Status DynamicBatcher::ValidateOptions(const Options& o) {
  auto error = [](absl::string_view field, absl::string_view rule,
                  int64_t got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DynamicBatcher options: ", field, " must be ", rule, ", got ", got));
  };
  if (o.max_batch_candidates <= 0) {
    return error("max_batch_candidates", "> 0", o.max_batch_candidates);
  }
  if (o.max_queue_delay_us < 0) {
    return error("max_queue_delay_us", ">= 0", o.max_queue_delay_us);
  }
  if (o.preferred_batch_candidates < 0 ||
      o.preferred_batch_candidates > o.max_batch_candidates) {
    return error(
        "preferred_batch_candidates",
        absl::StrCat("in [0, max_batch_candidates = ", o.max_batch_candidates,
                     "] (0 = max_batch_candidates)"),
        o.preferred_batch_candidates);
  }
  if (o.max_queue_requests <= 0) {
    return error("max_queue_requests", "> 0", o.max_queue_requests);
  }
  if (o.default_timeout_us <= 0) {
    return error("default_timeout_us", "> 0", o.default_timeout_us);
  }
  if (o.idle_spin_us < 0 || o.idle_spin_us > 10000) {
    return error("idle_spin_us", "in [0, 10000]", o.idle_spin_us);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    const Options& options, Clock* clock, QueueDepthCallback on_queue_depth,
    DroppedCallback on_dropped) {
  absl::Status valid = ValidateOptions(options);
  if (!valid.ok()) return valid;
  if (clock == nullptr) clock = RealClock::Get();
  return std::unique_ptr<DynamicBatcher>(
      new DynamicBatcher(options, clock, std::move(on_queue_depth),
                         std::move(on_dropped)));
}

DynamicBatcher::DynamicBatcher(const Options& options, Clock* clock,
                               QueueDepthCallback on_queue_depth,
                               DroppedCallback on_dropped)
    : options_(options),
      preferred_candidates_(options.preferred_batch_candidates > 0
                                ? options.preferred_batch_candidates
                                : options.max_batch_candidates),
      max_queue_delay_(absl::Microseconds(options.max_queue_delay_us)),
      default_timeout_(absl::Microseconds(options.default_timeout_us)),
      clock_(clock),
      on_queue_depth_(std::move(on_queue_depth)),
      on_dropped_(std::move(on_dropped)) {}

DynamicBatcher::~DynamicBatcher() {
  Stop();
  // Every admitted request gets its callback, even if nobody drained us.
  std::vector<Dropped> left;
  {
    absl::MutexLock lock(&mu_);
    for (QueuedRequest& q : queue_) {
      left.push_back({std::move(q),
                      absl::UnavailableError(
                          "model instance shut down before the request ran")});
    }
    queue_.clear();
    queued_candidates_ = 0;
    if (!left.empty()) ReportDepthLocked();
  }
  CompleteDropped(&left, clock_->Now());
}

absl::Status DynamicBatcher::Enqueue(QueuedRequest item) {
  const int32_t n = item.request.num_candidates;
  if (n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_candidates must be >= 1, got ", n));
  }
  if (item.scores.size() != static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores has ", item.scores.size(),
                     " entries for num_candidates = ", n));
  }
  if (!item.done) {
    return absl::InvalidArgumentError("QueuedRequest has no done callback");
  }
  absl::MutexLock lock(&mu_);
  // Read under the lock so enqueue times never decrease along the queue: the
  // front is always the oldest request (TryCutBatch relies on it).
  const absl::Time now = clock_->Now();
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError(
        "model instance is shutting down; not accepting requests");
  }
  if (queue_.size() >= static_cast<size_t>(options_.max_queue_requests)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue full: ", queue_.size(),
        " requests queued (max_queue_requests = ", options_.max_queue_requests,
        ")"));
  }
  if (item.deadline == absl::InfiniteFuture()) {
    item.deadline = now + default_timeout_;
  } else if (item.deadline <= now) {
    return absl::DeadlineExceededError(
        "deadline passed before the request was queued");
  }
  if (absl::Status admit = AdmitByDeadlineLocked(item, now); !admit.ok()) return admit;
  item.enqueue_time = now;
  // Wake a waiting worker only when its wake-up time may be wrong: it waits
  // forever on an empty queue, the batch may now be full, or this request
  // expires before the oldest one's delay runs out. Anything else is picked
  // up at the wake-up it already has, saving a context switch per request.
  const bool wake =
      queue_.empty() || queued_candidates_ + n >= preferred_candidates_ ||
      item.deadline < queue_.front().enqueue_time + max_queue_delay_;
  queued_candidates_ += n;
  queue_.push_back(std::move(item));
  enqueued_.fetch_add(1, std::memory_order_release);
  ReportDepthLocked();
  // A spinning worker sees the request without a signal, and re-evaluates
  // the queue under the lock when it does.
  if (wake && spinning_ == 0) cv_.Signal();
  return absl::OkStatus();
}

DynamicBatcher::CutResult DynamicBatcher::CutLocked(
    absl::Time now, std::vector<Dropped>* dropped) {
  // 1. Take out expired and cancelled requests (anywhere in the queue: each
  //    has its own deadline), keeping the others in order.
  absl::Time earliest_deadline = absl::InfiniteFuture();
  const size_t before = queue_.size();
  size_t kept = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    QueuedRequest& q = queue_[i];
    absl::Status why;
    if (now >= q.deadline) {
      why = absl::DeadlineExceededError(absl::StrCat(
          "deadline exceeded after ",
          absl::FormatDuration(now - q.enqueue_time), " in the queue"));
    } else if (q.cancelled && q.cancelled()) {
      why = absl::CancelledError("request cancelled while queued");
    }
    if (!why.ok()) {
      queued_candidates_ -= q.request.num_candidates;
      dropped->push_back({std::move(q), std::move(why)});
      continue;
    }
    earliest_deadline = std::min(earliest_deadline, q.deadline);
    if (kept != i) queue_[kept] = std::move(q);
    ++kept;
  }
  queue_.erase(queue_.begin() + kept, queue_.end());

  CutResult result;
  const bool due = !queue_.empty() &&
                   (stopped_.load(std::memory_order_relaxed) ||
                    queued_candidates_ >= preferred_candidates_ ||
                    now >= queue_.front().enqueue_time + max_queue_delay_);
  if (!due) {
    if (!queue_.empty()) {
      result.wake_time = std::min(
          queue_.front().enqueue_time + max_queue_delay_, earliest_deadline);
    }
    if (queue_.size() != before) ReportDepthLocked();
    return result;
  }

  // 2. Whole requests, FIFO, within max_batch_candidates; the first always
  //    fits (an oversize request runs alone rather than never).
  Batch batch;
  batch.cut_time = now;
  while (!queue_.empty()) {
    const int32_t n = queue_.front().request.num_candidates;
    if (!batch.requests.empty() &&
        batch.num_candidates + n > options_.max_batch_candidates) {
      break;
    }
    batch.num_candidates += n;
    queued_candidates_ -= n;
    batch.requests.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  NoteCutLocked(now, batch.num_candidates);
  ReportDepthLocked();
  result.batch = std::move(batch);
  return result;
}

void DynamicBatcher::NoteCutLocked(absl::Time now, int64_t candidates) {
  if (backlogged_) {
    window_candidates_ += candidates;
    window_time_ += now - last_cut_;
    if (window_time_ >= kDrainWindow) {
      const double sample =
          static_cast<double>(window_candidates_) / absl::ToDoubleSeconds(window_time_);
      drain_rate_ = drain_rate_ == 0 ? sample : 0.5 * drain_rate_ + 0.5 * sample;
      window_candidates_ = 0;
      window_time_ = absl::ZeroDuration();
    }
  }
  last_cut_ = now;
  // The next cut waits only for a worker when a batch is due at once.
  backlogged_ = !queue_.empty() &&
                (max_queue_delay_ == absl::ZeroDuration() ||
                 queued_candidates_ >= preferred_candidates_ ||
                 now >= queue_.front().enqueue_time + max_queue_delay_);
}

absl::Status DynamicBatcher::AdmitByDeadlineLocked(const QueuedRequest& item,
                                                   absl::Time now) const {
  if (!options_.admit_by_deadline || drain_rate_ <= 0 || queue_.empty()) {
    return absl::OkStatus();
  }
  const int64_t ahead = queued_candidates_;
  const absl::Duration wait =
      absl::Seconds(static_cast<double>(ahead + item.request.num_candidates) / drain_rate_);
  // Half the time left: the rest covers its batch's compute, the completion
  // and the answer's way back, and an optimistic rate. A queue of half the
  // deadline still keeps every worker busy, so goodput does not suffer.
  const absl::Duration left = item.deadline - now;
  if (wait <= left / 2) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "overloaded: the request would wait about ",
      absl::FormatDuration(absl::Trunc(wait, absl::Microseconds(100))), " in the queue (", ahead,
      " candidates ahead, draining at about ", static_cast<int64_t>(drain_rate_),
      " candidates/s), more than half of the ",
      absl::FormatDuration(absl::Trunc(left, absl::Microseconds(100))),
      " left before its deadline; retry later or elsewhere"));
}

double DynamicBatcher::drain_rate() const {
  absl::MutexLock lock(&mu_);
  return drain_rate_;
}

void DynamicBatcher::CompleteDropped(std::vector<Dropped>* dropped,
                                     absl::Time now) const {
  for (Dropped& d : *dropped) {
    RequestTiming timing;
    timing.enqueue_time = d.item.enqueue_time;
    timing.queue = now - d.item.enqueue_time;
    timing.total = timing.queue;
    if (on_dropped_) on_dropped_(d.item, d.status, timing);
    std::move(d.item.done)(std::move(d.status), timing);
  }
  dropped->clear();
}

DynamicBatcher::CutResult DynamicBatcher::TryCutBatch(absl::Time now) {
  std::vector<Dropped> dropped;
  CutResult result;
  {
    absl::MutexLock lock(&mu_);
    result = CutLocked(now, &dropped);
    // A cut may leave due requests behind (more than one batch's worth).
    if (result.batch.has_value() && !queue_.empty()) cv_.Signal();
  }
  CompleteDropped(&dropped, now);
  return result;
}

std::optional<Batch> DynamicBatcher::NextBatch() {
  std::vector<Dropped> dropped;
  bool spun = false;  // at most one spin per call, then sleep
  mu_.Lock();
  for (;;) {
    const absl::Time now = clock_->Now();
    CutResult cut = CutLocked(now, &dropped);
    if (cut.batch.has_value()) {
      // Hand what is left to another waiting worker.
      if (!queue_.empty()) cv_.Signal();
      mu_.Unlock();
      CompleteDropped(&dropped, now);
      return std::move(cut.batch);
    }
    if (!dropped.empty()) {
      // Callbacks run outside the lock; the queue may change meanwhile, so
      // evaluate again rather than wait on a stale wake-up time.
      mu_.Unlock();
      CompleteDropped(&dropped, now);
      mu_.Lock();
      continue;
    }
    if (stopped_.load(std::memory_order_relaxed) && queue_.empty()) break;
    if (cut.wake_time == absl::InfiniteFuture() && !spun && options_.idle_spin_us > 0 &&
        spinning_ == 0) {
      // Empty queue: watch for a request without the lock, then evaluate
      // again (a request that came meanwhile is in the queue by then). One
      // spinner at a time; other idle workers sleep.
      spun = true;
      ++spinning_;
      const uint64_t seen = enqueued_.load(std::memory_order_acquire);
      mu_.Unlock();
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(options_.idle_spin_us);
      while (enqueued_.load(std::memory_order_acquire) == seen &&
             !stopped_.load(std::memory_order_acquire) &&
             std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      mu_.Lock();
      --spinning_;
      continue;
    }
    if (cut.wake_time == absl::InfiniteFuture()) {
      cv_.Wait(&mu_);
    } else {
      // A timeout rather than a deadline: the wake-up time is on `clock_`,
      // which need not be the real clock. A FakeClock is re-read after the
      // equivalent real time; spurious wake-ups just loop.
      cv_.WaitWithTimeout(&mu_, cut.wake_time - clock_->Now());
    }
  }
  mu_.Unlock();
  return std::nullopt;
}

void DynamicBatcher::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_.store(true, std::memory_order_release);
  cv_.SignalAll();
}

int64_t DynamicBatcher::queued_requests() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t DynamicBatcher::queued_candidates() const {
  absl::MutexLock lock(&mu_);
  return queued_candidates_;
}

void DynamicBatcher::ReportDepthLocked() {
  if (on_queue_depth_) {
    on_queue_depth_(static_cast<int64_t>(queue_.size()), queued_candidates_);
  }
}

}  // namespace rankd::engine
