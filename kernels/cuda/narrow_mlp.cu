// A chain of narrow Linear layers in one kernel, on TF32 tensor cores (see
// narrow_mlp.h).
//
// Shared memory, in floats, every region on a 16-byte boundary:
//   per layer: W [round8(out)][w_stride] with w_stride = round8(in) + 4, then
//   its bias [round8(out)]; the columns [in, round8(in)) and the rows
//   [out, round8(out)) are zeros, as are the bias's padding and a missing
//   bias;
//   two activation tiles [kTileRows][a_stride], a_stride = round8(widest) +
//   4, widest the widest input or intermediate of the chain; the columns
//   past a layer's width up to its round8 are zeros;
//   the partial sums of a layer's k slices, [parts][kTileRows][round8(out)
//   + 4], sized for the largest layer that slices.
// Strides of 4 mod 8 floats put the 32 lanes' fragment loads (8 rows x 4
// columns) in 32 different banks.
//
// A block starts the copies of every layer's weights (cp.async: they land
// while the block waits), waits for the previous kernel (programmatic
// dependent launch), then takes 16-row tiles of x in a grid-stride loop:
// the tile is copied into activation tile 0 (rows past the batch are zeros,
// computed and never written), each layer reads one tile and writes the
// other, and the last layer writes y.
//
// A layer is a [16, round8(in)] x [round8(in), round8(out)] product of
// mma.sync m16n8k8 TF32 steps. Its 8-column tiles form groups of at most 8,
// and where there are fewer groups than warps each group's k range is
// sliced over several warps (SplitFor): a warp takes the tiles of its group
// for its k slice, and for each k step loads the A fragment (the 16 rows,
// shared by its tiles) once and one B fragment per tile. Inputs and weights
// are rounded to TF32 (round to nearest, ties away) as they are loaded; sums
// are fp32. Sliced layers add their slices' partial sums through shared
// memory. The end of a layer adds the bias, applies the ReLU and writes the
// next tile (zeros past `out`) or y.
// CPU twin: kernels::LinearForward (kernels/cpu/dense.h) on TF32-rounded
// inputs and weights, once per layer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/grid_dependency.cuh"
#include "kernels/cuda/narrow_mlp.h"

namespace rankd::kernels::cuda {
namespace {

constexpr int kTileRows = 16;  // the m of one mma
constexpr int kBlockThreads = 256;
constexpr int kWarps = kBlockThreads / 32;
// 8-column tiles a warp holds at the most (kNarrowMlpMaxWidth columns).
constexpr int kMaxTilesPerWarp = kNarrowMlpMaxWidth / 8 / kWarps;
static_assert(kMaxTilesPerWarp * 8 * kWarps == kNarrowMlpMaxWidth, "column tiles cover the width");

__host__ __device__ inline int Round8(int v) { return (v + 7) / 8 * 8; }

// How a layer's work splits over the block's warps: its 8-column tiles in
// `groups` groups of at most kMaxTilesPerWarp, and each group's k range in
// `parts` slices (warp = group + groups * part). Slicing k gives a narrow
// layer, which has fewer tiles than warps, every warp and short chains of
// dependent mma steps; the slices' partial sums meet in shared memory.
struct Split {
  int groups = 1;
  int parts = 1;
};
__host__ __device__ inline Split SplitFor(int out) {
  const int tiles = Round8(out) / 8;
  Split s;
  s.groups = (tiles + kMaxTilesPerWarp - 1) / kMaxTilesPerWarp;
  s.parts = kWarps / s.groups;
  return s;
}
// Floats between rows of a slice's partial sums (4 mod 8: see the layout).
__host__ __device__ inline int PartialStride(int out) { return Round8(out) + 4; }

struct LayerParams {
  const float* w = nullptr;
  const float* b = nullptr;
  int in = 0;
  int out = 0;
  int w_stride = 0;  // floats between rows of W in shared memory
  int w_off = 0;     // floats from the start of shared memory
  int b_off = 0;
  bool relu = false;
  bool vec = false;  // W's rows are 16-byte copies (in % 4 == 0, W aligned)
};

struct Params {
  LayerParams layer[kNarrowMlpMaxLayers];
  int num_layers = 0;
  int act_off[2] = {0, 0};
  int a_stride = 0;
  int partial_off = 0;  // the k slices' partial sums (SplitFor)
  const float* x = nullptr;
  int64_t x_ld = 0;
  bool x_vec = false;  // x's rows are 16-byte copies
  int64_t rows = 0;
  float* y = nullptr;
  int64_t y_ld = 0;
};

// Fills the shared-memory layout of the chain; returns its size in floats.
int64_t Layout(const NarrowLayer* layers, int n, Params* p) {
  int64_t at = 0;
  int widest = layers[0].in;
  for (int i = 0; i < n; ++i) {
    LayerParams& l = p->layer[i];
    l.in = layers[i].in;
    l.out = layers[i].out;
    l.w_stride = Round8(l.in) + 4;
    l.w_off = static_cast<int>(at);
    at += int64_t{Round8(l.out)} * l.w_stride;
    l.b_off = static_cast<int>(at);
    at += Round8(l.out);
    if (i + 1 < n) widest = std::max(widest, l.out);
  }
  p->a_stride = Round8(widest) + 4;
  for (int t = 0; t < 2; ++t) {
    p->act_off[t] = static_cast<int>(at);
    at += int64_t{kTileRows} * p->a_stride;
  }
  int64_t partials = 0;
  for (int i = 0; i < n; ++i) {
    const Split split = SplitFor(layers[i].out);
    if (split.parts > 1) {
      partials = std::max<int64_t>(
          partials, int64_t{split.parts} * kTileRows * PartialStride(layers[i].out));
    }
  }
  p->partial_off = static_cast<int>(at);
  return at + partials;
}

__device__ __forceinline__ void CopyAsync4(float* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void CopyAsync16(float* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// Global -> shared copies (cp.async, sm_80 and later) do not pass through
// registers: a thread issues all of its copies at once, so their latencies
// overlap, and they land while the block waits for the previous kernel.
__device__ __forceinline__ void WaitForAsyncCopies() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Starts copying rows [0, rows) x columns [0, cols) of src (rows src_ld
// floats apart) to dst (rows dst_ld apart). vec: 16-byte copies (cols,
// src_ld and dst_ld multiples of 4, both ends aligned). Short rows are
// copied several to a warp.
__device__ void CopyRowsAsync(float* dst, int dst_ld, const float* src, int64_t src_ld, int rows,
                              int cols, bool vec) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int unit = vec ? 4 : 1;
  const int per_row = cols / unit;
  const int rows_per_pass = per_row >= 32 ? 1 : 32 / per_row;
  const int sub_row = per_row >= 32 ? 0 : lane / per_row;
  const int first = per_row >= 32 ? lane : lane % per_row;
  const int step = per_row >= 32 ? 32 : per_row;
  if (sub_row >= rows_per_pass) return;
  for (int r = warp * rows_per_pass + sub_row; r < rows; r += kWarps * rows_per_pass) {
    const float* s = src + r * src_ld;
    float* d = dst + r * dst_ld;
    for (int c = first; c < per_row; c += step) {
      if (vec) {
        CopyAsync16(d + 4 * c, s + 4 * c);
      } else {
        CopyAsync4(d + c, s + c);
      }
    }
  }
}

// Writes zeros to rows [0, rows) x columns [col_begin, col_end) of dst.
__device__ void ZeroBlock(float* dst, int ld, int rows, int col_begin, int col_end) {
  for (int r = threadIdx.x >> 5; r < rows; r += kWarps) {
    for (int c = col_begin + (threadIdx.x & 31); c < col_end; c += 32) dst[r * ld + c] = 0.0f;
  }
}

// Starts copying every layer's weights and bias (see the layout) and writes
// their padding.
__device__ void StageWeights(const Params& p, float* smem) {
  for (int li = 0; li < p.num_layers; ++li) {
    const LayerParams& l = p.layer[li];
    float* w = smem + l.w_off;
    CopyRowsAsync(w, l.w_stride, l.w, l.in, l.out, l.in, l.vec);
    ZeroBlock(w, l.w_stride, l.out, l.in, Round8(l.in));
    ZeroBlock(w + l.out * l.w_stride, l.w_stride, Round8(l.out) - l.out, 0, Round8(l.in));
    float* b = smem + l.b_off;
    for (int o = threadIdx.x; o < Round8(l.out); o += kBlockThreads) {
      if (o < l.out && l.b != nullptr) {
        CopyAsync4(b + o, l.b + o);
      } else {
        b[o] = 0.0f;
      }
    }
  }
}

// Starts copying rows [row0, row0 + valid_rows) of x into the activation
// tile; zeros for the rows past the batch and the columns past the input.
__device__ void StageInputTile(const Params& p, int64_t row0, int valid_rows, float* act) {
  const int in0 = p.layer[0].in;
  CopyRowsAsync(act, p.a_stride, p.x + row0 * p.x_ld, p.x_ld, valid_rows, in0, p.x_vec);
  ZeroBlock(act, p.a_stride, valid_rows, in0, Round8(in0));
  ZeroBlock(act + valid_rows * p.a_stride, p.a_stride, kTileRows - valid_rows, 0, Round8(in0));
}

__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// d += a b for one m16n8k8 TF32 step (fragments as the PTX ISA lays them
// out: lane = 4 g + t holds A (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4),
// B (t, g), (t + 4, g), and D (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1)).
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The end of a layer for one output: bias, ReLU, and the store to the next
// activation tile (zeros past `out`, the next layer's k padding) or to y.
__device__ __forceinline__ void Finish(const LayerParams& l, const float* bias, float sum, int r,
                                       int c, float* out_act, int a_stride, float* y,
                                       int64_t y_ld, int valid_rows) {
  float v = sum + bias[c];
  if (l.relu) v = fmaxf(v, 0.0f);
  if (out_act != nullptr) {
    out_act[r * a_stride + c] = c < l.out ? v : 0.0f;
  } else if (r < valid_rows && c < l.out) {
    y[r * y_ld + c] = v;
  }
}

// One layer over the block's tile (see the top of the file). out_act: the
// next activation tile, or null for the last layer, which writes rows
// [0, valid_rows) of y (already offset to the tile). Every thread of the
// block calls it (it may hold a barrier).
__device__ void RunLayer(const LayerParams& l, float* smem, const float* in_act, int a_stride,
                         int partial_off, float* out_act, float* __restrict__ y, int64_t y_ld,
                         int valid_rows) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tiles = Round8(l.out) / 8;
  const Split split = SplitFor(l.out);
  const int group = warp % split.groups;
  const int part = warp / split.groups;
  const float* w = smem + l.w_off;
  const float* bias = smem + l.b_off;
  const int steps = Round8(l.in) / 8;
  float acc[kMaxTilesPerWarp][4] = {};
  if (part < split.parts) {
    const float* a_lo = in_act + g * a_stride + t;  // rows g and g + 8
    const float* a_hi = a_lo + 8 * a_stride;
    const int k_begin = 8 * (part * steps / split.parts);
    const int k_end = 8 * ((part + 1) * steps / split.parts);
#pragma unroll 2
    for (int k0 = k_begin; k0 < k_end; k0 += 8) {
      const uint32_t a[4] = {ToTf32(a_lo[k0]), ToTf32(a_hi[k0]), ToTf32(a_lo[k0 + 4]),
                             ToTf32(a_hi[k0 + 4])};
#pragma unroll
      for (int j = 0; j < kMaxTilesPerWarp; ++j) {
        const int tile = group + j * split.groups;
        if (tile >= tiles) break;
        const float* b = w + (tile * 8 + g) * l.w_stride + k0 + t;
        Mma(acc[j], a, ToTf32(b[0]), ToTf32(b[4]));
      }
    }
  }
  if (split.parts == 1) {
#pragma unroll
    for (int j = 0; j < kMaxTilesPerWarp; ++j) {
      const int tile = group + j * split.groups;
      if (tile >= tiles) break;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        Finish(l, bias, acc[j][i], g + (i >> 1) * 8, tile * 8 + 2 * t + (i & 1), out_act,
               a_stride, y, y_ld, valid_rows);
      }
    }
    return;
  }
  // Each slice's partial sums, then every thread sums the slices of its outputs.
  const int ps = PartialStride(l.out);
  float* partial = smem + partial_off;
  if (part < split.parts) {
#pragma unroll
    for (int j = 0; j < kMaxTilesPerWarp; ++j) {
      const int tile = group + j * split.groups;
      if (tile >= tiles) break;
      float* dst = partial + (part * kTileRows + g) * ps + tile * 8 + 2 * t;
      *reinterpret_cast<float2*>(dst) = make_float2(acc[j][0], acc[j][1]);
      *reinterpret_cast<float2*>(dst + 8 * ps) = make_float2(acc[j][2], acc[j][3]);
    }
  }
  __syncthreads();
  for (int r = warp; r < kTileRows; r += kWarps) {
    for (int c = lane; c < Round8(l.out); c += 32) {
      float sum = 0.0f;
      for (int q = 0; q < split.parts; ++q) sum += partial[(q * kTileRows + r) * ps + c];
      Finish(l, bias, sum, r, c, out_act, a_stride, y, y_ld, valid_rows);
    }
  }
}

__global__ void __launch_bounds__(kBlockThreads) NarrowMlpKernel(const Params p) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  LetDependentGridsLaunch();
  StageWeights(p, smem);
  WaitForPrerequisiteGrid();  // x may be the previous kernel's output; the weights may not

  const int64_t tiles = (p.rows + kTileRows - 1) / kTileRows;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row0 = tile * kTileRows;
    const int valid_rows = static_cast<int>(p.rows - row0 < kTileRows ? p.rows - row0 : kTileRows);
    __syncthreads();  // the previous tile's layers are done with the activation tiles
    StageInputTile(p, row0, valid_rows, smem + p.act_off[0]);
    WaitForAsyncCopies();  // this thread's copies (the weights too, the first time)
    for (int li = 0; li < p.num_layers; ++li) {
      __syncthreads();  // every thread's copies and writes, and the layer before, are done
      const bool last = li + 1 == p.num_layers;
      RunLayer(p.layer[li], smem, smem + p.act_off[li % 2], p.a_stride, p.partial_off,
               last ? nullptr : smem + p.act_off[(li + 1) % 2], p.y + row0 * p.y_ld, p.y_ld,
               valid_rows);
    }
  }
}

bool Aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

int64_t NarrowMlpSharedBytes(const NarrowLayer* layers, int num_layers) {
  if (layers == nullptr || num_layers < 1 || num_layers > kNarrowMlpMaxLayers) return -1;
  for (int i = 0; i < num_layers; ++i) {
    const NarrowLayer& l = layers[i];
    if (l.in < 1 || l.out < 1 || l.in > kNarrowMlpMaxWidth || l.out > kNarrowMlpMaxWidth) return -1;
    if (i > 0 && l.in != layers[i - 1].out) return -1;
    if (l.act != Activation::kNone && l.act != Activation::kRelu) return -1;
  }
  Params p;
  return Layout(layers, num_layers, &p) * static_cast<int64_t>(sizeof(float));
}

bool NarrowMlpFits(const NarrowLayer* layers, int num_layers) {
  const int64_t bytes = NarrowMlpSharedBytes(layers, num_layers);
  return bytes > 0 && bytes <= kNarrowMlpMaxSharedBytes;
}

cudaError_t LaunchNarrowMlp(const NarrowMlpArgs& a, bool chained, cudaStream_t stream) {
  if (!NarrowMlpFits(a.layers, a.num_layers) || a.rows < 0) return cudaErrorInvalidValue;
  const NarrowLayer& first = a.layers[0];
  const NarrowLayer& last = a.layers[a.num_layers - 1];
  if (a.x_ld < first.in || a.y_ld < last.out) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  Params p;
  const int64_t bytes = Layout(a.layers, a.num_layers, &p) * static_cast<int64_t>(sizeof(float));
  for (int i = 0; i < a.num_layers; ++i) {
    if (a.layers[i].weight == nullptr) return cudaErrorInvalidValue;
    LayerParams& l = p.layer[i];
    l.w = a.layers[i].weight;
    l.b = a.layers[i].bias;
    l.relu = a.layers[i].act == Activation::kRelu;
    l.vec = l.in % 4 == 0 && Aligned16(l.w);
  }
  p.num_layers = a.num_layers;
  p.x = a.x;
  p.x_ld = a.x_ld;
  p.x_vec = first.in % 4 == 0 && a.x_ld % 4 == 0 && Aligned16(a.x);
  p.rows = a.rows;
  p.y = a.y;
  p.y_ld = a.y_ld;

  const size_t smem = static_cast<size_t>(bytes);
  cudaError_t e = cudaFuncSetAttribute(NarrowMlpKernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  // One wave of resident blocks at the most; each copies the weights once
  // and loops over tiles.
  int device = 0, sms = 0, per_sm = 0;
  if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) {
    return e;
  }
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, NarrowMlpKernel, kBlockThreads, smem);
  if (e != cudaSuccess) return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;
  const int64_t tiles = (a.rows + kTileRows - 1) / kTileRows;
  const int64_t blocks = std::min<int64_t>(tiles, int64_t{sms} * per_sm);

  cudaLaunchAttribute attr;
  cudaLaunchConfig_t config = ChainableConfig(dim3(static_cast<unsigned>(blocks)),
                                              dim3(kBlockThreads), stream, chained, &attr);
  config.dynamicSmemBytes = smem;
  return cudaLaunchKernelEx(&config, NarrowMlpKernel, p);
}

}  // namespace rankd::kernels::cuda
