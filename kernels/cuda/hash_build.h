// Builds a dynamic table's hash arrays on the GPU from its keys tensor, in
// the layout of kernels/cpu/hash_table.h (CPU twin: HashTable::Build, whose
// lookup results it reproduces for every key, stored or not; like
// BuildParallel, slot positions may differ when keys race for one bucket).
// For big tables the host build is the slow part of loading (one random cache
// miss per key); the GPU inserts billions of keys a second.
#ifndef RANKD_KERNELS_CUDA_HASH_BUILD_H_
#define RANKD_KERNELS_CUDA_HASH_BUILD_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rankd::kernels::cuda {

// Sets slot_keys[0, num_slots) to kEmptyKey (slot_rows need no init).
cudaError_t LaunchHashClear(int64_t* slot_keys, int64_t num_slots, cudaStream_t stream);

// Inserts keys[i] -> row i for i < n into a cleared table of `num_buckets`
// buckets (a power of two). Keys that cannot be stored are counted in bad[0]
// (duplicates of an earlier-inserted key, kEmptyKey, or no free slot), and
// bad[1] receives the smallest such row (atomicMin; set it to INT64_MAX
// first). Both are device memory.
cudaError_t LaunchHashInsert(int64_t* slot_keys, int64_t* slot_rows, int64_t num_buckets,
                             const int64_t* keys, int64_t n, unsigned long long* bad,
                             cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_HASH_BUILD_H_
