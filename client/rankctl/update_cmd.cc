// rankctl update: streams an embedding delta file (safetensors; see
// client/safetensors_delta.h) to rankd's admin API as UpdateEmbeddings
// messages, with a producer id and consecutive sequence numbers per table
// (resumed from the server's positions unless --start_sequence is given),
// retrying a stream the server never answered; --all_replicas sends the same
// stream to every address --admin_target's host resolves to;
// --max_rows_per_second throttles it and --repeat / --repeat_for_s send the
// delta again and again (new sequence numbers each pass, one stream per pass).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/embedding_update.h"
#include "client/rankctl/commands.h"
#include "client/rankctl/model_table.h"
#include "client/replicas.h"
#include "client/safetensors_delta.h"

ABSL_DECLARE_FLAG(std::string, input);  // score_cmd.cc
ABSL_FLAG(std::string, producer_id, "",
          "update: who sends the updates (the server de-duplicates sequence numbers per "
          "producer and table); default rankctl@<hostname>");
ABSL_FLAG(std::optional<int64_t>, start_sequence, std::nullopt,
          "update: the first message's sequence number, for every table (>= 1); default: "
          "resume after the server's last sequence of this producer and table (ListModels)");
ABSL_FLAG(int64_t, rows_per_message, 4096,
          "update: at most this many rows per message (and at most --max_payload_bytes)");
ABSL_FLAG(int64_t, max_payload_bytes, 3 << 20,
          "update: at most about this many bytes of rows, ids and delete keys per message "
          "(>= 64). The default fits gRPC's default 4 MiB receive limit; rankd's admin "
          "listener takes up to its --max_message_bytes. Each message is applied atomically "
          "(docs/client.md, \"Messages\")");
ABSL_FLAG(int, retries, 3,
          "update: times a stream that failed with UNAVAILABLE or DEADLINE_EXCEEDED is sent "
          "again (same sequence numbers: the server skips what it already applied)");
ABSL_FLAG(double, max_rows_per_second, 0,
          "update: send at most this many rows (ids written plus keys deleted) per second to "
          "each replica, message by message on a steady schedule (a stream that fell behind "
          "catches up by at most 100 ms of rows); 0 = as fast as the server takes them");
ABSL_FLAG(int64_t, repeat, 1,
          "update: send the delta this many times (passes), each pass with new sequence numbers "
          "(the server applies it again) over a stream of its own; 0 = as many passes as "
          "--repeat_for_s allows");
ABSL_FLAG(double, repeat_for_s, 0,
          "update: start no new pass after this many seconds (the pass under way is finished); "
          "0 = no time limit. For a steady update load over a window, e.g. with "
          "--max_rows_per_second");
ABSL_FLAG(bool, all_replicas, false,
          "update: resolve --admin_target's host (every A/AAAA record, e.g. a Kubernetes "
          "headless Service) and send the same stream to each address");

namespace rankd::rankctl {
namespace {

struct Replica {
  std::string target;
  absl::Status status;
  rankd::v1::UpdateSummary summary;  // every pass's, merged
  int attempts = 0;                  // streams sent, retries included
  int64_t passes = 0;                // passes the server took
  int64_t rows = 0;                  // rows (ids) of those passes
  double seconds = 0;
};

// Worst first: UNAVAILABLE (exit 3) over other failures (exit 1).
int WorstExit(const std::vector<Replica>& replicas) {
  int code = kExitOk;
  for (const Replica& r : replicas) {
    const int c = ExitCodeFor(r.status);
    if (c == kExitUnavailable || code == kExitOk) code = c == kExitOk ? code : c;
  }
  return code;
}

// The update's flags, read once.
struct UpdateFlags {
  std::string model;
  std::string input;
  int64_t version = 0;
  std::optional<int64_t> start_sequence;
  int64_t rows_per_message = 0;
  int64_t max_payload_bytes = 0;
  int retries = 0;
  double max_rows_per_second = 0;
  int64_t repeat = 1;
  double repeat_for_s = 0;
  std::string producer_id;  // --producer_id, else rankctl@<hostname>

  client::RowPacer::Options pacing() const {
    client::RowPacer::Options pacing;
    pacing.max_rows_per_second = max_rows_per_second;
    return pacing;
  }
  // Several passes, or passes for a time: the output then counts passes.
  bool repeating() const { return repeat != 1 || repeat_for_s > 0; }
};

UpdateFlags ReadUpdateFlags() {
  UpdateFlags f;
  f.model = ModelFlag();
  f.input = absl::GetFlag(FLAGS_input);
  f.version = VersionFlag().value_or(0);
  f.start_sequence = absl::GetFlag(FLAGS_start_sequence);
  f.rows_per_message = absl::GetFlag(FLAGS_rows_per_message);
  f.max_payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  f.retries = absl::GetFlag(FLAGS_retries);
  f.max_rows_per_second = absl::GetFlag(FLAGS_max_rows_per_second);
  f.repeat = absl::GetFlag(FLAGS_repeat);
  f.repeat_for_s = absl::GetFlag(FLAGS_repeat_for_s);
  f.producer_id = absl::GetFlag(FLAGS_producer_id);
  if (f.producer_id.empty()) f.producer_id = client::DefaultProducerId("rankctl");
  return f;
}

// INVALID_ARGUMENT naming the first bad flag.
absl::Status CheckUpdateFlags(const UpdateFlags& f) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  if (f.model.empty()) return bad("--model: required (the model whose tables to update)");
  if (f.input.empty() || f.input == "-") {
    return bad("--input: required (a delta .safetensors file)");
  }
  if (f.version < 0) return bad(absl::StrCat("--version: must be >= 0, got ", f.version));
  if (f.start_sequence.has_value() && *f.start_sequence < 1) {
    return bad(absl::StrCat("--start_sequence: must be >= 1, got ", *f.start_sequence));
  }
  if (f.rows_per_message < 1) {
    return bad(absl::StrCat("--rows_per_message: must be >= 1, got ", f.rows_per_message));
  }
  if (f.max_payload_bytes < 64 || f.max_payload_bytes > (int64_t{1} << 30)) {
    return bad(absl::StrCat("--max_payload_bytes: must be in [64, 2^30], got ",
                            f.max_payload_bytes));
  }
  if (f.retries < 0) return bad(absl::StrCat("--retries: must be >= 0, got ", f.retries));
  if (auto pacer = client::RowPacer::Create(f.pacing()); !pacer.ok()) {
    return bad(absl::StrCat("--", pacer.status().message()));
  }
  if (f.repeat < 0) return bad(absl::StrCat("--repeat: must be >= 0, got ", f.repeat));
  if (!(f.repeat_for_s >= 0) || !std::isfinite(f.repeat_for_s)) {
    return bad(absl::StrCat("--repeat_for_s: must be >= 0, got ", f.repeat_for_s));
  }
  if (f.repeat == 0 && f.repeat_for_s == 0) {
    return bad("--repeat 0 (as many passes as time allows) needs --repeat_for_s");
  }
  return absl::OkStatus();
}

// Where to send the update: --admin_target, or with --all_replicas every
// address its host resolves to; one admin client each, index by index.
// Returns the exit code, after printing why, when one cannot be made.
std::optional<int> ConnectReplicas(
    int retries, std::vector<std::string>* targets,
    std::vector<std::unique_ptr<client::ModelControlClient>>* clients) {
  *targets = {AdminTargetFlag()};
  if (absl::GetFlag(FLAGS_all_replicas)) {
    auto resolved = client::ResolveReplicas(AdminTargetFlag());
    if (!resolved.ok()) {
      std::cerr << "rankctl update: --admin_target: " << resolved.status().message() << "\n";
      return absl::IsInvalidArgument(resolved.status()) ? kExitUsage : kExitUnavailable;
    }
    *targets = *resolved;
  }
  for (const std::string& target : *targets) {
    auto options = AdminOptionsFromFlags(target);
    if (!options.ok()) return ClientSetupFailed("update", options.status());
    options->update_retries = retries;
    auto c = client::ModelControlClient::Create(*options);
    if (!c.ok()) return ClientSetupFailed("update", c.status());
    clients->push_back(std::move(*c));
  }
  return std::nullopt;
}

// The highest sequence each table has had applied from this producer on any
// replica (ListModels), to resume after. A replica that cannot be listed
// keeps the error in its status and is sent nothing.
std::map<std::string, uint64_t> AppliedSequences(
    const UpdateFlags& f, const std::vector<std::string>& targets,
    const std::vector<std::unique_ptr<client::ModelControlClient>>& clients,
    std::vector<Replica>* replicas) {
  std::map<std::string, uint64_t> last;
  absl::Mutex mu;
  std::vector<client::ReplicaResult> listed =
      client::ForEachReplica(targets, [&](const std::string& target) -> absl::Status {
        const size_t i = std::find(targets.begin(), targets.end(), target) - targets.begin();
        auto list = clients[i]->ListModels(f.model);
        if (!list.ok()) return list.status();
        absl::MutexLock lock(&mu);
        for (const auto& m : list->models()) {
          for (const auto& [table, seq] : client::LastSequences(m, f.version, f.producer_id)) {
            last[table] = std::max(last[table], seq);
          }
        }
        return absl::OkStatus();
      });
  for (size_t i = 0; i < listed.size(); ++i) (*replicas)[i].status = listed[i].status;
  return last;
}

// The delta as UpdateEmbeddings messages, table after table, each table's
// numbered from --start_sequence or else one past `last`; prints a line per
// table. Returns kExitFailed, after printing why, when a table cannot be
// split or there is nothing to send.
std::optional<int> SplitIntoMessages(const UpdateFlags& f,
                                     const std::vector<client::TableDelta>& tables,
                                     std::map<std::string, uint64_t>* last,
                                     std::vector<rankd::v1::EmbeddingUpdate>* messages,
                                     int64_t* total_rows) {
  for (const client::TableDelta& delta : tables) {
    client::SplitOptions split;
    split.model = f.model;
    split.version = f.version;
    split.producer_id = f.producer_id;
    split.start_sequence = f.start_sequence.has_value()
                               ? static_cast<uint64_t>(*f.start_sequence)
                               : (*last)[delta.table] + 1;
    split.rows_per_message = f.rows_per_message;
    split.max_payload_bytes = f.max_payload_bytes;
    auto table_messages = client::SplitTableDelta(delta, split);
    if (!table_messages.ok()) {
      std::cerr << "rankctl update: " << f.input << ": " << table_messages.status().message()
                << "\n";
      return kExitFailed;
    }
    if (table_messages->empty()) continue;
    std::cout << absl::StrFormat(
        "table %s: %d rows, %d deletes (%s, dim %d) in %d messages, producer %s, sequences "
        "%d..%d\n",
        delta.table, delta.ids.size(), delta.delete_keys.size(),
        client::RowDtypeName(delta.dtype), delta.dim, table_messages->size(), f.producer_id,
        table_messages->front().sequence(), table_messages->back().sequence());
    *total_rows += static_cast<int64_t>(delta.ids.size());
    messages->insert(messages->end(), table_messages->begin(), table_messages->end());
  }
  if (messages->empty()) {
    std::cerr << "rankctl update: " << f.input << ": nothing to send (no ids and no deletes)\n";
    return kExitFailed;
  }
  return std::nullopt;
}

// When repeating or paced, a line on the stream each replica gets.
void PrintStreamPlan(const UpdateFlags& f,
                     const std::vector<rankd::v1::EmbeddingUpdate>& messages) {
  int64_t pass_rows = 0;  // what a pass books in the pacer: ids and delete keys
  for (const rankd::v1::EmbeddingUpdate& m : messages) pass_rows += client::MessageRows(m);
  if (f.repeating() || f.max_rows_per_second > 0) {
    std::string passes = f.repeat == 0   ? std::string("passes")
                         : f.repeat == 1 ? std::string("1 pass")
                                         : absl::StrCat(f.repeat, " passes");
    if (f.repeat_for_s > 0) {
      absl::StrAppend(&passes, f.repeat > 0 ? " within " : " for ", f.repeat_for_s, " s");
    }
    std::cout << absl::StrFormat(
        "stream: %d messages (%d rows and deletes) per pass, %s, %s, to each replica\n",
        messages.size(), pass_rows, passes,
        f.max_rows_per_second > 0 ? absl::StrCat("at most ", f.max_rows_per_second, " rows/s")
                                  : std::string("unpaced"));
  }
  std::cout.flush();  // a script waiting for the stream to start sees these lines now
}

// One replica's passes, each over a stream of its own: the first sends
// `messages`, later ones a copy renumbered by NextPass (the replica's own, so
// replicas number their passes independently). Stops after --repeat passes,
// once --repeat_for_s has passed, or at the first failed pass; the outcome
// goes into `r`.
void SendPasses(const UpdateFlags& f, const std::vector<rankd::v1::EmbeddingUpdate>& messages,
                int64_t total_rows, client::ModelControlClient* admin, Replica* r) {
  auto pacer = client::RowPacer::Create(f.pacing());  // validated by CheckUpdateFlags
  std::vector<rankd::v1::EmbeddingUpdate> own;        // a copy only when repeating
  const std::vector<rankd::v1::EmbeddingUpdate>* pass = &messages;
  const absl::Time t0 = absl::Now();
  for (int64_t p = 0; f.repeat == 0 || p < f.repeat; ++p) {
    if (p > 0) {
      if (f.repeat_for_s > 0 && absl::Now() - t0 >= absl::Seconds(f.repeat_for_s)) break;
      if (own.empty()) own = messages;
      client::NextPass(&own);
      pass = &own;
    }
    rankd::v1::UpdateSummary summary;
    int attempts = 0;
    r->status = admin->UpdateEmbeddings(*pass, &summary, {}, &attempts, &*pacer);
    r->attempts += attempts;
    if (!r->status.ok()) {
      if (f.repeating()) {
        r->status =
            absl::Status(r->status.code(), absl::StrCat("pass ", p + 1, ": ", r->status.message()));
      }
      break;
    }
    client::MergeUpdateSummary(summary, &r->summary);
    ++r->passes;
    r->rows += total_rows;
  }
  r->seconds = absl::ToDoubleSeconds(absl::Now() - t0);
}

// Every replica whose listing did not fail gets the stream, all at once.
void SendToReplicas(const UpdateFlags& f,
                    const std::vector<rankd::v1::EmbeddingUpdate>& messages, int64_t total_rows,
                    const std::vector<std::string>& targets,
                    const std::vector<std::unique_ptr<client::ModelControlClient>>& clients,
                    std::vector<Replica>* replicas) {
  std::vector<std::string> reachable;
  for (const Replica& r : *replicas) {
    if (r.status.ok()) reachable.push_back(r.target);
  }
  client::ForEachReplica(reachable, [&](const std::string& target) -> absl::Status {
    const size_t i = std::find(targets.begin(), targets.end(), target) - targets.begin();
    Replica& r = (*replicas)[i];
    SendPasses(f, messages, total_rows, clients[i].get(), &r);
    return r.status;
  });
}

// A line (and the server's summary table) per replica, then the total over
// the replicas that took everything.
void PrintResults(const UpdateFlags& f, const std::vector<Replica>& replicas, int64_t total_rows,
                  double seconds) {
  const bool repeating = f.repeating();
  int failed = 0;
  for (const Replica& r : replicas) {
    const std::string who = replicas.size() > 1 || absl::GetFlag(FLAGS_all_replicas)
                                ? absl::StrCat("replica ", r.target)
                                : r.target;
    if (!r.status.ok()) {
      ++failed;
      std::cerr << "rankctl update: " << who << ": " << DescribeAdminError(r.status) << "\n";
      std::cout << who << ": FAILED\n";
      continue;
    }
    // Repeating: passes, and streams sent (one per pass, plus retries).
    const std::string passes =
        repeating ? absl::StrCat(r.passes, r.passes == 1 ? " pass, " : " passes, ") : "";
    const char* attempts = repeating ? (r.attempts == 1 ? "stream" : "streams")
                                     : (r.attempts == 1 ? "attempt" : "attempts");
    std::cout << absl::StrFormat("%s: OK, %s%d messages in %.3f s (%d %s), %.0f rows/s\n", who,
                                 passes, r.summary.messages(), r.seconds, r.attempts, attempts,
                                 r.seconds > 0 ? r.rows / r.seconds : 0.0);
    std::cout << UpdateSummaryTable(r.summary);
  }
  int64_t delivered = 0, passes = 0;  // over the replicas that took everything
  for (const Replica& r : replicas) {
    if (!r.status.ok()) continue;
    delivered += r.rows;
    passes += r.passes;
  }
  const double rate = seconds > 0 ? delivered / seconds : 0.0;
  if (repeating) {
    std::cout << absl::StrFormat(
        "total: %d rows in %d passes to %d of %d replicas in %.3f s (%.0f rows/s)\n", delivered,
        passes, replicas.size() - failed, replicas.size(), seconds, rate);
  } else {
    std::cout << absl::StrFormat("total: %d rows to %d of %d replicas in %.3f s (%.0f rows/s)\n",
                                 total_rows, replicas.size() - failed, replicas.size(), seconds,
                                 rate);
  }
  std::cout.flush();
}

}  // namespace

int RunUpdate() {
  const UpdateFlags f = ReadUpdateFlags();
  if (absl::Status s = CheckUpdateFlags(f); !s.ok()) return UsageError("update", s.message());
  auto tables = client::ReadDeltaFile(f.input);
  if (!tables.ok()) {
    std::cerr << "rankctl update: --input: " << tables.status().message() << "\n";
    return kExitFailed;
  }

  std::vector<std::string> targets;
  std::vector<std::unique_ptr<client::ModelControlClient>> clients;
  if (std::optional<int> exit_code = ConnectReplicas(f.retries, &targets, &clients)) {
    return *exit_code;
  }
  std::vector<Replica> replicas(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) replicas[i].target = targets[i];

  // Each table's first sequence: the given one, or one past the highest the
  // server (every replica) applied for this producer and table.
  std::map<std::string, uint64_t> last;
  if (!f.start_sequence.has_value()) last = AppliedSequences(f, targets, clients, &replicas);
  std::vector<rankd::v1::EmbeddingUpdate> messages;
  int64_t total_rows = 0;
  if (std::optional<int> exit_code =
          SplitIntoMessages(f, *tables, &last, &messages, &total_rows)) {
    return *exit_code;
  }
  PrintStreamPlan(f, messages);

  const absl::Time start = absl::Now();
  SendToReplicas(f, messages, total_rows, targets, clients, &replicas);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  PrintResults(f, replicas, total_rows, seconds);
  return WorstExit(replicas);
}

}  // namespace rankd::rankctl
