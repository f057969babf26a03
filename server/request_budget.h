// Server-wide admission of Score requests: by bytes of requests in flight
// (--max_inflight_request_bytes), and closed for good when the server starts
// to drain (SIGTERM); counts the admitted requests the drain waits for.
//
// Why: gRPC bounds one message (--max_message_bytes), not how many are held
// at once. Each admitted Score request keeps its parsed message (ids, dense
// values, weights) and its response until it is answered; without a bound,
// many concurrent large requests grow memory without limit. A request whose
// bytes would take the total past the cap is refused at once
// (RESOURCE_EXHAUSTED, retryable), before it is parsed, and costs nothing
// more.
//
// What a request is charged: first its wire size (known before parsing),
// then, once parsed, the larger of that and the memory its message and
// response hold (Grow). The charge is returned when the Hold is destroyed
// (after the answer is sent to gRPC).
//
// Threading: every method is thread-safe. Holds may be destroyed on any
// thread. The budget must outlive every Hold it gave out.
#ifndef RANKD_SERVER_REQUEST_BUDGET_H_
#define RANKD_SERVER_REQUEST_BUDGET_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rankd::server {

// RESOURCE_EXHAUSTED for a request that holds `bytes` once parsed, which
// would take the requests in flight past `max_bytes` (a Hold's Grow failed).
absl::Status OverBudgetError(int64_t bytes, int64_t max_bytes);

class RequestBudget {
 public:
  struct Options {
    // Most bytes of admitted requests held at once; 0 = no limit. A single
    // request may use the whole budget, so it should be at least the largest
    // message gRPC accepts (checked by `rankd serve`).
    int64_t max_bytes = 0;
    // Optional: called with the bytes in flight after every change, under
    // the budget's lock (keep it to a gauge update; it must not call the
    // budget).
    std::function<void(int64_t bytes_in_flight)> on_change;
  };

  // Bytes of one admitted request; given back when destroyed. Movable.
  class Hold {
   public:
    Hold(Hold&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
    }
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Release(); }

    // Raises this request's charge to `bytes` (never lowers it). False, with
    // the charge unchanged, when that would take the total past the cap.
    bool Grow(int64_t bytes);
    int64_t bytes() const { return bytes_; }

   private:
    friend class RequestBudget;
    Hold(RequestBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    void Release();

    RequestBudget* budget_;
    int64_t bytes_;
  };

  explicit RequestBudget(Options options)
      : max_bytes_(options.max_bytes), on_change_(std::move(options.on_change)) {}

  // A hold on `bytes` (>= 0). RESOURCE_EXHAUSTED (retryable; the message
  // gives the bytes and the flag) when the bytes in flight plus `bytes`
  // would exceed max_bytes; UNAVAILABLE once Close was called.
  absl::StatusOr<Hold> TryAcquire(int64_t bytes);
  // From now on every TryAcquire is refused UNAVAILABLE ("the server is
  // shutting down"); holds already given out are unaffected.
  void Close();
  // Whether Close was called.
  bool closed() const;

  int64_t max_bytes() const { return max_bytes_; }
  int64_t bytes_in_flight() const;
  int64_t requests_in_flight() const;
  // Waits until no Hold is outstanding or `deadline` passes; true when none
  // is left.
  bool WaitUntilIdle(absl::Time deadline) const;

 private:
  // Adds `bytes` (and a request) unless that passes the cap; false then.
  bool Add(int64_t bytes, bool new_request) ABSL_LOCKS_EXCLUDED(mu_);
  bool AddLocked(int64_t bytes, bool new_request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(int64_t bytes);

  const int64_t max_bytes_;
  const std::function<void(int64_t)> on_change_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_REQUEST_BUDGET_H_
