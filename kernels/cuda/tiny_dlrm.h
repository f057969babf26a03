// The whole forward of a tiny DOT-interaction DLRM in one kernel (MiniDLRM and
// its n_sparse sweep): pooled embedding lookups, bottom MLP, dot interaction,
// top MLP, sigmoid. Small models are launch- and latency-bound, and one launch
// with nothing in device memory between stages is what they need. CPU twin:
// the CPU engine's forward (engine/cpu/cpu_engine.cc), i.e. kernels/cpu
// PoolEmbeddings + LinearForward + DotInteraction + sigmoid.
//
// Design (tiny_dlrm.cu has the details). One block scores a tile of 32
// candidates, lane = candidate, with several warps that split the work:
//   * bottom warps stage the dense tile and the bottom weights in shared
//     memory (cp.async) and run the bottom MLP;
//   * at the same time, lookup warps (one feature each when there are enough
//     warps) stage the top weights and pool their features' bags;
//   * then all warps compute the interaction pairs, and split each top layer
//     by groups of 4 outputs; the last layer ends in the sigmoid.
// Everything between stages stays in shared memory. Arithmetic is fp32 (FMA);
// pooling is bit-identical to PoolEmbeddings.
#ifndef RANKD_KERNELS_CUDA_TINY_DLRM_H_
#define RANKD_KERNELS_CUDA_TINY_DLRM_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dense.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::kernels::cuda {

inline constexpr int kTinyDlrmMaxLayers = 4;     // per MLP
inline constexpr int kTinyDlrmMaxWidth = 64;     // every layer's in (except top 0) and out
inline constexpr int kTinyDlrmMaxDim = 16;       // embedding dim = bottom MLP output
inline constexpr int kTinyDlrmMaxFeatures = 26;  // sparse features (one table each)
// Candidates per block (one per lane of each warp).
inline constexpr int kTinyDlrmTile = 32;

struct TinyDlrmShape {
  int num_dense = 0;                      // 1..64
  int num_bottom = 0;                     // 0..4 layers (0: x = dense, num_dense == dim)
  int bottom[kTinyDlrmMaxLayers] = {};    // output widths, each <= 64, last == dim
  int dim = 0;                            // 1..16, every table's dim
  int num_features = 0;                   // 1..26
  int num_top = 0;                        // 1..4 layers
  int top[kTinyDlrmMaxLayers] = {};       // output widths, each <= 64, last == 1
  bool self_interaction = false;

  // Top MLP input: x followed by the pairs, DotInteractionWidth(1 + F, dim, self).
  int interaction_width() const {
    const int n = 1 + num_features;
    return dim + (self_interaction ? n * (n + 1) / 2 : n * (n - 1) / 2);
  }
};

// Whether the fused kernel handles this shape on a device whose blocks may
// opt in to `max_shared_bytes` of shared memory (MaxSharedBytesPerBlock in
// device_info.h: 227 KiB on H100 / H200, 99 KiB on sm_86 / sm_89): the
// limits above, consistent widths, and shared memory (weights +
// per-candidate buffers for a tile of 32) within that. If not, `why` (when
// given) says which limit failed.
bool TinyDlrmSupported(const TinyDlrmShape& shape, int64_t max_shared_bytes,
                       std::string* why = nullptr);

// Shared memory one block uses, in bytes, and its threads (warps x 32: bottom
// MLP warps + lookup warps); 0 if unsupported on any device.
size_t TinyDlrmSharedBytes(const TinyDlrmShape& shape);
int TinyDlrmBlockThreads(const TinyDlrmShape& shape);

// Packed MLP weights: for each layer, bottom first then top, in order:
//   weight^T [in][out4] then bias [out4], out4 = out rounded up to 4,
// zero-padded. Every layer starts 16-byte aligned (all sizes are multiples of
// 4 floats). Upload the vector as-is (cudaMalloc'ed memory is aligned).
// Returns an empty vector if the layers do not match `shape` (count, in/out
// widths, missing weight or bias).
size_t TinyDlrmPackedFloats(const TinyDlrmShape& shape);
std::vector<float> PackTinyDlrmWeights(const TinyDlrmShape& shape, const LinearView* bottom,
                                       int num_bottom, const LinearView* top, int num_top);

// One sparse feature of the batch. Bags are per candidate: bag of candidate r
// = ids[offsets[r] .. offsets[r + 1]) (absolute indices, offsets has rows + 1
// entries). Request-level (shared) bags must be expanded by the caller.
struct TinyDlrmFeature {
  DeviceTable table;                 // its table; table.dim must equal shape.dim
  const int64_t* ids = nullptr;      // device
  const int64_t* offsets = nullptr;  // device, [rows + 1]
  const float* weights = nullptr;    // device, per id (same indexing as ids), or nullptr
};

struct TinyDlrmArgs {
  const float* dense = nullptr;        // device [rows, num_dense], row-major
  const float* weights = nullptr;      // device, PackTinyDlrmWeights' layout, 16-byte aligned
  TinyDlrmFeature features[kTinyDlrmMaxFeatures];  // first shape.num_features used
  int64_t rows = 0;                    // candidates
  float* scores = nullptr;             // device [rows]: sigmoid of the logit
  // Device counters [num_features]: ids that did not resolve (out of range,
  // missing key; each pooled the default vector) are added here per feature.
  // nullptr = not counted.
  unsigned long long* unresolved = nullptr;
};

// Scores args.rows candidates. rows == 0 launches nothing. Returns
// cudaErrorInvalidValue for a shape unsupported on the current device or
// inconsistent arguments
// (null pointers, a table whose dim differs, misaligned weights), else the
// launch's error. A shape needing more than 48 KB of shared memory makes the
// first launch per device raise the kernel's limit (cudaFuncSetAttribute):
// launch once (warm-up) before capturing the launch in a CUDA graph.
cudaError_t LaunchTinyDlrm(const TinyDlrmShape& shape, const TinyDlrmArgs& args,
                           cudaStream_t stream);

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_TINY_DLRM_H_
