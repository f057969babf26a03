// Values and keys of `init { kind: RANDOM }` tables (docs/model-format.md,
// "Random tables"). Pure functions of (seed, table name, row, column): the
// same bits on every machine, in every process, for any thread count or
// chunking, so a benchmark's model is reproducible without its 100 GB file,
// and tools (`rankd gen-requests`) compute a table's keys from model.pbtxt
// alone.
//
// Definition (M = the splitmix64 finalizer, kernels::HashKey; G =
// 0x9e3779b97f4a7c15, the splitmix64 increment; arithmetic mod 2^64):
//   stream       = S(seed, name): h = M(seed + G); for each byte c of name:
//                  h = M(h ^ c) (RandomTableStream)
//   row_seed(r)  = M(stream + (r + 1) * G)
//   u(r, c)      = M(row_seed(r) + (c + 1) * G)
//   value(r, c)  = ((u >> 41) + 0.5) / 2^22 - 1, a float in (-1, 1) with 23
//                  random bits, symmetric around 0, exactly representable
//   row r, column c of the table = dtype(float(scale * value(r, c))), fp16
//                  and bf16 rounded to nearest even (kernels' converters)
//   key(r)       = P63((r + (M(stream ^ 0x6b6579) >> 1)) mod 2^63)
//                  (DYNAMIC tables only; 0x6b6579 is "key")
// where P63 is a bijection of [0, 2^63): x ^= x >> 32; x = x * 0xff51afd7ed558ccd
// mod 2^63; x ^= x >> 29; x = x * 0xc4ceb9fe1a85ec53 mod 2^63; x ^= x >> 32.
// So keys are distinct for distinct rows, never negative (so never the hash
// table's INT64_MIN sentinel), and key(r) for r >= num_rows is a key the
// table does not hold: request generators use those for misses.
#ifndef RANKD_ENGINE_MODEL_TABLE_INIT_H_
#define RANKD_ENGINE_MODEL_TABLE_INIT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "kernels/cpu/types.h"

namespace rankd::engine {

// The table's random stream: S(seed, name) above.
uint64_t RandomTableStream(uint64_t seed, absl::string_view table_name);

// value(r, c) above, in (-1, 1).
float RandomTableUnit(uint64_t stream, int64_t row, int64_t col);

// key(r) above: distinct for distinct rows, in [0, 2^63).
int64_t RandomTableKey(uint64_t stream, int64_t row);

// The scale `init.scale: 0` stands for: 1/sqrt(num_rows), the bound of
// DLRM_Net's embedding init (and of `rankd gen-model`'s file tables).
float DefaultRandomInitScale(int64_t num_rows);

// Writes rows [row_begin, row_end) of a [*, dim] table of `type` to `dst`
// (which points at row row_begin).
void FillRandomRows(uint64_t stream, float scale, int dim,
                    kernels::RowType type, int64_t row_begin, int64_t row_end,
                    uint8_t* dst);

// dst[i] = key(row_begin + i) for rows [row_begin, row_end).
void FillRandomKeys(uint64_t stream, int64_t row_begin, int64_t row_end,
                    int64_t* dst);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_TABLE_INIT_H_
