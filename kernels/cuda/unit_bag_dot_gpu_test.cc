// LaunchUnitBagDotInteraction against its CPU twins (PoolEmbeddings per
// feature, then DotInteraction) and, bit for bit, against the two launches
// it replaces (the unit-bag lookup, then LaunchDotInteraction): random
// tables (fp32 / fp16 / bf16 rows, SUM / MEAN / MAX, default vectors or
// zeros), unit features (weighted or not, unresolved ids, 32-bit ids), x in
// the interaction input, padded rows past the features' bags, shuffled
// feature columns, self interaction or not; dims 4-128 (the variants compiled
// for 16, 32, 64 and 128 and the generic one) and, where the tables are all
// fp32 with SUM / MEAN pooling, the fp32-only variant or the general one at
// random (PooledLookupArgs::fp32_tables_only). The fused kernel's input has NaN
// wherever it must not read, and its output is NaN-poisoned, so an element
// it skips or a column it reads by mistake shows. Needs a CUDA device (tags
// "manual", "gpu"); skips without. RANKD_TEST_SEED=<n> replays a seed.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cuda/interaction.h"
#include "kernels/cuda/unit_bag_dot.h"

namespace rankd::kernels::cuda {
namespace {

using ::rankd::kernels::cuda::testing::DeviceArena;
using ::rankd::kernels::cuda::testing::TestSeed;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
std::vector<T> ToHost(const T* device, size_t n) {
  std::vector<T> h(n);
  EXPECT_CUDA(cudaMemcpy(h.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

struct Case {
  int batch = 1;         // rows with bags
  int rows = 1;          // rows launched (batch + padding)
  int dim = 16;
  int num_tables = 1;
  int num_features = 1;
  bool self_interaction = false;
  bool ids32 = false;
  int out_pad = 0;       // out_stride = width + out_pad
  bool allow_fp32_only = false;  // set fp32_tables_only where the tables fit it
  bool fp32_sum_tables = false;  // every table fp32 with SUM / MEAN pooling
};

struct HostTable {
  RowType type = RowType::kFp32;
  Pooling pooling = Pooling::kSum;
  int64_t num_rows = 0;
  std::vector<uint8_t> rows;
  std::vector<float> default_vector;  // empty = zeros
};

// fp32_sum: fp32 rows and SUM / MEAN pooling (the fp32-only kernel's tables).
HostTable RandomTable(int dim, bool halves_ok, bool fp32_sum, std::mt19937_64& rng) {
  HostTable t;
  t.type = halves_ok && !fp32_sum ? static_cast<RowType>(rng() % 3) : RowType::kFp32;
  t.pooling = static_cast<Pooling>(rng() % (fp32_sum ? 2 : 3));
  t.num_rows = 1 + static_cast<int64_t>(rng() % 3000);
  const std::vector<float> values =
      testing::NonZeroUniform(static_cast<size_t>(t.num_rows) * dim, -1.0f, 1.0f, &rng);
  if (t.type == RowType::kFp32) {
    t.rows.resize(values.size() * 4);
    std::memcpy(t.rows.data(), values.data(), t.rows.size());
  } else {
    t.rows.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t bits = t.type == RowType::kFp16 ? FloatToHalfBits(values[i])
                                                     : FloatToBf16Bits(values[i]);
      std::memcpy(&t.rows[2 * i], &bits, 2);
    }
  }
  if (rng() % 2) t.default_vector = testing::NonZeroUniform(dim, -0.5f, 0.5f, &rng);
  return t;
}

void RunCase(const Case& c, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " (RANKD_TEST_SEED to replay): batch " +
               std::to_string(c.batch) + " rows " + std::to_string(c.rows) + " dim " +
               std::to_string(c.dim) + " features " + std::to_string(c.num_features) +
               (c.self_interaction ? " self" : "") + (c.ids32 ? " ids32" : "") +
               (c.allow_fp32_only ? " fp32-only allowed" : "") +
               (c.fp32_sum_tables ? " fp32 sum tables" : ""));
  std::mt19937_64 rng(seed);
  const int n = 1 + c.num_features;
  const int dim = c.dim;
  const int width = DotInteractionWidth(n, dim, c.self_interaction);
  const int out_stride = width + c.out_pad;
  const int feats_stride = n * dim;

  std::vector<HostTable> tables;
  for (int t = 0; t < c.num_tables; ++t) {
    tables.push_back(RandomTable(dim, dim % 8 == 0, c.fp32_sum_tables, rng));
  }
  // Features: table, column (a shuffled vector slot), weights, ids with junk between.
  std::vector<int> slot(c.num_features);
  std::iota(slot.begin(), slot.end(), 1);
  std::shuffle(slot.begin(), slot.end(), rng);
  std::vector<DeviceFeature> features(c.num_features);
  std::vector<int64_t> ids;
  std::vector<float> weights;
  auto junk = [&] {
    ids.push_back(static_cast<int64_t>(rng()));
    weights.push_back(kNaN);
  };
  for (int f = 0; f < c.num_features; ++f) {
    DeviceFeature& df = features[f];
    df.table = static_cast<int32_t>(rng() % c.num_tables);
    df.out_col = slot[f] * dim;
    df.weighted = rng() % 2;
    df.unit_bags = 1;
    df.num_bags = c.batch;
    junk();
    df.id_begin = static_cast<int64_t>(ids.size());
    df.bag_begin = f * (c.batch + 1);
    const double miss = (rng() % 4) * 0.1;
    std::bernoulli_distribution missed(miss);
    for (int r = 0; r < c.batch; ++r) {
      const int64_t rows = tables[df.table].num_rows;
      int64_t id = static_cast<int64_t>(rng() % rows);
      if (missed(rng)) {
        const int kind = static_cast<int>(rng() % 3);
        id = kind == 0 ? -1 - static_cast<int64_t>(rng() % 5)
                       : kind == 1 ? rows + static_cast<int64_t>(rng() % 5)
                                   : int64_t{1} << 40;  // -1 in 32-bit ids
      }
      ids.push_back(id);
      weights.push_back(df.weighted ? testing::NonZeroUniform(1, -1.5f, 1.5f, &rng)[0] : kNaN);
    }
  }
  junk();

  // CPU twins: the interaction input (x, pooled vectors, zeros past the
  // bags), then the dot interaction.
  std::vector<float> feats(static_cast<size_t>(c.rows) * feats_stride, 0.0f);
  const std::vector<float> x = testing::NonZeroUniform(static_cast<size_t>(c.rows) * dim, -1, 1, &rng);
  for (int r = 0; r < c.rows; ++r) {
    std::copy_n(&x[static_cast<size_t>(r) * dim], dim, &feats[static_cast<size_t>(r) * feats_stride]);
  }
  std::vector<unsigned long long> unresolved(c.num_tables, 0);
  std::vector<int64_t> bag_ids(static_cast<size_t>(c.num_features) * (c.batch + 1));
  std::vector<int32_t> bag_rows(bag_ids.size());
  for (int f = 0; f < c.num_features; ++f) {
    const DeviceFeature& df = features[f];
    const HostTable& t = tables[df.table];
    for (int r = 0; r <= c.batch; ++r) {
      bag_ids[df.bag_begin + r] = df.id_begin + r;
      bag_rows[df.bag_begin + r] = r;
    }
    PoolTable pt;
    pt.rows = t.rows.data();
    pt.row_type = t.type;
    pt.num_rows = t.num_rows;
    pt.dim = dim;
    pt.pooling = t.pooling;
    pt.default_vector = t.default_vector.empty() ? nullptr : t.default_vector.data();
    PoolBags pb;
    pb.ids = ids.data();
    pb.offsets = &bag_ids[df.bag_begin];
    pb.weights = df.weighted ? weights.data() : nullptr;
    pb.num_bags = c.batch;
    unresolved[df.table] += PoolEmbeddings(pt, pb, feats.data() + df.out_col, feats_stride);
  }
  std::vector<float> expected(static_cast<size_t>(c.rows) * width);
  DotInteraction(feats.data(), c.rows, n, dim, c.self_interaction, expected.data(), width);

  // Device inputs.
  DeviceArena up;
  std::vector<DeviceTable> device_tables(c.num_tables);
  for (int t = 0; t < c.num_tables; ++t) {
    DeviceTable& dt = device_tables[t];
    dt.rows = up.Copy(tables[t].rows);
    dt.row_type = tables[t].type;
    dt.pooling = tables[t].pooling;
    dt.dim = dim;
    dt.num_rows = tables[t].num_rows;
    if (!tables[t].default_vector.empty()) dt.default_vector = up.Copy(tables[t].default_vector);
  }
  PooledLookupArgs args;
  args.tables = up.Copy(device_tables);
  args.features = up.Copy(features);
  args.num_features = c.num_features;
  args.ids = up.Copy(ids);
  args.bag_ids = up.Copy(bag_ids);
  if (c.ids32) {
    std::vector<int32_t> ids32(ids.size()), bag_ids32(bag_ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids32[i] = ids[i] >= 0 && ids[i] <= INT32_MAX ? static_cast<int32_t>(ids[i]) : -1;
    }
    for (size_t i = 0; i < bag_ids.size(); ++i) bag_ids32[i] = static_cast<int32_t>(bag_ids[i]);
    args.ids32 = up.Copy(ids32);
    args.bag_ids32 = up.Copy(bag_ids32);
  }
  args.weights = up.Copy(weights);
  args.bag_rows = up.Copy(bag_rows);
  args.total_bags = static_cast<int64_t>(c.num_features) * c.batch;
  args.max_bags_per_feature = c.rows;
  args.unit_bag_chunks = dim / 4;  // the most 16-byte chunks in a row (fp32)
  args.unit_bags_only = true;
  // The fp32-only variant where the tables allow it (and in half of those
  // cases the general one, which must give the same bits).
  args.fp32_tables_only =
      c.allow_fp32_only && TablesFitFp32Kernel(device_tables.data(), c.num_tables);
  if (c.allow_fp32_only && c.fp32_sum_tables) {
    EXPECT_TRUE(args.fp32_tables_only) << "fp32 SUM / MEAN tables should fit the fp32 kernel";
  }
  std::vector<unsigned long long> start(c.num_tables);
  for (int t = 0; t < c.num_tables; ++t) start[t] = 1000 + 17 * t;  // counts add to these
  std::vector<int64_t> prefix(c.num_features + 1);
  for (int f = 0; f <= c.num_features; ++f) prefix[f] = static_cast<int64_t>(f) * c.batch;
  const int64_t* d_prefix = up.Copy(prefix);

  // The two launches it replaces: the lookup into the input (x and zeros
  // there already), then the dot interaction.
  std::vector<float> two_in(feats.size(), 0.0f);
  for (int r = 0; r < c.rows; ++r) {
    std::copy_n(&x[static_cast<size_t>(r) * dim], dim, &two_in[static_cast<size_t>(r) * feats_stride]);
  }
  PooledLookupArgs two = args;
  two.out = up.Copy(two_in);
  two.out_stride = feats_stride;
  two.unresolved = up.Copy(start);
  float* want_out = up.Copy(std::vector<float>(static_cast<size_t>(c.rows) * out_stride, kNaN));
  // The fused kernel's input: x only, NaN where the pooled vectors would be.
  std::vector<float> fused_in(feats.size(), kNaN);
  for (int r = 0; r < c.rows; ++r) {
    std::copy_n(&x[static_cast<size_t>(r) * dim], dim, &fused_in[static_cast<size_t>(r) * feats_stride]);
  }
  const float* d_fused_in = up.Copy(fused_in);
  PooledLookupArgs fused = args;
  fused.out = nullptr;  // not read
  fused.unresolved = up.Copy(start);
  float* got_out = up.Copy(std::vector<float>(static_cast<size_t>(c.rows) * out_stride, kNaN));
  ASSERT_CUDA(up.error());

  ASSERT_CUDA(LaunchPooledLookup(two, d_prefix, nullptr));
  ASSERT_CUDA(LaunchDotInteraction(two.out, feats_stride, c.rows, n, dim, c.self_interaction,
                                   want_out, out_stride, nullptr));
  ASSERT_CUDA(LaunchUnitBagDotInteraction(fused, d_fused_in, feats_stride, c.rows, dim,
                                          c.self_interaction, got_out, out_stride, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  const std::vector<float> want = ToHost(want_out, static_cast<size_t>(c.rows) * out_stride);
  const std::vector<float> got = ToHost(got_out, static_cast<size_t>(c.rows) * out_stride);

  int bad = 0;
  for (int r = 0; r < c.rows; ++r) {
    for (int k = 0; k < out_stride; ++k) {
      const size_t at = static_cast<size_t>(r) * out_stride + k;
      const float g = got[at];
      if (k >= width) {
        if (!std::isnan(g) && bad++ < 10) ADD_FAILURE() << "row " << r << " col " << k << " written past the width";
        continue;
      }
      uint32_t gb, wb;
      std::memcpy(&gb, &g, 4);
      std::memcpy(&wb, &want[at], 4);
      if (gb != wb && bad++ < 10) {
        ADD_FAILURE() << "row " << r << " col " << k << ": fused " << g << ", two launches "
                      << want[at];
      }
      // Against the CPU twin: within fp32 rounding of the dot products.
      double tol = 0.0;
      if (k >= dim) {
        int i = 0, j = 0, p = k - dim;
        const int offset = c.self_interaction ? 1 : 0;
        for (i = 1 - offset; p >= i + offset; ++i) p -= i + offset;
        j = p;
        double mag = 0.0;
        const float* row = &feats[static_cast<size_t>(r) * feats_stride];
        for (int e = 0; e < dim; ++e) mag += std::fabs(row[i * dim + e] * row[j * dim + e]);
        tol = 2.0 * dim * FLT_EPSILON * mag + 1e-30;
      }
      const double e = expected[static_cast<size_t>(r) * width + k];
      if (!(std::fabs(static_cast<double>(g) - e) <= tol) && bad++ < 10) {
        ADD_FAILURE() << "row " << r << " col " << k << ": fused " << g << ", CPU twin " << e;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  const std::vector<unsigned long long> counts = ToHost(fused.unresolved, c.num_tables);
  const std::vector<unsigned long long> two_counts = ToHost(two.unresolved, c.num_tables);
  for (int t = 0; t < c.num_tables; ++t) {
    EXPECT_EQ(counts[t], start[t] + unresolved[t]) << "unresolved ids of table " << t;
    EXPECT_EQ(two_counts[t], counts[t]) << "table " << t;
  }
}

TEST(UnitBagDotGpuTest, RandomCasesMatchTheCpuTwinsAndTheTwoLaunches) {
  SKIP_WITHOUT_GPU();
  const uint64_t base = TestSeed();
  const int dims[] = {4, 8, 12, 16, 32, 64, 128};
  for (int iter = 0; iter < 40; ++iter) {
    std::mt19937_64 rng(base + iter);
    Case c;
    c.batch = iter % 5 == 0 ? 1 + static_cast<int>(rng() % 3) : 1 + static_cast<int>(rng() % 2100);
    c.rows = c.batch + static_cast<int>(rng() % 17);
    c.dim = dims[rng() % 7];
    c.num_tables = 1 + static_cast<int>(rng() % 5);
    c.num_features = 1 + static_cast<int>(rng() % 30);
    c.self_interaction = rng() % 3 == 0;
    c.ids32 = rng() % 2 == 0;
    c.out_pad = static_cast<int>(rng() % 5);
    c.allow_fp32_only = rng() % 2 == 0;
    c.fp32_sum_tables = rng() % 3 == 0;
    RunCase(c, base + iter);
    if (::testing::Test::HasFailure()) break;
  }
}

// 2,048 rows of 26 features of dim 16 over 26 tables.
Case KaggleCase() {
  Case c;
  c.batch = 2048;
  c.rows = 2048;
  c.num_tables = 26;
  c.num_features = 26;
  return c;
}

TEST(UnitBagDotGpuTest, KaggleShape) {
  SKIP_WITHOUT_GPU();
  RunCase(KaggleCase(), TestSeed());
}

// The serving case of the kaggle model (fp32 tables, SUM): the variant
// compiled for dim 16 and fp32 rows.
TEST(UnitBagDotGpuTest, KaggleShapeFp32Tables) {
  SKIP_WITHOUT_GPU();
  Case c = KaggleCase();
  c.ids32 = true;
  c.allow_fp32_only = true;
  c.fp32_sum_tables = true;
  RunCase(c, TestSeed());
}

TEST(UnitBagDotGpuTest, RefusesWhatItCannotDo) {
  SKIP_WITHOUT_GPU();
  DeviceArena up;
  PooledLookupArgs a;
  a.tables = up.Copy(std::vector<DeviceTable>(1));
  a.features = up.Copy(std::vector<DeviceFeature>(2));
  a.num_features = 2;
  a.ids = up.Copy(std::vector<int64_t>(4, 0));
  a.unit_bag_chunks = 4;
  a.unit_bags_only = true;
  float* x = up.Copy(std::vector<float>(64, 1.0f));
  float* out = up.Copy(std::vector<float>(64, 0.0f));
  ASSERT_CUDA(up.error());
  const int width = DotInteractionWidth(3, 16, false);
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 48, 1, 16, false, out, width, nullptr), cudaSuccess);
  ASSERT_CUDA(cudaDeviceSynchronize());
  PooledLookupArgs b = a;
  b.unit_bags_only = false;
  EXPECT_EQ(LaunchUnitBagDotInteraction(b, x, 48, 1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue);
  b = a;
  b.any_host = true;
  EXPECT_EQ(LaunchUnitBagDotInteraction(b, x, 48, 1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 48, 1, 6, false, out, width, nullptr),
            cudaErrorInvalidValue) << "dim not a multiple of 4";
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x + 1, 48, 1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue) << "x not 16-byte aligned";
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 46, 1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue) << "x_stride not a multiple of 4";
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 48, 1, 16, false, out, width - 1, nullptr),
            cudaErrorInvalidValue) << "out_stride below the width";
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 48, -1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, nullptr, 48, 1, 16, false, out, width, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchUnitBagDotInteraction(a, x, 48, 0, 16, false, nullptr, width, nullptr),
            cudaSuccess) << "no rows: nothing to do";
  // 200 features of dim 64 do not fit a row's shared memory.
  EXPECT_TRUE(UnitBagDotFits(26, 16));
  EXPECT_TRUE(UnitBagDotFits(1, 4));
  EXPECT_FALSE(UnitBagDotFits(200, 64));
  EXPECT_FALSE(UnitBagDotFits(26, 6));
  EXPECT_FALSE(UnitBagDotFits(0, 16));
  PooledLookupArgs wide = a;
  wide.num_features = 200;
  EXPECT_EQ(LaunchUnitBagDotInteraction(wide, x, 201 * 64, 1, 64, false, out,
                                        DotInteractionWidth(201, 64, false), nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace rankd::kernels::cuda
