// cuBLASLt, loaded with dlopen at run time. Linked normally, its 94 KB of
// static thread-local storage makes prometheus-cpp's 100 KiB-stack civetweb
// threads fail to start (docs/build.md); loaded with dlopen, its TLS
// is dynamic and harmless.
//
// LinearRunner runs y = act(x W^T + b) for row-major x [rows, in] and PyTorch
// Linear weights W [out, in], with the bias (+ ReLU) fused into the GEMM's
// epilogue. Plans (descriptors, layouts, the chosen algorithm) are cached per
// shape, so after the first call per shape a Run is one cublasLtMatmul, and
// it can be captured into a CUDA graph.
//
// Threading: the library handle is process-wide and thread-safe; a
// LinearRunner belongs to one worker (one stream) at a time.
#ifndef RANKD_KERNELS_CUDA_CUBLASLT_H_
#define RANKD_KERNELS_CUDA_CUBLASLT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels::cuda {

enum class MathMode : uint8_t {
  kFp32 = 0,  // exact fp32 products (CUBLAS_COMPUTE_32F)
  kTf32 = 1,  // TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), ~1e-3 relative
};

struct DeviceLinear {
  const float* weight = nullptr;  // device [out, in] row-major
  const float* bias = nullptr;    // device [out]
  int in = 0;
  int out = 0;
};

// A Linear layer whose weights are bf16 bit patterns (uint16_t), for GEMMs
// over bf16 inputs with fp32 accumulation and fp32 output and bias (the
// split-precision DCN cross layers: kernels/cpu/split_bf16.h).
struct DeviceLinearBf16 {
  const uint16_t* weight = nullptr;  // device [out, in] row-major, bf16
  const float* bias = nullptr;       // device [out], fp32
  int in = 0;
  int out = 0;
};

class LinearRunner {
 public:
  // Loads libcublasLt.so.13 (once per process) and creates a handle and a
  // workspace of `workspace_bytes` device memory. Errors say what failed
  // (library not found, symbol missing, CUDA error).
  static absl::StatusOr<std::unique_ptr<LinearRunner>> Create(MathMode mode,
                                                              size_t workspace_bytes = 32 << 20);
  ~LinearRunner();

  // out[r, 0:layer.out] = act(in[r, 0:layer.in] . W^T + b), r in [0, rows).
  // act: kNone or kRelu; layer.bias == nullptr: no bias (DCN's V x). Leading
  // dimensions in floats. Any rows >= 1 (plans are cached per rows value).
  absl::Status Run(const DeviceLinear& layer, const float* in, int64_t in_ld, int64_t rows,
                   Activation act, float* out, int64_t out_ld, cudaStream_t stream);

  // The same over bf16 input and weights (bit patterns), with fp32
  // accumulation (CUBLAS_COMPUTE_32F on bf16 tensor cores whatever mode()
  // is), fp32 bias and fp32 output. in_ld in bf16 elements, out_ld in floats.
  absl::Status RunBf16(const DeviceLinearBf16& layer, const uint16_t* in, int64_t in_ld,
                       int64_t rows, Activation act, float* out, int64_t out_ld,
                       cudaStream_t stream);

  MathMode mode() const { return mode_; }

 private:
  struct Impl;
  struct Operands;
  absl::Status RunOperands(const Operands& op, cudaStream_t stream);
  explicit LinearRunner(MathMode mode);
  MathMode mode_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankd::kernels::cuda

#endif  // RANKD_KERNELS_CUDA_CUBLASLT_H_
