// Basic types shared by the CPU and CUDA kernels. Plain C++: no abseil, no
// protobuf, so nvcc and host compilers both read it.
#ifndef RANKD_KERNELS_CPU_TYPES_H_
#define RANKD_KERNELS_CPU_TYPES_H_

#include <cstddef>
#include <cstdint>

namespace rankd::kernels {

// Storage type of embedding rows. Arithmetic is always fp32.
enum class RowType : uint8_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

inline constexpr size_t RowTypeBytes(RowType t) {
  return t == RowType::kFp32 ? 4 : 2;
}

enum class Pooling : uint8_t { kSum = 0, kMean = 1, kMax = 2 };

enum class Activation : uint8_t { kNone = 0, kRelu = 1, kSigmoid = 2 };

// Dense matrix GEMMs run on row blocks whose row count is a multiple of this
// (callers zero-pad). With that, Eigen computes every row with the same
// instruction sequence whatever the block's size or the row's position, so a
// candidate's score does not depend on which batch it was in (tested in
// engine/cpu_engine_test.cc: "ScoresIndependentOfBatchComposition").
inline constexpr int kRowQuantum = 16;

inline constexpr int64_t RoundUpRows(int64_t rows) {
  return (rows + kRowQuantum - 1) / kRowQuantum * kRowQuantum;
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_TYPES_H_
