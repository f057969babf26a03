#include "server/request_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rankd::server {
namespace {

bool IsZero(const int64_t* n) { return *n == 0; }

}  // namespace

RequestBudget::Hold& RequestBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
  }
  return *this;
}

bool RequestBudget::Hold::Grow(int64_t bytes) {
  if (budget_ == nullptr || bytes <= bytes_) return true;
  // An admitted request may grow while the server drains: it is answered
  // either way.
  if (!budget_->Add(bytes - bytes_, /*new_request=*/false)) return false;
  bytes_ = bytes;
  return true;
}

void RequestBudget::Hold::Release() {
  if (budget_ == nullptr) return;
  budget_->Remove(bytes_);
  budget_ = nullptr;
}

absl::StatusOr<RequestBudget::Hold> RequestBudget::TryAcquire(int64_t bytes) {
  if (bytes < 0) bytes = 0;
  {
    // One critical section: a request is either refused as closed, or
    // counted before Close returns (so WaitUntilIdle after Close sees it).
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::UnavailableError(
          "the server is shutting down; retry (another replica will answer)");
    }
    if (!AddLocked(bytes, /*new_request=*/true)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds too many request bytes: this request's ", bytes,
          " bytes would take the requests in flight past ", max_bytes_,
          " bytes (--max_inflight_request_bytes); retry with backoff"));
    }
  }
  return Hold(this, bytes);
}

void RequestBudget::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool RequestBudget::Add(int64_t bytes, bool new_request) {
  absl::MutexLock lock(&mu_);
  return AddLocked(bytes, new_request);
}

bool RequestBudget::AddLocked(int64_t bytes, bool new_request) {
  if (max_bytes_ > 0 && bytes_ + bytes > max_bytes_) return false;
  bytes_ += bytes;
  if (new_request) ++requests_;
  if (on_change_) on_change_(bytes_);
  return true;
}

void RequestBudget::Remove(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  bytes_ -= bytes;
  --requests_;
  if (on_change_) on_change_(bytes_);
}

int64_t RequestBudget::bytes_in_flight() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t RequestBudget::requests_in_flight() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

bool RequestBudget::WaitUntilIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&IsZero, &requests_), deadline);
}

absl::Status OverBudgetError(int64_t bytes, int64_t max_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the server holds too many request bytes: this request holds ", bytes,
      " bytes once parsed, which would take the requests in flight past ", max_bytes,
      " bytes (--max_inflight_request_bytes); retry with backoff"));
}

bool RequestBudget::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace rankd::server
