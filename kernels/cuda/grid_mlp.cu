// The grid MLP (grid_mlp.h): the layout and why are in the header.
#include "kernels/cuda/grid_mlp.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace rankd::kernels::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 128;  // 4 warps, 2 x 2 over a tile
constexpr int kKStep = 32;     // k per staged slice
constexpr int kStride = kKStep + 4;  // floats per staged row: fragment loads hit 32 banks
constexpr int kStages = 4;           // slices in flight
constexpr int kMaxDevices = 64;

// Tile shapes: TM = 32 mi rows, TN = 16 ni columns; a warp owns mi m16 x ni n8 tiles.
enum Shape : int { k64x64 = 0, k32x32 = 1, k32x16 = 2, kNumShapes = 3 };
constexpr int kShapeRows[kNumShapes] = {64, 32, 32};
constexpr int kShapeCols[kNumShapes] = {64, 32, 16};
constexpr size_t kSmemBytes = sizeof(float) * kStages * (64 + 64) * kStride;

struct Params {
  GridMlpArgs a;
  int shape[kGridMlpMaxLayers];
};

__device__ __forceinline__ void CopyAsync16(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// d += a b for one m16n8k8 TF32 step (fragments as the PTX ISA lays them
// out: lane = 4 g + t holds A (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4),
// B (t, g), (t + 4, g), and D (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)).
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Starts the copy of k slice [k0, k0 + kKStep) of the tile's input rows
// (row0..) and weight rows (col0..) into stage buffers a, b; what lies past
// rows, out or in is zero-filled.
template <int TM, int TN>
__device__ __forceinline__ void StageSlice(const float* in, int64_t in_ld, int64_t rows,
                                          const GridMlpLayer& l, int64_t row0, int col0, int k0,
                                          float* a, float* b) {
  constexpr int kChunks = kKStep / 4;  // 16-byte chunks per row slice
  for (int c = threadIdx.x; c < (TM + TN) * kChunks; c += kThreads) {
    const int r = c / kChunks, k = k0 + (c % kChunks) * 4;
    if (r < TM) {
      const int64_t row = row0 + r;
      const bool valid = row < rows && k < l.in;
      CopyAsync16(a + r * kStride + (c % kChunks) * 4, valid ? in + row * in_ld + k : in, valid);
    } else {
      const int col = col0 + (r - TM);
      const bool valid = col < l.out && k < l.in;
      CopyAsync16(b + (r - TM) * kStride + (c % kChunks) * 4,
                  valid ? l.weight + static_cast<int64_t>(col) * l.in + k : l.weight, valid);
    }
  }
}

// The multiply of one staged k slice into the warp's accumulators.
template <int MI, int NI>
__device__ __forceinline__ void MultiplySlice(const float* a, const float* b, int warp_row,
                                              int warp_col, int g, int t,
                                              float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int kk = 0; kk < kKStep; kk += 8) {
    uint32_t af[MI][4], bf[NI][2];
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const float* p = a + (warp_row + 16 * i + g) * kStride + kk + t;
      af[i][0] = ToTf32(p[0]);
      af[i][1] = ToTf32(p[8 * kStride]);
      af[i][2] = ToTf32(p[4]);
      af[i][3] = ToTf32(p[8 * kStride + 4]);
    }
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const float* p = b + (warp_col + 8 * j + g) * kStride + kk + t;
      bf[j][0] = ToTf32(p[0]);
      bf[j][1] = ToTf32(p[4]);
    }
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
      for (int j = 0; j < NI; ++j) Mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
}

// Bias, ReLU and the store of the warp's part of one tile.
template <int MI, int NI>
__device__ __forceinline__ void StoreTile(const GridMlpLayer& l, int64_t rows, int64_t row0,
                                          int col0, int g, int t, const float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < NI; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + 16 * i + g + 8 * h;
        if (row >= rows) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col0 + 8 * j + 2 * t + e;
          if (col >= l.out) continue;
          float v = acc[i][j][2 * h + e] + (l.bias != nullptr ? l.bias[col] : 0.0f);
          if (l.relu) v = fmaxf(v, 0.0f);
          l.y[row * l.y_ld + col] = v;
        }
      }
    }
  }
}

// Every tile of one layer that falls to this block (grid-stride order).
template <int MI, int NI>
__device__ void RunLayer(const GridMlpLayer& l, const float* in, int64_t in_ld, int64_t rows,
                         float* smem) {
  constexpr int TM = 32 * MI, TN = 16 * NI;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int warp_row = (warp >> 1) * (TM / 2), warp_col = (warp & 1) * (TN / 2);
  const int64_t row_tiles = (rows + TM - 1) / TM;
  const int col_tiles = (l.out + TN - 1) / TN;
  const int steps = (l.in + kKStep - 1) / kKStep;
  float* a_stage = smem;                         // [kStages][TM][kStride]
  float* b_stage = smem + kStages * TM * kStride;  // [kStages][TN][kStride]
  for (int64_t tile = blockIdx.x; tile < row_tiles * col_tiles; tile += gridDim.x) {
    const int64_t row0 = (tile / col_tiles) * TM;
    const int col0 = static_cast<int>(tile % col_tiles) * TN;
    float acc[MI][NI][4] = {};
    // Prologue: the first kStages - 1 slices in flight (empty groups past the end).
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < steps) {
        StageSlice<TM, TN>(in, in_ld, rows, l, row0, col0, s * kKStep,
                           a_stage + s * TM * kStride, b_stage + s * TN * kStride);
      }
      CommitCopies();
    }
    for (int s = 0; s < steps; ++s) {
      WaitCopies<kStages - 2>();  // slice s has landed (for this thread)
      __syncthreads();            // ... for every thread; and slice s - 1 is no longer read
      const int next = s + kStages - 1;
      if (next < steps) {
        const int buf = next % kStages;
        StageSlice<TM, TN>(in, in_ld, rows, l, row0, col0, next * kKStep,
                           a_stage + buf * TM * kStride, b_stage + buf * TN * kStride);
      }
      CommitCopies();
      const int buf = s % kStages;
      MultiplySlice<MI, NI>(a_stage + buf * TM * kStride, b_stage + buf * TN * kStride,
                            warp_row, warp_col, g, t, acc);
    }
    WaitCopies<0>();
    __syncthreads();  // the next tile's prologue overwrites the stages
    StoreTile<MI, NI>(l, rows, row0 + warp_row, col0 + warp_col, g, t, acc);
  }
}

__global__ void __launch_bounds__(kThreads) GridMlpKernel(const Params p) {
  extern __shared__ __align__(16) float smem[];
  cg::grid_group grid = cg::this_grid();
  const float* in = p.a.x;
  int64_t in_ld = p.a.x_ld;
  for (int i = 0; i < p.a.num_layers; ++i) {
    const GridMlpLayer& l = p.a.layer[i];
    if (i > 0) grid.sync();  // layer i - 1's output is complete and visible
    switch (p.shape[i]) {
      case k64x64:
        RunLayer<2, 4>(l, in, in_ld, p.a.rows, smem);
        break;
      case k32x32:
        RunLayer<1, 2>(l, in, in_ld, p.a.rows, smem);
        break;
      default:
        RunLayer<1, 1>(l, in, in_ld, p.a.rows, smem);
        break;
    }
    in = l.y;
    in_ld = l.y_ld;
  }
}

// What a device gives the kernel: SMs and co-resident blocks (0: not known yet).
struct DeviceFit {
  std::atomic<int> sms{0};
  std::atomic<int> blocks{0};
};
DeviceFit g_fit[kMaxDevices];

// Co-resident blocks of the kernel on the current device (0 on error or
// without cooperative launch), and its SM count.
int CoResidentBlocks(int* sms) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 0;
  DeviceFit& fit = g_fit[device];
  if (fit.blocks.load(std::memory_order_acquire) == 0) {
    int coop = 0, count = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device) != cudaSuccess ||
        coop == 0 ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(GridMlpKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, GridMlpKernel, kThreads,
                                                      kSmemBytes) != cudaSuccess ||
        per_sm < 1) {
      return 0;
    }
    fit.sms.store(count, std::memory_order_relaxed);
    fit.blocks.store(count * per_sm, std::memory_order_release);
  }
  *sms = fit.sms.load(std::memory_order_relaxed);
  return fit.blocks.load(std::memory_order_acquire);
}

// The largest tile that still gives at least 3/4 of the SMs a tile, else the smallest.
int ShapeFor(int64_t rows, int out, int sms) {
  for (int s = 0; s < kNumShapes; ++s) {
    const int64_t tiles =
        ((rows + kShapeRows[s] - 1) / kShapeRows[s]) * ((out + kShapeCols[s] - 1) / kShapeCols[s]);
    if (4 * tiles >= 3 * static_cast<int64_t>(sms)) return s;
  }
  return kNumShapes - 1;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool ArgsValid(const GridMlpArgs& a) {
  if (a.num_layers < 1 || a.num_layers > kGridMlpMaxLayers || a.rows < 0) return false;
  if (a.x == nullptr || !Aligned16(a.x) || a.x_ld % 4 != 0) return false;
  int64_t in_ld = a.x_ld;
  for (int i = 0; i < a.num_layers; ++i) {
    const GridMlpLayer& l = a.layer[i];
    if (l.in < 4 || l.in % 4 != 0 || l.out < 1 || in_ld < l.in) return false;
    if (i > 0 && l.in != a.layer[i - 1].out) return false;
    if (l.weight == nullptr || !Aligned16(l.weight) || l.y == nullptr || l.y_ld < l.out) {
      return false;
    }
    if (i + 1 < a.num_layers && (l.y_ld % 4 != 0 || !Aligned16(l.y))) return false;
    in_ld = l.y_ld;
  }
  return true;
}

}  // namespace

bool GridMlpFits(const GridMlpArgs& args) {
  int sms = 0;
  return ArgsValid(args) && CoResidentBlocks(&sms) > 0;
}

cudaError_t LaunchGridMlp(const GridMlpArgs& args, cudaStream_t stream) {
  int sms = 0;
  const int resident = CoResidentBlocks(&sms);
  if (!ArgsValid(args) || resident == 0) return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  Params p;
  p.a = args;
  int64_t most_tiles = 1;
  for (int i = 0; i < args.num_layers; ++i) {
    const int s = ShapeFor(args.rows, args.layer[i].out, sms);
    p.shape[i] = s;
    const int64_t tiles = ((args.rows + kShapeRows[s] - 1) / kShapeRows[s]) *
                          ((args.layer[i].out + kShapeCols[s] - 1) / kShapeCols[s]);
    if (tiles > most_tiles) most_tiles = tiles;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(most_tiles < resident ? most_tiles : resident));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, GridMlpKernel, p);
}

}  // namespace rankd::kernels::cuda
