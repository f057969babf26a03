#include "kernels/cpu/dense.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "kernels/cpu/types.h"

namespace rankd::kernels {
namespace {

using RowMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<Eigen::Dynamic>;
using ConstMat = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
using Mat = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
using ConstVec = Eigen::Map<const Eigen::RowVectorXf>;

void Activate(Activation act, Mat* m) {
  switch (act) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      *m = m->cwiseMax(0.0f);
      return;
    case Activation::kSigmoid:
      // Scalar std::exp on purpose: Eigen's vectorized exp is not bit-equal
      // to the scalar one, and which elements it vectorizes depends on the
      // row's address, i.e. on the row's position in the block.
      // 1 / (1 + e^-x) saturates cleanly to 0 and 1 at large |x|.
      *m = m->unaryExpr([](float v) { return 1.0f / (1.0f + std::exp(-v)); });
      return;
  }
}

}  // namespace

void LinearForward(const LinearView& layer, const float* in, int64_t in_stride,
                   int64_t rows, Activation act, float* out,
                   int64_t out_stride) {
  if (rows <= 0) return;
  const ConstMat x(in, rows, layer.in, Stride(in_stride));
  const ConstMat w(layer.weight, layer.out, layer.in, Stride(layer.in));
  Mat y(out, rows, layer.out, Stride(out_stride));
  // One GEMM over the whole block (never per-row GEMVs): with rows a multiple
  // of kRowQuantum this makes every row's result independent of the block.
  y.noalias() = x * w.transpose();
  if (layer.bias != nullptr) {
    y.rowwise() += ConstVec(layer.bias, layer.out);
  }
  Activate(act, &y);
}

void DotInteraction(const float* feats, int64_t rows, int num_vectors, int dim,
                    bool self_interaction, float* out, int64_t out_stride) {
  const int n = num_vectors;
  // Gram matrix of one row, reused; it only ever holds that row's products so
  // a row's output depends on nothing but its own features.
  RowMatrix gram(n, n);
  const int64_t row_floats = static_cast<int64_t>(n) * dim;
  for (int64_t r = 0; r < rows; ++r) {
    const ConstMat t(feats + r * row_floats, n, dim, Stride(dim));
    gram.noalias() = t * t.transpose();
    float* o = out + r * out_stride;
    Eigen::Map<Eigen::VectorXf>(o, dim) = t.row(0).transpose();
    o += dim;
    // DLRM_Net.interact_features: li, lj = [i for i in range(ni) for j in
    // range(i + offset)], [j ...] -> (1,0), (2,0), (2,1), (3,0), ...
    const int offset = self_interaction ? 1 : 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < i + offset; ++j) *o++ = gram(i, j);
    }
  }
}

void CrossLayerForward(const CrossLayerView& layer, const float* x0,
                       const float* x, int64_t rows, float* scratch,
                       float* x_next) {
  if (rows <= 0) return;
  const int n = layer.n;
  const int rank = layer.rank;
  const ConstMat x0m(x0, rows, n, Stride(n));
  const ConstMat xm(x, rows, n, Stride(n));
  const ConstMat v(layer.v, rank, n, Stride(n));
  const ConstMat w(layer.w, n, rank, Stride(rank));
  Mat low(scratch, rows, rank, Stride(rank));
  Mat next(x_next, rows, n, Stride(n));
  // Two whole-block GEMMs, like LinearForward (see there).
  low.noalias() = xm * v.transpose();    // (V x)^T   [rows, rank]
  next.noalias() = low * w.transpose();  // (W V x)^T [rows, n]
  if (layer.bias != nullptr) {
    next.rowwise() += ConstVec(layer.bias, n);
  }
  next.array() = x0m.array() * next.array() + xm.array();
}

}  // namespace rankd::kernels
