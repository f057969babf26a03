// The unit-bag lookup: the pooled lookup's kernel for features whose every
// bag holds one id for one row (DeviceFeature::unit_bags), launched by
// LaunchPooledLookup when PooledLookupArgs::unit_bag_chunks > 0. Internal to
// :embedding_lookup; callers use LaunchPooledLookup.
//
// One thread per (bag, 16-byte chunk of the row): it reads the bag's id
// (position id_begin + j, so no bag entries), its weight, and its chunk of
// the row, and writes the chunk of output row j. Every load of a bag is
// independent of the other bags', so a batch's row reads are all in flight
// at once; the general kernel instead walks up to 8 bags per warp through
// segment descriptors, bag offsets and shuffles, and holds 112-126
// registers (16 warps per SM) to serve every bag shape. The arithmetic is
// the general kernel's for a bag of one id, so the results are bit for bit
// the same: SUM / MEAN fmaf(w, x, 0) (MEAN divides by 1), MAX
// fmaxf(-inf, w * x); an unresolved id (outside [0, num_rows)) gives the
// default vector (or zeros) times its weight likewise, and is counted in
// PooledLookupArgs::unresolved. CPU twin: kernels/cpu/embedding_pool.h
// (PoolEmbeddings), as for the general kernel.
#ifndef RANKD_KERNELS_CUDA_UNIT_BAG_LOOKUP_H_
#define RANKD_KERNELS_CUDA_UNIT_BAG_LOOKUP_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/embedding_lookup.h"

namespace rankd::kernels::cuda {

// Pools the qualifying unit features of `args` (see above); the others are
// left to the general kernel. Needs args.unit_bag_chunks > 0 and
// args.max_bags_per_feature > 0 (cudaErrorInvalidValue otherwise).
cudaError_t LaunchUnitBagLookup(const PooledLookupArgs& args, cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_UNIT_BAG_LOOKUP_H_
