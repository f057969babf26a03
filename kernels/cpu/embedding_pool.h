// Pooled embedding lookup (CPU reference): reduces bags of ids to one vector
// per bag, reading rows of fp32 / fp16 / bf16 and accumulating in fp32.
#ifndef RANKD_KERNELS_CPU_EMBEDDING_POOL_H_
#define RANKD_KERNELS_CPU_EMBEDDING_POOL_H_

#include <cstdint>

#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels {

// One table as the pooling kernel sees it. Non-owning.
struct PoolTable {
  const void* rows = nullptr;  // [num_rows, dim] of row_type, row-major
  RowType row_type = RowType::kFp32;
  int64_t num_rows = 0;
  int dim = 0;
  Pooling pooling = Pooling::kSum;
  // DYNAMIC tables: ids are keys resolved through this table; nullptr = STATIC
  // (ids index rows directly).
  const HashTableView* hash = nullptr;
  // Used for ids that do not resolve (out of range / missing key): `dim`
  // floats, or nullptr for zeros. Callers reject such ids beforehand when the
  // table's policy is ERROR; the kernel always substitutes.
  const float* default_vector = nullptr;
  // DYNAMIC tables with eviction scores (kernels/cpu/dynamic_table.h): each
  // resolved id touches scores[row] (LRU: max(score, score_now), LFU: +1,
  // relaxed atomics, so several threads may pool from one table at once).
  // nullptr or kNone = off (static tables: ignored).
  uint64_t* scores = nullptr;
  EvictionPolicy score_policy = EvictionPolicy::kNone;
  uint64_t score_now = 0;
};

// Bags of one feature. Bag b holds ids[offsets[b] .. offsets[b+1]).
struct PoolBags {
  const int64_t* ids = nullptr;
  const int64_t* offsets = nullptr;  // [num_bags + 1], offsets[0] may be > 0
  const float* weights = nullptr;    // per id (same indexing as ids), or nullptr
  int64_t num_bags = 0;
};

// Pools bags [0, bags.num_bags) into out[b * out_stride .. + dim).
// Semantics (those of torch.nn.functional.embedding_bag):
//   SUM:  sum_i w_i * row(id_i)            (w_i = 1 without weights)
//   MEAN: SUM / n  (n = ids in the bag)     empty bag -> zeros
//   MAX:  max_i w_i * row(id_i)             empty bag -> zeros
// Returns the number of ids that did not resolve (each contributed
// default_vector, weighted like a row).
int64_t PoolEmbeddings(const PoolTable& table, const PoolBags& bags,
                       float* out, int64_t out_stride);

// Converts one stored element to fp32 (exact for all three types).
float RowElementToFloat(const void* rows, RowType type, int64_t index);

// fp32 -> stored type, round-to-nearest-even (used by model generation).
uint16_t FloatToHalfBits(float f);
uint16_t FloatToBf16Bits(float f);
float HalfBitsToFloat(uint16_t h);
float Bf16BitsToFloat(uint16_t h);

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_EMBEDDING_POOL_H_
