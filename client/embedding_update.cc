#include "client/embedding_update.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/option_checks.h"

namespace rankd::client {

int64_t RowDtypeSize(RowDtype dtype) { return dtype == RowDtype::kF32 ? 4 : 2; }

absl::string_view RowDtypeName(RowDtype dtype) {
  switch (dtype) {
    case RowDtype::kF32:
      return "F32";
    case RowDtype::kF16:
      return "F16";
    case RowDtype::kBF16:
      return "BF16";
  }
  return "?";
}

absl::StatusOr<std::vector<rankd::v1::EmbeddingUpdate>> SplitTableDelta(
    const TableDelta& delta, const SplitOptions& options) {
  const std::string where = absl::StrCat("table \"", delta.table, "\": ");
  if (delta.table.empty()) return absl::InvalidArgumentError("table: must not be empty");
  if (options.model.empty()) return absl::InvalidArgumentError("model: must not be empty");
  if (absl::Status s = FirstError({
          CheckAtLeast("version", options.version, 0),
          CheckAtLeast("rows_per_message", options.rows_per_message, 1),
          CheckAtLeast("max_payload_bytes", options.max_payload_bytes, 64),
      });
      !s.ok()) {
    return s;
  }
  if (options.start_sequence > 0 && options.producer_id.empty()) {
    return absl::InvalidArgumentError(
        "producer_id: required with a sequence number (the server de-duplicates per producer "
        "and table)");
  }
  const int64_t n = static_cast<int64_t>(delta.ids.size());
  const int64_t elem = RowDtypeSize(delta.dtype);
  if (n > 0 && delta.dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, "dim must be >= 1, got ", delta.dim));
  }
  // Overflow-safe: n * dim * elem against the byte count.
  if (n > 0 && (delta.dim > INT64_MAX / elem / n ||
                static_cast<int64_t>(delta.row_bytes.size()) != n * delta.dim * elem)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "rows hold ", delta.row_bytes.size(), " bytes, want ", n, " ids x ",
                     delta.dim, " x ", elem, " (", RowDtypeName(delta.dtype), ")"));
  }
  if (n == 0 && !delta.row_bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "rows without ids"));
  }
  std::unordered_set<int64_t> ids;
  ids.reserve(delta.ids.size());
  for (int64_t id : delta.ids) {
    if (!ids.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "id ", id, " appears twice"));
    }
  }
  std::unordered_set<int64_t> deletes;
  for (int64_t key : delta.delete_keys) {
    if (ids.count(key) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "key ", key, " is both deleted and written"));
    }
    if (!deletes.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "delete key ", key, " appears twice"));
    }
  }

  const int64_t timestamp = options.timestamp_unix_us != 0 ? options.timestamp_unix_us
                                                           : absl::ToUnixMicros(absl::Now());
  const int64_t row_cost = delta.dim * elem + 8;  // a row and its id
  std::vector<rankd::v1::EmbeddingUpdate> messages;
  uint64_t sequence = options.start_sequence;
  size_t next_delete = 0;
  int64_t next_row = 0;
  while (next_delete < delta.delete_keys.size() || next_row < n) {
    rankd::v1::EmbeddingUpdate& m = messages.emplace_back();
    m.set_model(options.model);
    m.set_version(options.version);
    m.set_table(delta.table);
    m.set_producer_id(options.producer_id);
    m.set_sequence(sequence);
    if (options.start_sequence > 0) ++sequence;
    m.set_timestamp_unix_us(timestamp);
    int64_t budget = options.max_payload_bytes;
    const size_t deletes_here = std::min<size_t>(delta.delete_keys.size() - next_delete,
                                                 static_cast<size_t>(budget / 8));
    m.mutable_delete_keys()->Add(delta.delete_keys.begin() + next_delete,
                                 delta.delete_keys.begin() + next_delete + deletes_here);
    next_delete += deletes_here;
    budget -= static_cast<int64_t>(deletes_here) * 8;
    if (next_delete < delta.delete_keys.size()) continue;  // full of deletes
    int64_t rows_here = std::min({n - next_row, options.rows_per_message, budget / row_cost});
    // A message always makes progress: one row alone if it is that large
    // (unless deletes share this message; then the row goes in the next).
    if (rows_here == 0 && n > next_row && deletes_here == 0) rows_here = 1;
    if (rows_here == 0) continue;
    m.mutable_ids()->Add(delta.ids.begin() + next_row, delta.ids.begin() + next_row + rows_here);
    const size_t begin = static_cast<size_t>(next_row * delta.dim * elem);
    const size_t bytes = static_cast<size_t>(rows_here * delta.dim * elem);
    if (delta.dtype == RowDtype::kF32) {
      auto* rows = m.mutable_rows();
      rows->Resize(static_cast<int>(rows_here * delta.dim), 0.0f);
      std::memcpy(rows->mutable_data(), delta.row_bytes.data() + begin, bytes);
    } else {
      m.set_raw_rows(delta.row_bytes.substr(begin, bytes));
    }
    next_row += rows_here;
  }
  return messages;
}

std::map<std::string, uint64_t> LastSequences(const rankd::v1::ModelStatus& model,
                                              int64_t version, absl::string_view producer_id) {
  std::map<std::string, uint64_t> last;
  for (const rankd::v1::VersionStatus& v : model.versions()) {
    const bool targeted = version != 0 ? v.version() == version
                                       : (v.state() == rankd::v1::READY ||
                                          v.state() == rankd::v1::LOADING);
    if (!targeted) continue;
    for (const rankd::v1::ProducerPosition& p : v.update_positions()) {
      if (p.producer_id() != producer_id) continue;
      uint64_t& seq = last[p.table()];
      seq = std::max(seq, p.last_sequence());
    }
  }
  return last;
}

std::string DefaultProducerId(absl::string_view prefix) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::strncpy(host, "localhost", sizeof(host) - 1);
  }
  return absl::StrCat(prefix, "@", host);
}

void NextPass(std::vector<rankd::v1::EmbeddingUpdate>* messages, int64_t timestamp_unix_us) {
  std::unordered_map<std::string, uint64_t> per_table;
  for (const rankd::v1::EmbeddingUpdate& m : *messages) {
    if (m.sequence() > 0) ++per_table[m.table()];
  }
  const int64_t timestamp =
      timestamp_unix_us != 0 ? timestamp_unix_us : absl::ToUnixMicros(absl::Now());
  for (rankd::v1::EmbeddingUpdate& m : *messages) {
    if (m.sequence() > 0) m.set_sequence(m.sequence() + per_table[m.table()]);
    m.set_timestamp_unix_us(timestamp);
  }
}

void MergeUpdateSummary(const rankd::v1::UpdateSummary& from, rankd::v1::UpdateSummary* into) {
  into->set_messages(into->messages() + from.messages());
  for (const rankd::v1::TableUpdateSummary& t : from.tables()) {
    rankd::v1::TableUpdateSummary* to = nullptr;
    for (rankd::v1::TableUpdateSummary& u : *into->mutable_tables()) {
      if (u.model() == t.model() && u.version() == t.version() && u.table() == t.table()) {
        to = &u;
        break;
      }
    }
    if (to == nullptr) {
      *into->add_tables() = t;
      continue;
    }
    to->set_messages(to->messages() + t.messages());
    to->set_duplicates(to->duplicates() + t.duplicates());
    to->set_rows_applied(to->rows_applied() + t.rows_applied());
    to->set_keys_inserted(to->keys_inserted() + t.keys_inserted());
    to->set_keys_updated(to->keys_updated() + t.keys_updated());
    to->set_keys_deleted(to->keys_deleted() + t.keys_deleted());
    to->set_keys_not_found(to->keys_not_found() + t.keys_not_found());
    to->set_keys_evicted(to->keys_evicted() + t.keys_evicted());
  }
}

int64_t MessageRows(const rankd::v1::EmbeddingUpdate& message) {
  return static_cast<int64_t>(message.ids_size()) + message.delete_keys_size();
}

namespace {

class SteadyPacerClock final : public PacerClock {
 public:
  absl::Duration Now() override {
    return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
  void SleepUntil(absl::Duration t) override {
    // SleepFor can return early by a hair on some systems: loop on the clock.
    for (absl::Duration left = t - Now(); left > absl::ZeroDuration(); left = t - Now()) {
      absl::SleepFor(left);
    }
  }
};

}  // namespace

PacerClock* PacerClock::Real() {
  static PacerClock* const clock = new SteadyPacerClock();
  return clock;
}

absl::StatusOr<RowPacer> RowPacer::Create(const Options& options, PacerClock* clock) {
  if (!std::isfinite(options.max_rows_per_second) || options.max_rows_per_second < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_rows_per_second: must be >= 0 (0 = unlimited), got ", options.max_rows_per_second));
  }
  if (options.max_catch_up < absl::ZeroDuration() ||
      options.max_catch_up == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("max_catch_up: must be finite and >= 0, got ",
                                                   absl::FormatDuration(options.max_catch_up)));
  }
  return RowPacer(options, clock != nullptr ? clock : PacerClock::Real());
}

absl::Duration RowPacer::Pace(int64_t rows) {
  rows_ += rows;
  if (options_.max_rows_per_second == 0) return absl::ZeroDuration();
  // The time `n` rows take at the rate, in whole nanoseconds: the schedule is
  // origin_ + Offset(rows booked since origin_), so it never drifts.
  auto offset = [this](int64_t n) {
    return absl::Nanoseconds(
        std::llround(static_cast<double>(n) * 1e9 / options_.max_rows_per_second));
  };
  const absl::Duration now = clock_->Now();
  if (!started_) {
    started_ = true;
    origin_ = now;
    booked_ = 0;
    next_ = now;
  }
  // Behind by more than the catch-up allowance: forget the rest of the lag.
  if (now - next_ > options_.max_catch_up) {
    origin_ = now - options_.max_catch_up;
    booked_ = 0;
    next_ = origin_;
  }
  absl::Duration waited = absl::ZeroDuration();
  if (next_ > now) {
    clock_->SleepUntil(next_);
    waited = next_ - now;
  }
  booked_ += rows;
  next_ = origin_ + offset(booked_);
  return waited;
}

}  // namespace rankd::client
