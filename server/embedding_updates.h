// One UpdateEmbeddings stream on the server side: each wire message is
// checked, converted into engine::TableDelta (zero-copy for fp32 tables and
// raw rows; server/lifecycle/update_message.h) and applied through
// ModelManager::ApplyUpdate to the versions it names (which, with
// --update_log_dir, also logs it durably before Apply returns); the
// per-table summary and the metrics are kept here.
//
// Ownership: borrows the manager and the listener (both outlive the
// stream). Threading: one stream is used by one thread (its RPC handler);
// journal replays of its messages (a version that loaded meanwhile) run
// under the manager's update lock and write the same shared tally.
#ifndef RANKD_SERVER_EMBEDDING_UPDATES_H_
#define RANKD_SERVER_EMBEDDING_UPDATES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/embedding_update_listener.h"
#include "rankd/v1/model_control.pb.h"
#include "server/lifecycle/model_manager.h"

namespace rankd::server {

class EmbeddingUpdateStream {
 public:
  // `listener` may be null.
  EmbeddingUpdateStream(ModelManager* manager, EmbeddingUpdateListener* listener);

  // Applies the stream's next message (its index is the number of messages
  // before it). Errors name the message index, the table and the position;
  // nothing of a failed message is applied to the version that failed it.
  absl::Status Apply(rankd::v1::EmbeddingUpdate message);

  // Messages applied so far (duplicates included) and the per-table counts.
  rankd::v1::UpdateSummary Summary() const;

 private:
  struct Tally;
  ModelManager* const manager_;
  EmbeddingUpdateListener* const listener_;
  int64_t index_ = 0;
  std::shared_ptr<Tally> tally_;
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_EMBEDDING_UPDATES_H_
