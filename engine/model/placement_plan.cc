#include "engine/model/placement_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/host_memory.h"
#include "engine/model/model_shapes.h"

namespace rankd::engine {
namespace {

int64_t DtypeBytes(rankd::v1::DataType d) {
  return (d == rankd::v1::FP16 || d == rankd::v1::BF16) ? 2 : 4;
}

const char* TierName(Tier t) { return t == Tier::kDevice ? "DEVICE" : "HOST"; }

}  // namespace

int64_t MemoryBudget::Resolve(int64_t total_bytes, int64_t available_bytes) const {
  if (bytes > 0) return bytes;
  if (fraction > 0) return static_cast<int64_t>(fraction * static_cast<double>(total_bytes));
  return std::max<int64_t>(0, available_bytes);
}

std::string MemoryBudget::ToString() const {
  if (bytes > 0) return HumanBytes(static_cast<double>(bytes));
  if (fraction > 0) return absl::StrFormat("%.3g of the GPU's memory", fraction);
  return "the GPU's free memory";
}

absl::StatusOr<MemoryBudget> ParseMemoryBudget(absl::string_view flag, absl::string_view value) {
  MemoryBudget b;
  std::string v = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(value));
  if (v.empty()) return b;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": \"", value, "\" ", why,
        " (want bytes like 8G, 512MiB, 1073741824, or a fraction of the GPU's memory like 0.5)"));
  };
  if (v.find('.') != std::string::npos) {
    double f = 0;
    if (!absl::SimpleAtod(v, &f) || !std::isfinite(f)) return bad("is not a number");
    if (f <= 0 || f > 1) return bad("is a fraction outside (0, 1]");
    b.fraction = f;
    return b;
  }
  for (absl::string_view suffix : {"IB", "B"}) {
    if (v.size() > suffix.size() && absl::EndsWith(v, suffix)) {
      v.resize(v.size() - suffix.size());
      break;
    }
  }
  int shift = 0;
  if (!v.empty()) {
    switch (v.back()) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift > 0) v.pop_back();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n)) return bad("is not a size");
  if (n <= 0) return bad("must be positive");
  if (shift > 0 && n > (INT64_MAX >> shift)) return bad("is too large");
  b.bytes = n << shift;
  return b;
}

int64_t DenseWeightBytes(const rankd::v1::ModelConfig& c) {
  int64_t params = 0;
  int64_t in = c.num_dense();
  for (int w : c.bottom_mlp()) {
    params += (in + 1) * w;
    in = w;
  }
  in = InteractionWidth(c);
  for (int w : c.top_mlp()) {
    params += (in + 1) * w;
    in = w;
  }
  if (c.interaction().kind() == rankd::v1::DCN_V2) {
    const int64_t n = InteractionWidth(c);
    params += int64_t{c.interaction().dcn_num_layers()} *
              (2 * n * c.interaction().dcn_low_rank() + n);
  }
  return params * 4;
}

int64_t PlacementPlan::device_bytes() const {
  int64_t b = dense_bytes;
  for (const TablePlan& t : tables) b += t.device_bytes();
  return b;
}

int64_t PlacementPlan::host_bytes() const {
  int64_t b = 0;
  for (const TablePlan& t : tables) b += t.tier == Tier::kHost ? t.rows_bytes : 0;
  return b;
}

bool PlacementPlan::any_host() const {
  return std::any_of(tables.begin(), tables.end(),
                     [](const TablePlan& t) { return t.tier == Tier::kHost; });
}

std::string PlacementPlan::Describe() const {
  std::string s = absl::StrFormat("  %-14s %-6s %-6s %12s %12s %14s %12s\n", "table", "asked",
                                  "tier", "rows bytes", "index (HBM)", "cached rows", "cache (HBM)");
  for (const TablePlan& t : tables) {
    const int64_t total_rows = t.row_bytes > 0 ? t.rows_bytes / t.row_bytes : 0;
    std::string cached = "-";
    if (t.tier == Tier::kHost) {
      cached = absl::StrFormat("%d (%.1f%%)", t.cache_rows,
                               total_rows > 0 ? 100.0 * t.cache_rows / total_rows : 0.0);
    }
    s += absl::StrFormat("  %-14s %-6s %-6s %12s %12s %14s %12s\n", t.name,
                         rankd::v1::Placement_Name(t.requested), TierName(t.tier),
                         HumanBytes(t.rows_bytes), HumanBytes(t.index_bytes), cached,
                         t.tier == Tier::kHost ? HumanBytes(t.cache_bytes) : "-");
  }
  s += absl::StrFormat("  dense weights %s; HBM %s of budget %s; pinned host memory %s",
                       HumanBytes(dense_bytes), HumanBytes(device_bytes()),
                       HumanBytes(budget_bytes), HumanBytes(host_bytes()));
  const int64_t cached_tables = std::count_if(
      tables.begin(), tables.end(),
      [](const TablePlan& t) { return t.tier == Tier::kHost && t.cache_rows > 0; });
  if (cached_tables > 1) {
    s += "\n  cached rows: each table's share at the start; on the GPU, HOST tables with the "
         "same row size share one cache whose slots go to the rows read most "
         "(--host_cache_shared=false keeps the shares)";
  }
  return s;
}

PlanInput PlanInputFromConfig(const rankd::v1::ModelConfig& config) {
  PlanInput in;
  in.model = config.name();
  in.dense_bytes = DenseWeightBytes(config);
  for (const auto& t : config.tables()) {
    PlanInput::Table p;
    p.name = t.name();
    p.placement = t.placement();
    p.num_rows = t.num_rows();
    p.row_bytes = int64_t{t.dim()} * DtypeBytes(t.dtype());
    if (t.kind() == rankd::v1::DYNAMIC) {
      p.max_keys = std::max(t.max_keys(), t.num_rows());
      p.num_rows = p.max_keys;
      p.index_slots = t.capacity() > 0 ? t.capacity() : 2 * p.max_keys;
    }
    in.tables.push_back(p);
  }
  return in;
}

PlanInput PlanInputFromModel(const Model& m) {
  PlanInput in;
  in.model = m.name;
  auto linear = [](const Linear& l) { return 4 * (int64_t{l.in} * l.out + l.out); };
  for (const Linear& l : m.bottom) in.dense_bytes += linear(l);
  for (const Linear& l : m.top) in.dense_bytes += linear(l);
  for (const CrossLayer& c : m.cross) in.dense_bytes += 4 * (2 * int64_t{c.n} * c.rank + c.n);
  for (const EmbeddingTable& t : m.tables) {
    PlanInput::Table p;
    p.name = t.name;
    p.placement = t.placement;
    p.num_rows = t.num_rows;
    p.row_bytes = t.row_bytes();
    if (t.dynamic) {
      p.max_keys = std::max(t.max_keys, t.num_rows);
      p.num_rows = p.max_keys;
      // Built on the host, or to be built on the GPU from the keys.
      const size_t i = in.tables.size();
      const int64_t capacity =
          (static_cast<size_t>(m.config.tables_size()) == m.tables.size() &&
           m.config.tables(static_cast<int>(i)).capacity() > 0)
              ? m.config.tables(static_cast<int>(i)).capacity()
              : 2 * p.max_keys;
      p.index_slots = t.hash.num_slots() > 0
                          ? t.hash.num_slots()
                          : kernels::HashTable::SlotsFor(std::max<int64_t>(capacity, 1));
    }
    in.tables.push_back(p);
  }
  return in;
}

absl::StatusOr<PlacementPlan> PlanPlacement(const PlanInput& input, int64_t budget_bytes) {
  PlacementPlan plan;
  plan.budget_bytes = budget_bytes;
  plan.dense_bytes = input.dense_bytes;
  int64_t fixed = plan.dense_bytes;  // what must be in HBM whatever happens
  std::vector<std::string> forced;
  for (const PlanInput::Table& t : input.tables) {
    TablePlan p;
    p.name = t.name;
    p.requested = t.placement == rankd::v1::PLACEMENT_UNSPECIFIED ? rankd::v1::AUTO : t.placement;
    p.row_bytes = t.row_bytes;
    p.rows_bytes = t.num_rows * t.row_bytes;
    p.index_bytes = 16 * t.index_slots + 24 * t.max_keys;
    p.tier = p.requested == rankd::v1::HOST ? Tier::kHost : Tier::kDevice;
    fixed += p.index_bytes;
    if (p.requested == rankd::v1::DEVICE) {
      fixed += p.rows_bytes;
      forced.push_back(absl::StrCat(p.name, " ", HumanBytes(p.rows_bytes)));
    }
    plan.tables.push_back(p);
  }
  if (fixed > budget_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "model \"%s\" does not fit on the GPU: it needs %s of GPU memory before any table can "
        "move to host memory (dense weights %s, dynamic-table indexes, tables placed DEVICE: "
        "%s), over the device-memory budget of %s: place tables HOST or AUTO, or raise "
        "--device_memory_budget",
        input.model, HumanBytes(fixed), HumanBytes(plan.dense_bytes),
        forced.empty() ? "none" : absl::StrJoin(forced, ", "), HumanBytes(budget_bytes)));
  }
  // AUTO tables, smallest first, whole into HBM while the budget allows.
  std::vector<int> autos;
  for (int i = 0; i < static_cast<int>(plan.tables.size()); ++i) {
    if (plan.tables[i].requested == rankd::v1::AUTO) autos.push_back(i);
  }
  std::stable_sort(autos.begin(), autos.end(), [&](int a, int b) {
    return plan.tables[a].rows_bytes < plan.tables[b].rows_bytes;
  });
  int64_t left = budget_bytes - fixed;
  for (int i : autos) {
    TablePlan& p = plan.tables[i];
    if (p.rows_bytes <= left) {
      p.tier = Tier::kDevice;
      left -= p.rows_bytes;
    } else {
      p.tier = Tier::kHost;
    }
  }
  // Caches: slot maps first, then the same fraction of every HOST table's rows.
  int64_t host_rows_bytes = 0, slot_maps = 0;
  for (const TablePlan& p : plan.tables) {
    if (p.tier != Tier::kHost || p.row_bytes == 0) continue;
    host_rows_bytes += p.rows_bytes;
    slot_maps += 4 * (p.rows_bytes / p.row_bytes);
  }
  if (host_rows_bytes > 0 && left > slot_maps) {
    const double fraction =
        std::min(1.0, static_cast<double>(left - slot_maps) / static_cast<double>(host_rows_bytes));
    for (TablePlan& p : plan.tables) {
      if (p.tier != Tier::kHost || p.row_bytes == 0) continue;
      const int64_t rows = p.rows_bytes / p.row_bytes;
      p.cache_rows = std::min<int64_t>(
          {rows, static_cast<int64_t>(fraction * static_cast<double>(rows)), int64_t{INT32_MAX}});
      if (p.cache_rows > 0) p.cache_bytes = 4 * rows + p.cache_rows * p.row_bytes;
    }
  }
  return plan;
}

}  // namespace rankd::engine
