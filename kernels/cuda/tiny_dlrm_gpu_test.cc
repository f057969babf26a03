// LaunchTinyDlrm against its CPU twin: the CPU engine's forward
// (engine/cpu/cpu_engine.cc RunTask) composed from the same kernels/cpu
// pieces — LinearForward on kRowQuantum-padded blocks, PoolEmbeddings,
// DotInteraction, scalar sigmoid. (The engine-level comparison with CpuEngine
// on MakeRandomModel models is tests/gpu/tiny_dlrm_engine_gpu_test.cc; engine
// targets are not visible from kernels/.)
//
// Random models and inputs, never zeros; scores poisoned before each launch
// and every one checked. Tolerance: |p_gpu - p_cpu| <= 1e-6 (absolute on the
// probability) or a logit error <= 1e-5 relative. Needs a GPU.
#include "kernels/cuda/tiny_dlrm.h"
#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/gpu_test_util.h"

namespace rankd::kernels::cuda {
namespace {

// The opt-in shared memory per block of an H100 / H200 (227 KiB): the
// envelope tests below are about the shape limits, not the device.
constexpr int64_t kHopperShared = 227 * 1024;

// Owned device allocation.
struct DeviceMem {
  void* p = nullptr;
  DeviceMem() = default;
  explicit DeviceMem(size_t bytes) {
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess) p = nullptr;
  }
  ~DeviceMem() { cudaFree(p); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

template <typename T>
std::unique_ptr<DeviceMem> Upload(const std::vector<T>& v, size_t offset_bytes = 0) {
  auto m = std::make_unique<DeviceMem>(v.size() * sizeof(T) + offset_bytes + 16);
  if (m->p != nullptr && !v.empty()) {
    cudaMemcpy(static_cast<char*>(m->p) + offset_bytes, v.data(), v.size() * sizeof(T),
               cudaMemcpyHostToDevice);
  }
  return m;
}

std::vector<float> RandomNonZero(size_t n, float scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = u(rng) * scale; while (x == 0.0f);
  }
  return v;
}

struct HostLinear {
  std::vector<float> weight, bias;
  int in = 0, out = 0;
  LinearView view() const { return LinearView{weight.data(), bias.data(), in, out}; }
};

HostLinear RandomLinear(int in, int out, std::mt19937_64& rng) {
  HostLinear l;
  l.in = in;
  l.out = out;
  l.weight = RandomNonZero(static_cast<size_t>(in) * out, 1.0f / std::sqrt(float(in)), rng);
  l.bias = RandomNonZero(out, 0.1f, rng);
  return l;
}

struct HostTable {
  int64_t num_rows = 0;
  RowType type = RowType::kFp32;
  Pooling pooling = Pooling::kSum;
  std::vector<uint8_t> bytes;  // [num_rows, dim] of type
  bool dynamic = false;
  std::vector<int64_t> keys;  // dynamic: key of row r
  HashTable hash;
  HashTableView hash_view;
  std::vector<float> default_vector;  // empty = zeros
};

struct Case {
  std::string name;
  TinyDlrmShape shape;
  std::vector<int64_t> table_rows;  // one table per feature
  RowType type = RowType::kFp32;
  Pooling pooling = Pooling::kSum;
  std::vector<int> dynamic;  // features whose table is DYNAMIC
  bool default_vectors = false;
  bool weighted = false;
  int min_bag = 1, max_bag = 1;
  double unresolved = 0;       // fraction of ids that do not resolve
  size_t misalign_bytes = 0;   // table rows start this far past an aligned address
  std::vector<int64_t> batches = {1, 33, 2048};
  uint64_t seed = 1;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TinyDlrmShape Shape(int num_dense, std::vector<int> bottom, int dim, int features,
                    std::vector<int> top, bool self = false) {
  TinyDlrmShape s;
  s.num_dense = num_dense;
  s.num_bottom = static_cast<int>(bottom.size());
  // More than kTinyDlrmMaxLayers layers: the count says so, the widths are cut.
  for (size_t i = 0; i < bottom.size() && i < kTinyDlrmMaxLayers; ++i) s.bottom[i] = bottom[i];
  s.dim = dim;
  s.num_features = features;
  s.num_top = static_cast<int>(top.size());
  for (size_t i = 0; i < top.size() && i < kTinyDlrmMaxLayers; ++i) s.top[i] = top[i];
  s.self_interaction = self;
  return s;
}

const std::vector<int64_t> kSweepRows = {10,  20,  30,  40,  60,  80,  100, 120,
                                         160, 200, 240, 320, 400, 500, 640, 800};
std::vector<int64_t> SweepRows(int n) {
  std::vector<int64_t> r;
  for (int i = 0; i < n; ++i) r.push_back(kSweepRows[i % kSweepRows.size()] + i / 16);
  return r;
}

class TinyDlrmTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    int count = 0;
    ASSERT_CUDA(cudaGetDeviceCount(&count)) << "no CUDA device: this test needs a GPU";
    ASSERT_GT(count, 0);
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_P(TinyDlrmTest, MatchesCpuForward) {
  const Case& c = GetParam();
  const TinyDlrmShape& s = c.shape;
  std::string why;
  ASSERT_TRUE(TinyDlrmSupported(s, kHopperShared, &why)) << why;
  const int F = s.num_features;
  const int dim = s.dim;
  ASSERT_EQ(static_cast<int>(c.table_rows.size()), F);
  std::mt19937_64 rng(c.seed);

  // ---- model
  std::vector<HostLinear> bottom, top;
  int in = s.num_dense;
  for (int l = 0; l < s.num_bottom; ++l) {
    bottom.push_back(RandomLinear(in, s.bottom[l], rng));
    in = s.bottom[l];
  }
  in = s.interaction_width();
  for (int l = 0; l < s.num_top; ++l) {
    top.push_back(RandomLinear(in, s.top[l], rng));
    in = s.top[l];
  }
  std::vector<HostTable> tables(F);
  for (int f = 0; f < F; ++f) {
    HostTable& t = tables[f];
    t.num_rows = c.table_rows[f];
    t.type = c.type;
    t.pooling = c.pooling;
    const std::vector<float> values = RandomNonZero(t.num_rows * dim, 1.0f, rng);
    t.bytes.resize(values.size() * RowTypeBytes(t.type));
    for (size_t i = 0; i < values.size(); ++i) {
      if (t.type == RowType::kFp32) {
        std::memcpy(&t.bytes[4 * i], &values[i], 4);
      } else {
        const uint16_t h = t.type == RowType::kFp16 ? FloatToHalfBits(values[i])
                                                    : FloatToBf16Bits(values[i]);
        std::memcpy(&t.bytes[2 * i], &h, 2);
      }
    }
    t.dynamic = std::find(c.dynamic.begin(), c.dynamic.end(), f) != c.dynamic.end();
    if (t.dynamic) {
      std::set<int64_t> used;
      std::uniform_int_distribution<int64_t> key(-1000000000000LL, 1000000000000LL);
      while (static_cast<int64_t>(t.keys.size()) < t.num_rows) {
        const int64_t k = key(rng);
        if (used.insert(k).second) t.keys.push_back(k);
      }
      ASSERT_TRUE(HashTable::Build(t.keys, 0, &t.hash).ok());
      t.hash_view = t.hash.view();
    }
    if (c.default_vectors) t.default_vector = RandomNonZero(dim, 0.5f, rng);
  }

  // ---- device model
  std::vector<LinearView> bottom_views, top_views;
  for (const HostLinear& l : bottom) bottom_views.push_back(l.view());
  for (const HostLinear& l : top) top_views.push_back(l.view());
  const std::vector<float> packed = PackTinyDlrmWeights(
      s, bottom_views.data(), s.num_bottom, top_views.data(), s.num_top);
  ASSERT_EQ(packed.size(), TinyDlrmPackedFloats(s));
  auto d_weights = Upload(packed);
  std::vector<std::unique_ptr<DeviceMem>> keep;
  std::vector<DeviceTable> dtables(F);
  for (int f = 0; f < F; ++f) {
    const HostTable& t = tables[f];
    DeviceTable& d = dtables[f];
    keep.push_back(Upload(t.bytes, c.misalign_bytes));
    d.rows = keep.back()->as<char>() + c.misalign_bytes;
    d.row_type = t.type;
    d.pooling = t.pooling;
    d.dim = dim;
    d.num_rows = t.num_rows;
    if (t.dynamic) {
      const int64_t slots = t.hash.num_slots();
      std::vector<int64_t> k(t.hash_view.keys, t.hash_view.keys + slots);
      std::vector<int64_t> r(t.hash_view.rows, t.hash_view.rows + slots);
      keep.push_back(Upload(k));
      d.hash.keys = keep.back()->as<int64_t>();
      keep.push_back(Upload(r));
      d.hash.rows = keep.back()->as<int64_t>();
      d.hash.num_buckets = t.hash_view.num_buckets;
    }
    if (!t.default_vector.empty()) {
      keep.push_back(Upload(t.default_vector));
      d.default_vector = keep.back()->as<float>();
    }
  }

  for (const int64_t rows : c.batches) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    // ---- inputs
    const std::vector<float> dense = RandomNonZero(rows * s.num_dense, 2.0f, rng);
    std::vector<std::vector<int64_t>> ids(F), offsets(F);
    std::vector<std::vector<float>> weights(F);
    std::uniform_int_distribution<int> bag(c.min_bag, c.max_bag);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    std::uniform_real_distribution<float> weight(0.25f, 2.0f);
    std::vector<int64_t> want_unresolved(F, 0);
    for (int f = 0; f < F; ++f) {
      const HostTable& t = tables[f];
      std::uniform_int_distribution<int64_t> row(0, t.num_rows - 1);
      // Offsets start past 0 (they are absolute indices into ids).
      const int64_t lead = 5;
      for (int64_t i = 0; i < lead; ++i) ids[f].push_back(-77);
      offsets[f].push_back(lead);
      for (int64_t r = 0; r < rows; ++r) {
        const int len = bag(rng);
        for (int i = 0; i < len; ++i) {
          const bool bad = coin(rng) < c.unresolved;
          int64_t id;
          if (t.dynamic) {
            id = bad ? static_cast<int64_t>(rng() >> 1) : t.keys[row(rng)];
          } else {
            id = bad ? (coin(rng) < 0.5 ? t.num_rows + static_cast<int64_t>(rng() % 5)
                                        : -1 - static_cast<int64_t>(rng() % 5))
                     : row(rng);
          }
          ids[f].push_back(id);
          if (c.weighted) weights[f].push_back(weight(rng));
        }
        offsets[f].push_back(static_cast<int64_t>(ids[f].size()));
      }
      if (c.weighted) weights[f].insert(weights[f].begin(), lead, 1.5f);
    }

    // ---- CPU forward, as CpuEngine::RunTask
    const int64_t padded = RoundUpRows(rows);
    const int fw = (1 + F) * dim;
    const int iw = s.interaction_width();
    std::vector<float> feats(padded * fw, 0.0f);
    {
      std::vector<float> a(padded * 64, 0.0f), b(padded * 64, 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        std::copy(&dense[r * s.num_dense], &dense[(r + 1) * s.num_dense], &a[r * s.num_dense]);
      }
      if (s.num_bottom == 0) {
        for (int64_t r = 0; r < rows; ++r) {
          std::copy(&dense[r * s.num_dense], &dense[(r + 1) * s.num_dense], &feats[r * fw]);
        }
      }
      const float* x = a.data();
      int64_t stride = s.num_dense;
      for (int l = 0; l < s.num_bottom; ++l) {
        const bool last = l + 1 == s.num_bottom;
        float* out = last ? feats.data() : (x == a.data() ? b.data() : a.data());
        const int64_t out_stride = last ? fw : s.bottom[l];
        LinearForward(bottom[l].view(), x, stride, padded, Activation::kRelu, out, out_stride);
        x = out;
        stride = out_stride;
      }
    }
    for (int f = 0; f < F; ++f) {
      const HostTable& t = tables[f];
      PoolTable pt;
      pt.rows = t.bytes.data();
      pt.row_type = t.type;
      pt.num_rows = t.num_rows;
      pt.dim = dim;
      pt.pooling = t.pooling;
      pt.hash = t.dynamic ? &t.hash_view : nullptr;
      pt.default_vector = t.default_vector.empty() ? nullptr : t.default_vector.data();
      PoolBags bags{ids[f].data(), offsets[f].data(),
                    c.weighted ? weights[f].data() : nullptr, rows};
      want_unresolved[f] = PoolEmbeddings(pt, bags, feats.data() + (1 + f) * dim, fw);
    }
    std::vector<float> top_in(padded * iw);
    DotInteraction(feats.data(), padded, 1 + F, dim, s.self_interaction, top_in.data(), iw);
    std::vector<float> logits;
    {
      std::vector<float> a(padded * 64), b(padded * 64);
      const float* x = top_in.data();
      int64_t stride = iw;
      for (int l = 0; l < s.num_top; ++l) {
        const bool last = l + 1 == s.num_top;
        float* out = (x == a.data()) ? b.data() : a.data();
        LinearForward(top[l].view(), x, stride, padded,
                      last ? Activation::kNone : Activation::kRelu, out, s.top[l]);
        x = out;
        stride = s.top[l];
      }
      logits.assign(x, x + rows);  // last layer is 1 wide: stride 1
    }

    // ---- GPU
    auto d_dense = Upload(dense);
    TinyDlrmArgs args;
    args.dense = d_dense->as<float>();
    args.weights = d_weights->as<float>();
    args.rows = rows;
    std::vector<std::unique_ptr<DeviceMem>> batch_keep;
    for (int f = 0; f < F; ++f) {
      TinyDlrmFeature& feat = args.features[f];
      feat.table = dtables[f];
      batch_keep.push_back(Upload(ids[f]));
      feat.ids = batch_keep.back()->as<int64_t>();
      batch_keep.push_back(Upload(offsets[f]));
      feat.offsets = batch_keep.back()->as<int64_t>();
      if (c.weighted) {
        batch_keep.push_back(Upload(weights[f]));
        feat.weights = batch_keep.back()->as<float>();
      }
    }
    DeviceMem d_scores((rows + 1) * sizeof(float));
    DeviceMem d_unresolved(F * sizeof(unsigned long long));
    ASSERT_CUDA(cudaMemset(d_scores.p, 0xff, (rows + 1) * sizeof(float)));
    ASSERT_CUDA(cudaMemset(d_unresolved.p, 0, F * sizeof(unsigned long long)));
    args.scores = d_scores.as<float>();
    args.unresolved = d_unresolved.as<unsigned long long>();
    ASSERT_CUDA(LaunchTinyDlrm(s, args, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> got(rows + 1);
    std::vector<unsigned long long> got_unresolved(F);
    ASSERT_CUDA(cudaMemcpy(got.data(), d_scores.p, got.size() * 4, cudaMemcpyDeviceToHost));
    ASSERT_CUDA(cudaMemcpy(got_unresolved.data(), d_unresolved.p, F * 8, cudaMemcpyDeviceToHost));

    int64_t bad = 0;
    double max_abs = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float z = logits[r];
      const float want = 1.0f / (1.0f + std::exp(-z));  // as Activation::kSigmoid
      const double err = std::fabs(static_cast<double>(got[r]) - want);
      const double slope = static_cast<double>(want) * (1.0 - want);
      const bool ok = err <= 1e-6 || err <= 1e-5 * std::fabs(z) * slope;
      if (std::isfinite(err)) max_abs = std::max(max_abs, err);
      if (!ok && bad++ < 10) {
        ADD_FAILURE() << "candidate " << r << ": got " << got[r] << " want " << want
                      << " (logit " << z << ")";
      }
    }
    EXPECT_EQ(bad, 0);
    uint32_t guard;
    std::memcpy(&guard, &got[rows], 4);
    EXPECT_EQ(guard, 0xffffffffu) << "wrote past scores[rows - 1]";
    for (int f = 0; f < F; ++f) {
      EXPECT_EQ(static_cast<int64_t>(got_unresolved[f]), want_unresolved[f]) << "feature " << f;
    }
    std::printf("[ %s rows %ld ] max |p_gpu - p_cpu| = %.3g\n", c.name.c_str(),
                static_cast<long>(rows), max_abs);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {  // MODELS.md mini: dense 13, bottom 13-8-4, tables [10, 20, 30], top 10-8-1, bag 1.
    Case c;
    c.name = "mini";
    c.shape = Shape(13, {8, 4}, 4, 3, {8, 1});
    c.table_rows = SweepRows(3);
    c.batches = {1, 31, 32, 33, 256, 1024, 2048, 4096};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_bags0to3_weighted_unresolved_default";
    c.shape = Shape(13, {8, 4}, 4, 3, {8, 1});
    c.table_rows = SweepRows(3);
    c.min_bag = 0;
    c.max_bag = 3;
    c.weighted = true;
    c.unresolved = 0.1;
    c.default_vectors = true;
    c.seed = 2;
    cases.push_back(c);
  }
  {  // n_sparse sweep: top [n_pairs + 4, 8, 1].
    Case c;
    c.name = "sweep8_fp16_mean";
    c.shape = Shape(13, {8, 4}, 4, 8, {8, 1});
    c.table_rows = SweepRows(8);
    c.type = RowType::kFp16;
    c.pooling = Pooling::kMean;
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 3;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep16_bf16_max_weighted";
    c.shape = Shape(13, {8, 4}, 4, 16, {8, 1});
    c.table_rows = SweepRows(16);
    c.type = RowType::kBf16;
    c.pooling = Pooling::kMax;
    c.min_bag = 0;
    c.max_bag = 3;
    c.weighted = true;
    c.seed = 4;
    c.batches = {1, 33, 2048, 4096};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "sweep16_dynamic_unresolved";
    c.shape = Shape(13, {8, 4}, 4, 16, {8, 1});
    c.table_rows = SweepRows(16);
    c.dynamic = {1, 5, 15};
    c.unresolved = 0.1;
    c.default_vectors = true;
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 5;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_self_fp16_mean";
    c.shape = Shape(13, {8, 4}, 4, 3, {8, 1}, /*self=*/true);
    c.table_rows = SweepRows(3);
    c.type = RowType::kFp16;
    c.pooling = Pooling::kMean;
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 6;
    cases.push_back(c);
  }
  {  // dim 16, 4 bottom warps (named barrier), 3 top layers, a dynamic table.
    Case c;
    c.name = "dim16_wide_mlp_dynamic";
    c.shape = Shape(13, {64, 64, 16}, 16, 8, {64, 32, 1});
    c.table_rows = SweepRows(8);
    c.dynamic = {0};
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 7;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "dim8_bf16_self_4layers";
    c.shape = Shape(20, {16, 12, 10, 8}, 8, 5, {16, 9, 5, 1}, /*self=*/true);
    c.table_rows = {3, 50, 7, 1000, 2};
    c.type = RowType::kBf16;
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 8;
    cases.push_back(c);
  }
  {  // odd dim (4-byte row loads), no bottom MLP (x = dense).
    Case c;
    c.name = "dim7_no_bottom";
    c.shape = Shape(7, {}, 7, 4, {12, 1});
    c.table_rows = {11, 13, 17, 19};
    c.min_bag = 0;
    c.max_bag = 2;
    c.seed = 9;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_misaligned_fp32_rows";
    c.shape = Shape(13, {8, 4}, 4, 3, {8, 1});
    c.table_rows = SweepRows(3);
    c.misalign_bytes = 4;
    c.min_bag = 1;
    c.max_bag = 3;
    c.seed = 10;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "mini_misaligned_fp16_rows";
    c.shape = Shape(13, {8, 4}, 4, 3, {8, 1});
    c.table_rows = SweepRows(3);
    c.type = RowType::kFp16;
    c.misalign_bytes = 2;
    c.min_bag = 1;
    c.max_bag = 3;
    c.seed = 11;
    cases.push_back(c);
  }
  {  // the largest envelope: 26 features of dim 16 (> 48 KB shared memory).
    Case c;
    c.name = "f26_dim16_big_smem";
    c.shape = Shape(13, {32, 16}, 16, 26, {64, 1});
    c.table_rows = SweepRows(26);
    c.min_bag = 0;
    c.max_bag = 3;
    c.pooling = Pooling::kMean;
    c.dynamic = {3, 20};
    c.seed = 12;
    c.batches = {1, 33, 1000};
    cases.push_back(c);
  }
  {  // one feature: two vectors, one pair.
    Case c;
    c.name = "one_feature";
    c.shape = Shape(3, {5, 2}, 2, 1, {3, 1});
    c.table_rows = {4};
    c.min_bag = 0;
    c.max_bag = 3;
    c.seed = 13;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, TinyDlrmTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(TinyDlrmShapeTest, SupportedEnvelope) {
  std::string why;
  EXPECT_TRUE(TinyDlrmSupported(Shape(13, {8, 4}, 4, 3, {8, 1}), kHopperShared, &why)) << why;
  EXPECT_TRUE(TinyDlrmSupported(Shape(13, {8, 4}, 4, 16, {8, 1}), kHopperShared, &why)) << why;
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 17}, 17, 3, {8, 1}), kHopperShared, &why));
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 4}, 4, 3, {8, 2}), kHopperShared, &why));      // last != 1
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {65, 4}, 4, 3, {8, 1}), kHopperShared, &why));     // width 65
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 4}, 4, 27, {8, 1}), kHopperShared, &why));     // 27 features
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 8}, 4, 3, {8, 1}), kHopperShared, &why));      // x != dim
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {}, 4, 3, {8, 1}), kHopperShared, &why));          // dense != dim
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 4, 4, 4, 4}, 4, 3, {8, 1}), kHopperShared, &why));
  EXPECT_FALSE(TinyDlrmSupported(Shape(0, {8, 4}, 4, 3, {8, 1}), kHopperShared, &why));
  EXPECT_FALSE(TinyDlrmSupported(Shape(13, {8, 4}, 4, 3, {}), kHopperShared, &why));
  EXPECT_GT(TinyDlrmSharedBytes(Shape(13, {8, 4}, 4, 3, {8, 1})), 0u);
  EXPECT_EQ(TinyDlrmSharedBytes(Shape(13, {8, 4}, 4, 27, {8, 1})), 0u);
}

// Shared memory is a limit of the device, not a constant: a shape that needs
// B bytes runs on a device with B and not on one with B - 1 (an sm_86 / sm_89
// GPU allows 99 KiB where Hopper allows 227 KiB).
TEST(TinyDlrmShapeTest, SharedMemoryLimitIsTheDevices) {
  const TinyDlrmShape big = Shape(64, {64, 16}, 16, 26, {16, 1});
  const size_t bytes = TinyDlrmSharedBytes(big);
  ASSERT_GT(bytes, 99u * 1024) << "pick a shape between the two devices' limits";
  ASSERT_LE(bytes, 227u * 1024);
  std::string why;
  EXPECT_TRUE(TinyDlrmSupported(big, static_cast<int64_t>(bytes), &why)) << why;
  EXPECT_FALSE(TinyDlrmSupported(big, static_cast<int64_t>(bytes) - 1, &why));
  EXPECT_NE(why.find("over the device's"), std::string::npos) << why;
  EXPECT_FALSE(TinyDlrmSupported(big, 99 * 1024, &why));
  int device = 0;
  ASSERT_CUDA(cudaGetDevice(&device));
  const int64_t here = MaxSharedBytesPerBlock(device);
  EXPECT_EQ(TinyDlrmSupported(big, here, &why), here >= static_cast<int64_t>(bytes)) << why;
}

TEST(TinyDlrmShapeTest, PackRejectsMismatchedLayers) {
  const TinyDlrmShape s = Shape(13, {8, 4}, 4, 3, {8, 1});
  std::mt19937_64 rng(1);
  HostLinear b0 = RandomLinear(13, 8, rng), b1 = RandomLinear(8, 4, rng);
  HostLinear t0 = RandomLinear(10, 8, rng), t1 = RandomLinear(8, 1, rng);
  LinearView bottom[] = {b0.view(), b1.view()};
  LinearView top[] = {t0.view(), t1.view()};
  const std::vector<float> ok = PackTinyDlrmWeights(s, bottom, 2, top, 2);
  ASSERT_EQ(ok.size(), TinyDlrmPackedFloats(s));
  // Layout: bottom 0 is weight^T [13][8] then bias [8].
  EXPECT_EQ(ok[0 * 8 + 3], b0.weight[3 * 13 + 0]);
  EXPECT_EQ(ok[12 * 8 + 7], b0.weight[7 * 13 + 12]);
  EXPECT_EQ(ok[13 * 8 + 5], b0.bias[5]);
  EXPECT_TRUE(PackTinyDlrmWeights(s, bottom, 1, top, 2).empty());
  LinearView wrong_top[] = {t1.view(), t0.view()};
  EXPECT_TRUE(PackTinyDlrmWeights(s, bottom, 2, wrong_top, 2).empty());
}

TEST(TinyDlrmLaunchTest, ZeroRowsAndBadArguments) {
  int count = 0;
  ASSERT_CUDA(cudaGetDeviceCount(&count));
  const TinyDlrmShape s = Shape(13, {8, 4}, 4, 3, {8, 1});
  TinyDlrmArgs args;
  args.rows = 0;
  EXPECT_EQ(LaunchTinyDlrm(s, args, nullptr), cudaSuccess);  // nothing launched
  args.rows = -1;
  EXPECT_EQ(LaunchTinyDlrm(s, args, nullptr), cudaErrorInvalidValue);
  args.rows = 4;
  EXPECT_EQ(LaunchTinyDlrm(s, args, nullptr), cudaErrorInvalidValue);  // null pointers
  DeviceMem buf(1 << 12);
  args.dense = buf.as<float>();
  args.weights = buf.as<float>();
  args.scores = buf.as<float>();
  for (int f = 0; f < 3; ++f) {
    args.features[f].offsets = buf.as<int64_t>();
    args.features[f].ids = buf.as<int64_t>();
    args.features[f].table.rows = buf.p;
    args.features[f].table.num_rows = 1;
    args.features[f].table.dim = 4;
  }
  args.features[1].table.dim = 8;  // differs from shape.dim
  EXPECT_EQ(LaunchTinyDlrm(s, args, nullptr), cudaErrorInvalidValue);
  args.features[1].table.dim = 4;
  args.weights = buf.as<float>() + 1;  // not 16-byte aligned
  EXPECT_EQ(LaunchTinyDlrm(s, args, nullptr), cudaErrorInvalidValue);
  EXPECT_CUDA(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace rankd::kernels::cuda
