// MessagePool: protobuf messages kept to be parsed into again. A message
// parsed into afresh grows each repeated field step by step (a packed varint
// field of n elements: 4, 8, 16, ... up to n, a copy each time) and makes
// each sub-message; one parsed into again (parsing clears it first) keeps
// its fields' capacity and its cleared sub-messages, so requests of the
// same shape parse with no allocation and no copy. A pooled message stays
// on the heap of the thread that first grew it; nothing is freed per call.
//
// Bounds: at most Options::max_messages messages are kept, each only when
// the size its holder reports to Give is at most Options::max_message_bytes.
// A repeated field holds at most about twice the largest size it had, and a
// message larger than the bound is never kept, so the pool holds at most
// about 2 * max_messages * max_message_bytes (plus the sub-messages' own
// objects, which the holder counts in its size).
//
// Ownership: Take hands a message over; Give takes it back (or deletes it).
// Threading: Take and Give may be called from any thread (one mutex, held
// for a push or a pop only).
#ifndef RANKD_SERVER_MESSAGE_POOL_H_
#define RANKD_SERVER_MESSAGE_POOL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace rankd::server {

template <typename Message>
class MessagePool {
 public:
  struct Options {
    // Most messages kept (0 or less = none: Take always makes a new one).
    int max_messages = 128;
    // Largest message kept, in the bytes its holder reports to Give.
    int64_t max_message_bytes = int64_t{256} << 10;
  };

  explicit MessagePool(const Options& options) : options_(options) {}
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;

  // A message to parse into: one kept (cleared) or a new one.
  std::unique_ptr<Message> Take() {
    {
      absl::MutexLock lock(&mu_);
      if (!kept_.empty()) {
        std::unique_ptr<Message> message = std::move(kept_.back());
        kept_.pop_back();
        return message;
      }
    }
    return std::make_unique<Message>();
  }

  // Keeps `message` (null: nothing) when `bytes`, its size, is within
  // Options::max_message_bytes and fewer than Options::max_messages are
  // kept; otherwise deletes it (outside the lock). A kept message is
  // cleared first (its arrays keep their capacity): nothing of the last
  // request stays in memory, its unknown fields included, which a holder's
  // size may not count.
  void Give(std::unique_ptr<Message> message, int64_t bytes) {
    if (message == nullptr || bytes > options_.max_message_bytes) return;
    message->Clear();
    absl::MutexLock lock(&mu_);
    if (static_cast<int64_t>(kept_.size()) < options_.max_messages) {
      kept_.push_back(std::move(message));
    }
  }

  // Messages kept now.
  int kept() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(kept_.size());
  }

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Message>> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_MESSAGE_POOL_H_
