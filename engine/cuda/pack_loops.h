// The packer's two hottest loops (batch_packer.cc), written so the compiler
// vectorizes them, with an AVX2 build chosen at run time where the CPU has it
// (the portable x86-64 baseline, SSE2, has no instruction that narrows int64
// lanes to int32, so there the narrowing stays scalar). Plain C++, no CUDA.
// Both loops are tested against their one-element-at-a-time twins.
#ifndef RANKD_ENGINE_CUDA_PACK_LOOPS_H_
#define RANKD_ENGINE_CUDA_PACK_LOOPS_H_

#include <cstdint>

namespace rankd::engine::cuda {

// to[i] = from[i] where from[i] is in [0, 2^31), else -1, for i in [0, n)
// (the compact layout's int32 ids: -1 resolves to no row, as any id outside a
// table with fewer than 2^31 rows would).
void NarrowIdsToInt32(const int64_t* from, int64_t n, int32_t* to);

// Whether lengths[i] == 1 for every i in [0, n) (true for n == 0).
bool AllLengthsOne(const int32_t* lengths, int64_t n);

// For tests: the one-element-at-a-time twins, and the baseline builds that
// the functions above use on a CPU without AVX2.
void NarrowIdsToInt32Reference(const int64_t* from, int64_t n, int32_t* to);
bool AllLengthsOneReference(const int32_t* lengths, int64_t n);
void NarrowIdsToInt32Baseline(const int64_t* from, int64_t n, int32_t* to);
bool AllLengthsOneBaseline(const int32_t* lengths, int64_t n);

}  // namespace rankd::engine::cuda

#endif  // RANKD_ENGINE_CUDA_PACK_LOOPS_H_
