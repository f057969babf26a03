#include "engine/cuda/testing/tiny_dlrm_host.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_worker.h"

namespace rankd::engine::cuda::testing {

using kernels::cuda::DeviceTable;
using kernels::cuda::TinyDlrmArgs;
using kernels::cuda::TinyDlrmFeature;
using kernels::cuda::TinyDlrmShape;

namespace {

// `bytes` of host memory copied into a new device buffer (at least 16 bytes,
// so that an empty tensor still has an address).
absl::StatusOr<DeviceBuffer> Upload(const void* data, size_t bytes) {
  DeviceBuffer b;
  absl::Status s = b.Allocate(bytes > 0 ? bytes : 16, "a tiny DLRM tensor");
  if (!s.ok()) return s;
  if (bytes > 0) {
    s = CudaStatus(cudaMemcpy(b.get(), data, bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy to device");
    if (!s.ok()) return s;
  }
  return b;
}

}  // namespace

absl::StatusOr<TinyDlrmShape> TinyDlrmShapeOf(const engine::Model& m) {
  // The engine's own eligibility check, so this harness and the CUDA worker
  // agree on which models take the fused kernel.
  TinyDlrmShape s;
  std::string why;
  int device = 0;
  cudaGetDevice(&device);
  if (!engine::cuda::TinyShapeFor(m, device, &s, &why)) {
    return absl::FailedPreconditionError(absl::StrCat("tiny DLRM kernel: ", why));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<TinyDlrmDeviceModel>> TinyDlrmDeviceModel::Create(
    std::shared_ptr<const engine::Model> model) {
  absl::StatusOr<TinyDlrmShape> shape = TinyDlrmShapeOf(*model);
  if (!shape.ok()) return shape.status();
  std::unique_ptr<TinyDlrmDeviceModel> d(new TinyDlrmDeviceModel());
  d->model_ = model;
  d->shape_ = *shape;
  const engine::Model& m = *model;

  std::vector<kernels::LinearView> bottom, top;
  for (const engine::Linear& l : m.bottom) bottom.push_back(l.view());
  for (const engine::Linear& l : m.top) top.push_back(l.view());
  const std::vector<float> packed = kernels::cuda::PackTinyDlrmWeights(
      *shape, bottom.data(), static_cast<int>(bottom.size()), top.data(),
      static_cast<int>(top.size()));
  if (packed.empty()) return absl::InternalError("PackTinyDlrmWeights: layers do not match");
  absl::StatusOr<DeviceBuffer> w = Upload(packed.data(), packed.size() * 4);
  if (!w.ok()) return w.status();
  d->weights_ = std::move(*w);

  std::vector<DeviceTable> tables;
  for (const engine::EmbeddingTable& t : m.tables) {
    DeviceTable dt;
    dt.row_type = t.row_type;
    dt.pooling = t.pooling;
    dt.dim = t.dim;
    dt.num_rows = t.num_rows;
    absl::StatusOr<DeviceBuffer> rows = Upload(t.rows.data, t.rows.size);
    if (!rows.ok()) return rows.status();
    dt.rows = rows->as<void>();
    d->buffers_.push_back(std::move(*rows));
    if (t.dynamic) {
      const kernels::HashTableView v = t.hash.view();
      const size_t bytes = static_cast<size_t>(t.hash.num_slots()) * sizeof(int64_t);
      absl::StatusOr<DeviceBuffer> keys = Upload(v.keys, bytes);
      if (!keys.ok()) return keys.status();
      absl::StatusOr<DeviceBuffer> slots = Upload(v.rows, bytes);
      if (!slots.ok()) return slots.status();
      dt.hash.keys = keys->as<int64_t>();
      dt.hash.rows = slots->as<int64_t>();
      dt.hash.num_buckets = v.num_buckets;
      d->buffers_.push_back(std::move(*keys));
      d->buffers_.push_back(std::move(*slots));
    }
    if (!t.default_vector.empty()) {
      absl::StatusOr<DeviceBuffer> dv =
          Upload(t.default_vector.data(), t.default_vector.size() * 4);
      if (!dv.ok()) return dv.status();
      dt.default_vector = dv->as<float>();
      d->buffers_.push_back(std::move(*dv));
    }
    tables.push_back(dt);
  }
  for (const engine::SparseFeature& f : m.features) d->feature_tables_.push_back(tables[f.table]);
  return d;
}

absl::StatusOr<std::unique_ptr<TinyDlrmDeviceBatch>> TinyDlrmDeviceBatch::Create(
    const TinyDlrmDeviceModel& model, absl::Span<const engine::Request* const> requests) {
  const engine::Model& m = model.model();
  const int num_features = static_cast<int>(m.features.size());
  int64_t rows = 0;
  for (const engine::Request* r : requests) {
    if (r->features.size() != m.features.size() ||
        r->dense.size() != static_cast<size_t>(r->num_candidates) * m.num_dense) {
      return absl::InvalidArgumentError("request does not fit the model");
    }
    rows += r->num_candidates;
  }
  std::unique_ptr<TinyDlrmDeviceBatch> b(new TinyDlrmDeviceBatch());
  b->model_ = &model;
  TinyDlrmArgs& args = b->args_;
  args.rows = rows;
  args.weights = model.weights();

  std::vector<float> dense;
  dense.reserve(rows * m.num_dense);
  for (const engine::Request* r : requests) dense.insert(dense.end(), r->dense.begin(), r->dense.end());
  auto keep = [&b](absl::StatusOr<DeviceBuffer> buf) -> absl::StatusOr<void*> {
    if (!buf.ok()) return buf.status();
    void* p = buf->as<void>();
    b->buffers_.push_back(std::move(*buf));
    return p;
  };
  absl::StatusOr<void*> p = keep(Upload(dense.data(), dense.size() * 4));
  if (!p.ok()) return p.status();
  args.dense = static_cast<const float*>(*p);

  for (int f = 0; f < num_features; ++f) {
    std::vector<int64_t> ids, offsets = {0};
    std::vector<float> weights;
    bool weighted = false;
    for (const engine::Request* r : requests) weighted |= !r->features[f].weights.empty();
    for (const engine::Request* r : requests) {
      const engine::FeatureInput& in = r->features[f];
      const bool shared = in.lengths.size() == 1 && r->num_candidates != 1;
      if (!shared && in.lengths.size() != static_cast<size_t>(r->num_candidates)) {
        return absl::InvalidArgumentError(absl::StrCat("feature ", f, ": bad lengths"));
      }
      int64_t pos = 0;
      for (int32_t c = 0; c < r->num_candidates; ++c) {
        const int64_t len = shared ? in.lengths[0] : in.lengths[c];
        const int64_t first = shared ? 0 : pos;
        for (int64_t i = first; i < first + len; ++i) {
          ids.push_back(in.ids[i]);
          if (weighted) weights.push_back(in.weights.empty() ? 1.0f : in.weights[i]);
        }
        if (!shared) pos += len;
        offsets.push_back(static_cast<int64_t>(ids.size()));
      }
    }
    TinyDlrmFeature& feat = args.features[f];
    feat.table = model.feature_table(f);
    p = keep(Upload(ids.data(), ids.size() * 8));
    if (!p.ok()) return p.status();
    feat.ids = static_cast<const int64_t*>(*p);
    p = keep(Upload(offsets.data(), offsets.size() * 8));
    if (!p.ok()) return p.status();
    feat.offsets = static_cast<const int64_t*>(*p);
    if (weighted) {
      p = keep(Upload(weights.data(), weights.size() * 4));
      if (!p.ok()) return p.status();
      feat.weights = static_cast<const float*>(*p);
    }
  }
  absl::Status allocated = b->scores_.Allocate(std::max<int64_t>(rows, 1) * 4, "scores");
  if (!allocated.ok()) return allocated;
  allocated = b->unresolved_.Allocate(
      std::max(num_features, 1) * sizeof(unsigned long long), "unresolved-id counters");
  if (!allocated.ok()) return allocated;
  args.scores = b->scores_.as<float>();
  args.unresolved = b->unresolved_.as<unsigned long long>();
  return b;
}

absl::Status TinyDlrmDeviceBatch::Reset(cudaStream_t stream) {
  absl::Status s = CudaStatus(cudaMemsetAsync(scores_.as<void>(), 0xff, rows() * 4, stream),
                              "poison scores");
  if (!s.ok()) return s;
  return CudaStatus(cudaMemsetAsync(unresolved_.as<void>(), 0, unresolved_.bytes(), stream),
                    "zero counters");
}

absl::Status TinyDlrmDeviceBatch::Launch(cudaStream_t stream) const {
  return CudaStatus(kernels::cuda::LaunchTinyDlrm(model_->shape(), args_, stream),
                    "LaunchTinyDlrm");
}

absl::StatusOr<std::vector<float>> TinyDlrmDeviceBatch::Scores(cudaStream_t stream) const {
  absl::Status s = CudaStatus(cudaStreamSynchronize(stream), "tiny DLRM kernel");
  if (!s.ok()) return s;
  std::vector<float> out(rows());
  s = CudaStatus(cudaMemcpy(out.data(), scores_.as<void>(), rows() * 4, cudaMemcpyDeviceToHost),
                 "copy scores");
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<int64_t>> TinyDlrmDeviceBatch::UnresolvedPerTable(
    cudaStream_t stream) const {
  absl::Status s = CudaStatus(cudaStreamSynchronize(stream), "tiny DLRM kernel");
  if (!s.ok()) return s;
  const engine::Model& m = model_->model();
  std::vector<unsigned long long> per_feature(m.features.size());
  s = CudaStatus(cudaMemcpy(per_feature.data(), unresolved_.as<void>(), unresolved_.bytes(),
                            cudaMemcpyDeviceToHost),
                 "copy counters");
  if (!s.ok()) return s;
  std::vector<int64_t> per_table(m.tables.size(), 0);
  for (size_t f = 0; f < m.features.size(); ++f) {
    per_table[m.features[f].table] += static_cast<int64_t>(per_feature[f]);
  }
  return per_table;
}

}  // namespace rankd::engine::cuda::testing
