#include "engine/updates/delta_validation.h"

#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine {
namespace {

constexpr int64_t kTombstoneKey = kernels::kDeletedKey;

absl::Status Bad(const EmbeddingTable& t, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("table ", t.name, ": ", what));
}

// Whether every element is finite, from the exponent bits (all ones = Inf
// or NaN), so a message of millions of values is checked at memory speed;
// the slow path only runs to name the first bad element.
bool AllFinite(const EmbeddingTable& t, absl::Span<const uint8_t> rows) {
  if (t.row_type == kernels::RowType::kFp32) {
    const size_t n = rows.size() / 4;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, rows.data() + 4 * i, 4);
      bad |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
    }
    return bad == 0;
  }
  const uint16_t mask = t.row_type == kernels::RowType::kFp16 ? 0x7C00 : 0x7F80;
  const size_t n = rows.size() / 2;
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, rows.data() + 2 * i, 2);
    bad |= static_cast<uint32_t>((bits & mask) == mask);
  }
  return bad == 0;
}

absl::Status CheckFinite(const EmbeddingTable& t, absl::Span<const uint8_t> rows) {
  if (AllFinite(t, rows)) return absl::OkStatus();
  const int64_t elements = static_cast<int64_t>(rows.size()) /
                           static_cast<int64_t>(kernels::RowTypeBytes(t.row_type));
  for (int64_t i = 0; i < elements; ++i) {
    const float v = kernels::RowElementToFloat(rows.data(), t.row_type, i);
    if (!std::isfinite(v)) {
      return Bad(t, absl::StrCat("rows: ids[", i / t.dim, "] element ", i % t.dim, " is ", v,
                                 " (only finite values)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIds(const EmbeddingTable& t, absl::Span<const int64_t> ids,
                      absl::flat_hash_set<int64_t>* seen) {
  seen->reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (!t.dynamic && (id < 0 || id >= t.num_rows)) {
      return Bad(t, absl::StrCat("ids[", i, "] = ", id, " is out of range [0, ", t.num_rows,
                                 ")"));
    }
    if (t.dynamic && (id == kernels::kEmptyKey || id == kTombstoneKey)) {
      return Bad(t, absl::StrCat("ids[", i, "] = ", id,
                                 " is a reserved key (INT64_MIN and INT64_MIN + 1 mark empty "
                                 "and deleted hash slots)"));
    }
    if (!seen->insert(id).second) {
      return Bad(t, absl::StrCat("ids[", i, "] = ", id, " repeats an earlier id of the message"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDeletes(const EmbeddingTable& t, absl::Span<const int64_t> keys,
                          const absl::flat_hash_set<int64_t>& ids) {
  if (keys.empty()) return absl::OkStatus();
  if (!t.dynamic) {
    return Bad(t, "delete_keys: the table is STATIC (only DYNAMIC tables delete keys)");
  }
  absl::flat_hash_set<int64_t> seen;
  seen.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t k = keys[i];
    if (k == kernels::kEmptyKey || k == kTombstoneKey) {
      return Bad(t, absl::StrCat("delete_keys[", i, "] = ", k, " is a reserved key"));
    }
    if (!seen.insert(k).second) {
      return Bad(t, absl::StrCat("delete_keys[", i, "] = ", k, " repeats an earlier key"));
    }
    if (ids.contains(k)) {
      return Bad(t, absl::StrCat("delete_keys[", i, "] = ", k,
                                 " is also in ids (a key is deleted or written, not both)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDelta(const Model& model, const TableDelta& delta) {
  if (delta.table < 0 || delta.table >= static_cast<int>(model.tables.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("table index ", delta.table, " is not a table of model ", model.name));
  }
  const EmbeddingTable& t = model.tables[delta.table];
  const int64_t n = static_cast<int64_t>(delta.ids.size());
  const int64_t want = n * t.row_bytes();
  if (static_cast<int64_t>(delta.rows.size()) != want) {
    return Bad(t, absl::StrCat("rows: ", delta.rows.size(), " bytes for ", n, " ids of ",
                               t.row_bytes(), " bytes (dim ", t.dim, ") each; want ", want));
  }
  if (t.dynamic && n > t.max_keys) {
    return Bad(t, absl::StrCat(n, " ids in one message, more than the table's max_keys ",
                               t.max_keys));
  }
  absl::flat_hash_set<int64_t> ids;
  absl::Status s = CheckIds(t, delta.ids, &ids);
  if (s.ok()) s = CheckDeletes(t, delta.delete_keys, ids);
  if (s.ok()) s = CheckFinite(t, delta.rows);
  return s;
}

absl::Status EncodeRows(const EmbeddingTable& table, absl::Span<const float> values, int64_t n,
                        std::vector<uint8_t>* out) {
  if (static_cast<int64_t>(values.size()) != n * table.dim) {
    return Bad(table, absl::StrCat("rows: ", values.size(), " values for ", n,
                                   " ids of dim ", table.dim, "; want ", n * table.dim));
  }
  const size_t start = out->size();
  out->resize(start + values.size() * kernels::RowTypeBytes(table.row_type));
  uint8_t* dst = out->data() + start;
  switch (table.row_type) {
    case kernels::RowType::kFp32:
      std::memcpy(dst, values.data(), values.size() * sizeof(float));
      break;
    case kernels::RowType::kFp16:
    case kernels::RowType::kBf16:
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t bits = table.row_type == kernels::RowType::kFp16
                                  ? kernels::FloatToHalfBits(values[i])
                                  : kernels::FloatToBf16Bits(values[i]);
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine
