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
          "update: at most this many rows per message (and at most ~3 MiB of rows)");
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

}  // namespace

int RunUpdate() {
  const std::string model = ModelFlag();
  const std::string input = absl::GetFlag(FLAGS_input);
  const int64_t version = VersionFlag().value_or(0);
  const std::optional<int64_t> start_sequence = absl::GetFlag(FLAGS_start_sequence);
  const int64_t rows_per_message = absl::GetFlag(FLAGS_rows_per_message);
  const int retries = absl::GetFlag(FLAGS_retries);
  const double max_rows_per_second = absl::GetFlag(FLAGS_max_rows_per_second);
  const int64_t repeat = absl::GetFlag(FLAGS_repeat);
  const double repeat_for_s = absl::GetFlag(FLAGS_repeat_for_s);
  std::string producer_id = absl::GetFlag(FLAGS_producer_id);
  if (producer_id.empty()) producer_id = client::DefaultProducerId("rankctl");
  auto usage = [](const std::string& why) {
    std::cerr << "rankctl update: " << why << "\n";
    return kExitUsage;
  };
  if (model.empty()) return usage("--model: required (the model whose tables to update)");
  if (input.empty() || input == "-") {
    return usage("--input: required (a delta .safetensors file)");
  }
  if (version < 0) return usage(absl::StrCat("--version: must be >= 0, got ", version));
  if (start_sequence.has_value() && *start_sequence < 1) {
    return usage(absl::StrCat("--start_sequence: must be >= 1, got ", *start_sequence));
  }
  if (rows_per_message < 1) {
    return usage(absl::StrCat("--rows_per_message: must be >= 1, got ", rows_per_message));
  }
  if (retries < 0) return usage(absl::StrCat("--retries: must be >= 0, got ", retries));
  client::RowPacer::Options pacing;
  pacing.max_rows_per_second = max_rows_per_second;
  if (auto pacer = client::RowPacer::Create(pacing); !pacer.ok()) {
    return usage(absl::StrCat("--", pacer.status().message()));
  }
  if (repeat < 0) return usage(absl::StrCat("--repeat: must be >= 0, got ", repeat));
  if (!(repeat_for_s >= 0) || !std::isfinite(repeat_for_s)) {
    return usage(absl::StrCat("--repeat_for_s: must be >= 0, got ", repeat_for_s));
  }
  if (repeat == 0 && repeat_for_s == 0) {
    return usage("--repeat 0 (as many passes as time allows) needs --repeat_for_s");
  }

  auto tables = client::ReadDeltaFile(input);
  if (!tables.ok()) {
    std::cerr << "rankctl update: --input: " << tables.status().message() << "\n";
    return kExitFailed;
  }

  // Where to send it.
  std::vector<std::string> targets = {AdminTargetFlag()};
  if (absl::GetFlag(FLAGS_all_replicas)) {
    auto resolved = client::ResolveReplicas(AdminTargetFlag());
    if (!resolved.ok()) {
      std::cerr << "rankctl update: --admin_target: " << resolved.status().message() << "\n";
      return absl::IsInvalidArgument(resolved.status()) ? kExitUsage : kExitUnavailable;
    }
    targets = *resolved;
  }
  std::vector<std::unique_ptr<client::ModelControlClient>> clients;
  for (const std::string& target : targets) {
    auto options = AdminOptionsFromFlags(target);
    if (!options.ok()) return ClientSetupFailed("update", options.status());
    options->update_retries = retries;
    auto c = client::ModelControlClient::Create(*options);
    if (!c.ok()) return ClientSetupFailed("update", c.status());
    clients.push_back(std::move(*c));
  }
  std::vector<Replica> replicas(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) replicas[i].target = targets[i];

  // Each table's first sequence: the given one, or one past the highest the
  // server (every replica) applied for this producer and table.
  std::map<std::string, uint64_t> last;
  if (!start_sequence.has_value()) {
    absl::Mutex mu;
    std::vector<client::ReplicaResult> listed =
        client::ForEachReplica(targets, [&](const std::string& target) -> absl::Status {
          const size_t i = std::find(targets.begin(), targets.end(), target) - targets.begin();
          auto list = clients[i]->ListModels(model);
          if (!list.ok()) return list.status();
          absl::MutexLock lock(&mu);
          for (const auto& m : list->models()) {
            for (const auto& [table, seq] : client::LastSequences(m, version, producer_id)) {
              last[table] = std::max(last[table], seq);
            }
          }
          return absl::OkStatus();
        });
    for (size_t i = 0; i < listed.size(); ++i) replicas[i].status = listed[i].status;
  }

  std::vector<rankd::v1::EmbeddingUpdate> messages;
  int64_t total_rows = 0;
  for (const client::TableDelta& delta : *tables) {
    client::SplitOptions split;
    split.model = model;
    split.version = version;
    split.producer_id = producer_id;
    split.start_sequence =
        start_sequence.has_value() ? static_cast<uint64_t>(*start_sequence) : last[delta.table] + 1;
    split.rows_per_message = rows_per_message;
    auto table_messages = client::SplitTableDelta(delta, split);
    if (!table_messages.ok()) {
      std::cerr << "rankctl update: " << input << ": " << table_messages.status().message()
                << "\n";
      return kExitFailed;
    }
    if (table_messages->empty()) continue;
    std::cout << absl::StrFormat(
        "table %s: %d rows, %d deletes (%s, dim %d) in %d messages, producer %s, sequences "
        "%d..%d\n",
        delta.table, delta.ids.size(), delta.delete_keys.size(),
        client::RowDtypeName(delta.dtype), delta.dim, table_messages->size(), producer_id,
        table_messages->front().sequence(), table_messages->back().sequence());
    total_rows += static_cast<int64_t>(delta.ids.size());
    messages.insert(messages.end(), table_messages->begin(), table_messages->end());
  }
  if (messages.empty()) {
    std::cerr << "rankctl update: " << input << ": nothing to send (no ids and no deletes)\n";
    return kExitFailed;
  }
  int64_t pass_rows = 0;  // what a pass books in the pacer: ids and delete keys
  for (const rankd::v1::EmbeddingUpdate& m : messages) pass_rows += client::MessageRows(m);
  const bool repeating = repeat != 1 || repeat_for_s > 0;
  if (repeating || max_rows_per_second > 0) {
    std::string passes = repeat == 0   ? std::string("passes")
                         : repeat == 1 ? std::string("1 pass")
                                       : absl::StrCat(repeat, " passes");
    if (repeat_for_s > 0) {
      absl::StrAppend(&passes, repeat > 0 ? " within " : " for ", repeat_for_s, " s");
    }
    std::cout << absl::StrFormat(
        "stream: %d messages (%d rows and deletes) per pass, %s, %s, to each replica\n",
        messages.size(), pass_rows, passes,
        max_rows_per_second > 0 ? absl::StrCat("at most ", max_rows_per_second, " rows/s")
                                : std::string("unpaced"));
  }
  std::cout.flush();  // a script waiting for the stream to start sees these lines now

  const absl::Time start = absl::Now();
  std::vector<std::string> reachable;
  for (const Replica& r : replicas) {
    if (r.status.ok()) reachable.push_back(r.target);
  }
  client::ForEachReplica(reachable, [&](const std::string& target) -> absl::Status {
    const size_t i = std::find(targets.begin(), targets.end(), target) - targets.begin();
    Replica& r = replicas[i];
    auto pacer = client::RowPacer::Create(pacing);  // validated above
    // Each replica numbers its own passes (a copy only when repeating).
    std::vector<rankd::v1::EmbeddingUpdate> own;
    const std::vector<rankd::v1::EmbeddingUpdate>* pass = &messages;
    const absl::Time t0 = absl::Now();
    for (int64_t p = 0; repeat == 0 || p < repeat; ++p) {
      if (p > 0) {
        if (repeat_for_s > 0 && absl::Now() - t0 >= absl::Seconds(repeat_for_s)) break;
        if (own.empty()) own = messages;
        client::NextPass(&own);
        pass = &own;
      }
      rankd::v1::UpdateSummary summary;
      int attempts = 0;
      r.status = clients[i]->UpdateEmbeddings(*pass, &summary, {}, &attempts, &*pacer);
      r.attempts += attempts;
      if (!r.status.ok()) {
        if (repeating) {
          r.status =
              absl::Status(r.status.code(), absl::StrCat("pass ", p + 1, ": ", r.status.message()));
        }
        break;
      }
      client::MergeUpdateSummary(summary, &r.summary);
      ++r.passes;
      r.rows += total_rows;
    }
    r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    return r.status;
  });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  int failed = 0;
  for (const Replica& r : replicas) {
    const std::string who = targets.size() > 1 || absl::GetFlag(FLAGS_all_replicas)
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
  return WorstExit(replicas);
}

}  // namespace rankd::rankctl
