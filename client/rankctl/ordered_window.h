// OrderedWindow: the calls of `rankctl score` between the oldest line not yet
// written and the newest line read. Completions (on gRPC threads) fill in
// slots; one consumer thread takes them out oldest first, so output order is
// input order whatever the order of completion.
//
// Threading: Push, WaitForRoom and TakeDone from the one consumer thread;
// Complete from any thread. A slot stays owned by the window (shared_ptr)
// until TakeDone hands it to the consumer.
#ifndef RANKD_CLIENT_RANKCTL_ORDERED_WINDOW_H_
#define RANKD_CLIENT_RANKCTL_ORDERED_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rankd::rankctl {

template <typename Response>
class OrderedWindow {
 public:
  // One input line, from parsing to output.
  struct Slot {
    int64_t line = 0;
    bool done = false;  // guarded by the window's lock once pushed
    absl::StatusOr<Response> result;
  };

  // Blocks until fewer than `max_in_flight` calls are in flight and either
  // fewer than `max_slots` lines are held (a slow oldest call must not let
  // completed responses pile up without bound) or the oldest line is done,
  // so that the consumer's next TakeDone frees room. (Waiting for fewer held
  // lines alone would wait forever once they reach `max_slots`: only the
  // consumer takes lines out.)
  void WaitForRoom(int max_in_flight, size_t max_slots) {
    absl::MutexLock lock(&mu_);
    while (in_flight_ >= max_in_flight ||
           (!slots_.empty() && slots_.size() >= max_slots && !slots_.front()->done)) {
      cv_.Wait(&mu_);
    }
  }

  // Appends `slot`; `call` = a call is now in flight for it (else it must be
  // done already, e.g. a line that did not parse).
  void Push(std::shared_ptr<Slot> slot, bool call) {
    absl::MutexLock lock(&mu_);
    if (call) ++in_flight_;
    slots_.push_back(std::move(slot));
  }

  // The call of `slot` (pushed with call = true) ended with `result`.
  void Complete(Slot* slot, absl::StatusOr<Response> result) {
    absl::MutexLock lock(&mu_);
    slot->result = std::move(result);
    slot->done = true;
    --in_flight_;
    cv_.Signal();
  }

  // Takes the finished slots at the front; with `wait_all`, first waits until
  // no call is in flight.
  std::vector<std::shared_ptr<Slot>> TakeDone(bool wait_all) {
    absl::MutexLock lock(&mu_);
    while (wait_all && in_flight_ > 0) cv_.Wait(&mu_);
    std::vector<std::shared_ptr<Slot>> done;
    while (!slots_.empty() && slots_.front()->done) {
      done.push_back(std::move(slots_.front()));
      slots_.pop_front();
    }
    return done;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rankd::rankctl

#endif  // RANKD_CLIENT_RANKCTL_ORDERED_WINDOW_H_
