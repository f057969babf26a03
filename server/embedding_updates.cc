#include "server/embedding_updates.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/model/error_text.h"
#include "engine/updates/live_tables.h"
#include "server/lifecycle/update_message.h"

namespace rankd::server {

// Summaries by (model, version, table); shared with journal replays.
struct EmbeddingUpdateStream::Tally {
  absl::Mutex mu;
  int64_t messages ABSL_GUARDED_BY(mu) = 0;
  std::map<std::tuple<std::string, int64_t, std::string>, rankd::v1::TableUpdateSummary> tables
      ABSL_GUARDED_BY(mu);
};

namespace {

// Producer ids are at most this long (they are echoed into errors).
constexpr size_t kMaxEchoBytes = engine::kMaxQuotedBytes;
// Longer model or table names cannot exist (model names are directories).
constexpr size_t kMaxNameBytes = 255;

// Shape checks that need no model.
absl::Status CheckMessage(const rankd::v1::EmbeddingUpdate& m) {
  if (m.model().empty()) return absl::InvalidArgumentError("model: required");
  if (m.table().empty()) return absl::InvalidArgumentError("table: required");
  if (m.model().size() > kMaxNameBytes || m.table().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        m.model().size() > kMaxNameBytes ? "model" : "table", ": a name of ",
        std::max(m.model().size(), m.table().size()), " bytes; names are at most ",
        kMaxNameBytes));
  }
  if (m.version() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version: must be >= 0 (0 = every live version), got ", m.version()));
  }
  if (!m.rows().empty() && !m.raw_rows().empty()) {
    return absl::InvalidArgumentError("rows and raw_rows: both set; send one of them");
  }
  if (!m.ids().empty() && m.rows().empty() && m.raw_rows().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows: ", m.ids_size(), " ids but no rows (rows or raw_rows)"));
  }
  if (m.ids().empty() && (!m.rows().empty() || !m.raw_rows().empty())) {
    return absl::InvalidArgumentError("rows: rows without ids");
  }
  if (m.sequence() > 0 && m.producer_id().empty()) {
    return absl::InvalidArgumentError("producer_id: required with a sequence number");
  }
  if (m.producer_id().size() > kMaxEchoBytes) {
    return absl::InvalidArgumentError(absl::StrCat("producer_id: ", m.producer_id().size(),
                                                   " bytes; at most ", kMaxEchoBytes));
  }
  return absl::OkStatus();
}

}  // namespace

EmbeddingUpdateStream::EmbeddingUpdateStream(ModelManager* manager,
                                             EmbeddingUpdateListener* listener)
    : manager_(manager), listener_(listener), tally_(std::make_shared<Tally>()) {}

absl::Status EmbeddingUpdateStream::Apply(rankd::v1::EmbeddingUpdate message) {
  const int64_t index = index_++;
  auto prefix = [index](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("message ", index, ": ", s.message()));
  };
  if (absl::Status s = CheckMessage(message); !s.ok()) return prefix(s);
  auto msg = std::make_shared<const rankd::v1::EmbeddingUpdate>(std::move(message));
  std::shared_ptr<Tally> tally = tally_;
  EmbeddingUpdateListener* listener = listener_;
  // Runs on every version the message reaches, now or (a version that was
  // loading) before that version takes traffic.
  UpdateFn apply = [msg, tally, listener](ServedVersion& version) -> absl::Status {
    absl::StatusOr<engine::LiveTables::Applied> applied =
        ApplyUpdateMessage(*msg, version.name(), version.version(), version.live_tables());
    if (!applied.ok()) return applied.status();
    engine::LiveTables* live = version.live_tables();
    const engine::EmbeddingTable& table =
        live->model().tables[TableIndex(live->model(), msg->table())];
    {
      absl::MutexLock lock(&tally->mu);
      rankd::v1::TableUpdateSummary& s =
          tally->tables[{version.name(), version.version(), table.name}];
      s.set_model(version.name());
      s.set_version(version.version());
      s.set_table(table.name);
      if (applied->duplicate) {
        s.set_duplicates(s.duplicates() + 1);
        return absl::OkStatus();
      }
      const engine::DeltaResult& r = applied->result;
      s.set_messages(s.messages() + 1);
      s.set_rows_applied(s.rows_applied() + r.rows_applied);
      s.set_keys_inserted(s.keys_inserted() + r.keys_inserted);
      s.set_keys_updated(s.keys_updated() + r.keys_updated);
      s.set_keys_deleted(s.keys_deleted() + r.keys_deleted);
      s.set_keys_not_found(s.keys_not_found() + r.keys_not_found);
      s.set_keys_evicted(s.keys_evicted() + r.keys_evicted);
    }
    if (listener != nullptr) {
      const double lag =
          msg->timestamp_unix_us() > 0
              ? (absl::ToUnixMicros(absl::Now()) - msg->timestamp_unix_us()) / 1e6
              : -1;
      listener->OnUpdateApplied(version.name(), table.name, applied->result, lag);
      if (table.dynamic) {
        for (const auto& d : live->DynamicTables()) {
          if (d.table == table.name) {
            listener->OnDynamicTableKeys(version.name(), table.name, d.keys, d.max_keys);
          }
        }
      }
    }
    return absl::OkStatus();
  };
  absl::Status s = manager_->ApplyUpdate(msg->model(), msg->version(), apply, msg.get());
  if (!s.ok()) return prefix(s);
  absl::MutexLock lock(&tally_->mu);
  ++tally_->messages;
  return absl::OkStatus();
}

rankd::v1::UpdateSummary EmbeddingUpdateStream::Summary() const {
  rankd::v1::UpdateSummary out;
  absl::MutexLock lock(&tally_->mu);
  out.set_messages(tally_->messages);
  for (const auto& [key, s] : tally_->tables) *out.add_tables() = s;
  return out;
}

}  // namespace rankd::server
