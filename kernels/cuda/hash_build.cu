// GPU hash-table build (see hash_build.h). One thread per key: it probes from
// the key's home bucket like a lookup does and claims the first empty slot
// with a 64-bit compare-and-swap, so every stored key has no empty slot
// before it on its probe path — the only property lookups rely on (the same
// argument as HashTable::BuildParallel's).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cpu/hash_table.h"
#include "kernels/cuda/hash_build.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void HashClearKernel(int64_t* __restrict__ slot_keys, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    slot_keys[i] = kEmptyKey;
  }
}

__device__ void MarkBad(unsigned long long* bad, int64_t row) {
  atomicAdd(bad, 1ull);
  atomicMin(reinterpret_cast<long long*>(bad + 1), static_cast<long long>(row));
}

__global__ void HashInsertKernel(int64_t* slot_keys, int64_t* __restrict__ slot_rows,
                                 int64_t num_buckets, const int64_t* __restrict__ keys, int64_t n,
                                 unsigned long long* bad) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const uint64_t mask = static_cast<uint64_t>(num_buckets) - 1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t key = keys[i];
    const int64_t row = i;
    if (key == kEmptyKey) {
      MarkBad(bad, row);
      continue;
    }
    uint64_t bucket = HashKey(key) & mask;
    bool done = false;
    for (int64_t probe = 0; probe < num_buckets && !done; ++probe) {
      auto* base = reinterpret_cast<unsigned long long*>(slot_keys) +
                   static_cast<int64_t>(bucket) * kBucketSlots;
      for (int s = 0; s < kBucketSlots; ++s) {
        unsigned long long cur = *reinterpret_cast<volatile unsigned long long*>(base + s);
        if (cur == static_cast<unsigned long long>(kEmptyKey)) {
          cur = atomicCAS(base + s, static_cast<unsigned long long>(kEmptyKey),
                          static_cast<unsigned long long>(key));
          if (cur == static_cast<unsigned long long>(kEmptyKey)) {
            slot_rows[bucket * kBucketSlots + s] = row;
            done = true;
            break;
          }
        }
        if (cur == static_cast<unsigned long long>(key)) {  // stored already: a duplicate
          MarkBad(bad, row);
          done = true;
          break;
        }
      }
      bucket = (bucket + 1) & mask;
    }
    if (!done) MarkBad(bad, row);  // no free slot
  }
}

unsigned int Grid(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < (1 << 20) ? blocks : (1 << 20));
}

}  // namespace

cudaError_t LaunchHashClear(int64_t* slot_keys, int64_t num_slots, cudaStream_t stream) {
  if (num_slots <= 0) return cudaSuccess;
  if (slot_keys == nullptr) return cudaErrorInvalidValue;
  HashClearKernel<<<Grid(num_slots), kThreads, 0, stream>>>(slot_keys, num_slots);
  return cudaGetLastError();
}

cudaError_t LaunchHashInsert(int64_t* slot_keys, int64_t* slot_rows, int64_t num_buckets,
                             const int64_t* keys, int64_t n, unsigned long long* bad,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (slot_keys == nullptr || slot_rows == nullptr || keys == nullptr || bad == nullptr ||
      num_buckets <= 0 || (num_buckets & (num_buckets - 1)) != 0) {
    return cudaErrorInvalidValue;
  }
  HashInsertKernel<<<Grid(n), kThreads, 0, stream>>>(slot_keys, slot_rows, num_buckets, keys, n,
                                                     bad);
  return cudaGetLastError();
}

}  // namespace rankd::kernels::cuda
