// Finding NaN / Inf in embedding rows at memory speed: a loaded table with a
// non-finite element would make every score that pools its row NaN, so the
// loader refuses it, naming the table and the row.
#ifndef RANKD_ENGINE_MODEL_FINITE_CHECK_H_
#define RANKD_ENGINE_MODEL_FINITE_CHECK_H_

#include <cstdint>

#include "kernels/cpu/types.h"

namespace rankd::engine {

// Index of the first element of `elements` elements of `type` at `data` that
// is NaN or +-Inf, or -1 when all are finite. Decided from the exponent
// bits (all ones), so it never converts a half to float on the fast path.
int64_t FindNonFinite(kernels::RowType type, const void* data, int64_t elements);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_FINITE_CHECK_H_
