// Checks an update against the model before anything is applied, so a bad
// message changes nothing. Errors are INVALID_ARGUMENT naming the table, the
// field and the position (the server prefixes the message index).
#ifndef RANKD_ENGINE_UPDATES_DELTA_VALIDATION_H_
#define RANKD_ENGINE_UPDATES_DELTA_VALIDATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/model/model.h"
#include "engine/updates/table_delta.h"

namespace rankd::engine {

// `delta.table` must be a valid index (the caller maps names). Checks:
// rows hold exactly ids.size() rows of the table's row size; no NaN or Inf
// value; STATIC: every id in [0, num_rows) and no delete_keys; DYNAMIC: no
// key is a reserved sentinel (kEmptyKey, kDeletedKey), at most max_keys ids;
// ids unique, delete_keys unique, and no key in both.
absl::Status ValidateDelta(const Model& model, const TableDelta& delta);

// fp32 values ([n, dim] row-major) -> rows in the table's row type
// (round-to-nearest-even for fp16 / bf16), appended to `out`.
// INVALID_ARGUMENT when values.size() != n * dim.
absl::Status EncodeRows(const EmbeddingTable& table, absl::Span<const float> values, int64_t n,
                        std::vector<uint8_t>* out);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_UPDATES_DELTA_VALIDATION_H_
