// Fuzz target: a stream of EmbeddingUpdate messages -> conversion to table
// deltas, validation and apply (server/lifecycle/update_message.h ->
// engine::LiveTables -> HostTableStore) on a small live model with a static
// table and two growable dynamic tables (LRU, LFU; fp32 rows; fuzz_models.h).
//
// Input: up to kMaxMessages records, each a 2-byte little-endian length and
// that many bytes of a serialized rankd.v1.EmbeddingUpdate. The model is
// built afresh per input, so a crash reproduces from its input alone.
//
// Checked after every message, whatever its status: every dynamic table
// holds unique keys, at most max_keys of them, as many as LiveTables
// reports; the static table reads back whole; and a request still scores.
// After an applied (not duplicate) message with fp32 or raw rows: each id
// reads back exactly the row sent, and each deleted key not re-sent is gone.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/updates/host_table_store.h"
#include "engine/updates/live_tables.h"
#include "rankd/v1/model_control.pb.h"
#include "server/lifecycle/update_message.h"
#include "tests/fuzz/fuzz_models.h"
#include "tests/fuzz/quiet_protobuf.h"

namespace {

using rankd::engine::EmbeddingTable;
using rankd::engine::LiveTables;

constexpr int kMaxMessages = 8;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

// Table `t`'s content: key (dynamic) or row index (static) -> row bytes.
std::map<int64_t, std::string> ReadTable(const LiveTables& live, int t) {
  std::map<int64_t, std::string> content;
  const EmbeddingTable& table = live.model().tables[t];
  const size_t row_bytes = table.row_bytes();
  int64_t next_row = 0;
  absl::Status s = live.primary_store().ReadTable(
      t, [&](absl::Span<const int64_t> keys, absl::Span<const uint8_t> rows) {
        const size_t n = table.dynamic ? keys.size() : rows.size() / row_bytes;
        if (rows.size() != n * row_bytes) Fail("ReadTable: rows and keys disagree");
        for (size_t i = 0; i < n; ++i) {
          const int64_t key = table.dynamic ? keys[i] : next_row++;
          auto [it, inserted] = content.emplace(
              key, std::string(reinterpret_cast<const char*>(rows.data() + i * row_bytes),
                               row_bytes));
          if (!inserted) Fail("ReadTable: key " + std::to_string(key) + " appears twice");
        }
        return absl::OkStatus();
      });
  if (!s.ok()) Fail("ReadTable failed: " + s.ToString());
  return content;
}

void CheckTables(const LiveTables& live) {
  const rankd::engine::Model& m = live.model();
  std::map<std::string, LiveTables::DynamicTableStats> stats;
  for (const auto& d : live.DynamicTables()) stats[d.table] = d;
  for (size_t t = 0; t < m.tables.size(); ++t) {
    const EmbeddingTable& table = m.tables[t];
    const auto content = ReadTable(live, static_cast<int>(t));
    if (!table.dynamic) {
      if (static_cast<int64_t>(content.size()) != table.num_rows) Fail("static table lost rows");
      continue;
    }
    const auto& st = stats[table.name];
    if (st.keys != static_cast<int64_t>(content.size()) || st.keys > st.max_keys ||
        st.max_keys != rankd::fuzz::kUpdateMaxKeys) {
      Fail("dynamic table " + table.name + ": " + std::to_string(content.size()) +
           " keys read, stats say " + std::to_string(st.keys) + " of " +
           std::to_string(st.max_keys));
    }
  }
}

// After an applied message: what it wrote reads back.
void CheckApplied(const LiveTables& live, const rankd::v1::EmbeddingUpdate& msg) {
  const int t = rankd::server::TableIndex(live.model(), msg.table());
  const EmbeddingTable& table = live.model().tables[t];
  std::string sent;
  if (!msg.raw_rows().empty()) {
    sent = msg.raw_rows();
  } else if (table.row_type == rankd::kernels::RowType::kFp32) {
    sent.assign(reinterpret_cast<const char*>(msg.rows().data()), msg.rows_size() * 4);
  } else {
    return;  // encoded from fp32 by the server: compared by the unit tests
  }
  const auto content = ReadTable(live, t);
  const size_t row_bytes = table.row_bytes();
  std::set<int64_t> written;
  for (int i = 0; i < msg.ids_size(); ++i) {
    written.insert(msg.ids(i));
    auto it = content.find(msg.ids(i));
    if (it == content.end()) Fail("an applied id is missing: " + std::to_string(msg.ids(i)));
    if (it->second != sent.substr(i * row_bytes, row_bytes)) {
      Fail("an applied id reads back another row: " + std::to_string(msg.ids(i)));
    }
  }
  for (int64_t k : msg.delete_keys()) {
    if (!written.count(k) && content.count(k)) Fail("a deleted key is still stored");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankd::fuzz::QuietProtobufLogs();
  std::shared_ptr<rankd::engine::Model> model = rankd::fuzz::MakeUpdateModel();
  auto live = std::make_shared<LiveTables>(
      model, std::vector<std::shared_ptr<rankd::engine::TableStore>>{
                 std::make_shared<rankd::engine::HostTableStore>(model)});
  auto engine = rankd::engine::CpuEngine::Create(model, {1, 256});
  if (!engine.ok()) Fail("CpuEngine::Create: " + engine.status().ToString());
  rankd::engine::testing::RandomRequestSpec request_spec;
  request_spec.unresolved_fraction = 0.3;
  const rankd::engine::testing::OwnedRequest request =
      rankd::engine::testing::MakeRandomRequest(*model, request_spec);

  size_t pos = 0;
  for (int n = 0; n < kMaxMessages && pos + 2 <= size; ++n) {
    const size_t len = std::min<size_t>(data[pos] | (data[pos + 1] << 8), size - pos - 2);
    rankd::v1::EmbeddingUpdate msg;
    const bool parsed = msg.ParseFromArray(data + pos + 2, static_cast<int>(len));
    pos += 2 + len;
    if (!parsed) continue;
    auto applied = rankd::server::ApplyUpdateMessage(msg, "fuzz", 1, live.get());
    if (!applied.ok()) {
      const absl::StatusCode code = applied.status().code();
      if (code != absl::StatusCode::kInvalidArgument && code != absl::StatusCode::kNotFound) {
        Fail("unexpected apply error: " + applied.status().ToString());
      }
    }
    CheckTables(*live);
    if (applied.ok() && !applied->duplicate) CheckApplied(*live, msg);
    LiveTables::BatchScope scope(live.get());
    auto scores = (*engine)->Score(request.view());
    if (!scores.ok()) Fail("scoring after an update failed: " + scores.status().ToString());
  }
  return 0;
}
