// GPU tests of the pooled embedding lookup and hash lookup kernels against
// their CPU twins (kernels/cpu: PoolEmbeddings, HashLookupBatch). Needs a CUDA
// device (tags "manual", "gpu"); skips itself on machines without one.
//
// Every check draws fresh random inputs (never zeros: row values, default
// vectors and weights are all bounded away from zero) from a seed printed with
// each failure; RANKD_TEST_SEED=<n> replays one. Outputs are poisoned with NaN
// before the launch and every element of the output matrix is checked: the
// columns of each feature hold its pooled vector, every other column must
// still be NaN (the kernel writes nothing outside its features' slices).
// Tolerances: MAX pooling is exact; SUM / MEAN may differ from the CPU by
// 1e-5 of sum_i |w_i * v_i| (/ n for MEAN), the scale of fp32 rounding error
// when the summation order differs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cpu/embedding_cache.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"

namespace rankd::kernels::cuda {
namespace {

using ::rankd::kernels::cuda::testing::DeviceArena;
using ::rankd::kernels::cuda::testing::TestSeed;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class Stream {
 public:
  Stream() { error_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); }
  ~Stream() {
    if (error_ == cudaSuccess) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }
  cudaError_t error() const { return error_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaError_t error_;
};

// Uniform in +-[0.1, 1] * scale: never zero, both signs.
float NonZero(std::mt19937_64& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  const float v = mag(rng) * scale;
  return (rng() & 1) ? v : -v;
}

const char* TypeName(RowType t) {
  switch (t) {
    case RowType::kFp32:
      return "fp32";
    case RowType::kFp16:
      return "fp16";
    case RowType::kBf16:
      return "bf16";
  }
  return "?";
}

const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kSum:
      return "sum";
    case Pooling::kMean:
      return "mean";
    case Pooling::kMax:
      return "max";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Scenario description and host data.

struct TableSpec {
  RowType type = RowType::kFp32;
  Pooling pooling = Pooling::kSum;
  int dim = 16;
  int64_t num_rows = 500;
  bool dynamic = false;
  bool default_vector = false;
  size_t rows_pad = 0;       // device rows pointer this many bytes past an aligned allocation
  size_t keys_pad = 0;       // dynamic: same for the hash keys (multiple of 8)
  double load_factor = 0.5;  // dynamic: keys / slots (before rounding to buckets)
  // Placement HOST: rows in mapped pinned host memory, `cache_fraction` of
  // them (a random subset) also in an HBM cache.
  bool host = false;
  double cache_fraction = 0.0;
};

struct FeatureSpec {
  int table = 0;
  int out_col = 0;
  bool weighted = false;
  std::vector<int> bag_sizes;       // ids per bag
  std::vector<int> bag_row_counts;  // output rows per bag; sums to the batch
  double miss_rate = 0.1;           // fraction of ids that do not resolve
};

struct Scenario {
  std::vector<TableSpec> tables;
  std::vector<FeatureSpec> features;
  int batch = 0;
  int out_stride = 0;
  bool count_unresolved = true;
  int64_t extra_bag_slots = 0;  // total_bags over-estimates the bag count by this
  // HOST tables: rows the staging buffer holds; -1 = one per id of a HOST
  // feature (never overflows). Smaller values send the overflow to direct
  // host reads.
  int64_t staging_capacity = -1;
  // Pass ids and bag offsets as int32 (PooledLookupArgs::ids32), ids
  // outside [0, 2^31) as -1, as the CUDA worker's compact layout does; the
  // expected values stay those of the int64 ids. DYNAMIC tables' features
  // are wide_ids (their int64 keys in PooledLookupArgs::ids).
  bool ids32 = false;
  // PooledLookupArgs::max_bags_per_feature: 0 = the slot layout; > 0 as
  // given (smaller than a feature's bags exercises the last warp's rest).
  int64_t max_bags_per_feature = 0;
  // Features whose bags all hold one id for one row are marked unit_bags
  // (DeviceFeature::id_begin) and the launch sets unit_bag_chunks (with
  // max_bags_per_feature = batch when 0): those of qualifying tables
  // (UnitBagRowChunks) go to the unit-bag kernel with their bag entries
  // poisoned (empty bags at the junk id 0: never read, or the output shows
  // NaN), and the output must also equal the general kernel's (the same
  // scenario without unit bags) bit for bit.
  bool unit_bags = false;
};

std::string Describe(const Scenario& s) {
  std::string out = "batch " + std::to_string(s.batch) + ", stride " + std::to_string(s.out_stride);
  for (size_t f = 0; f < s.features.size(); ++f) {
    const FeatureSpec& fs = s.features[f];
    const TableSpec& t = s.tables[fs.table];
    out += "\n  feature " + std::to_string(f) + ": table " + std::to_string(fs.table) + " " +
           TypeName(t.type) + " " + PoolingName(t.pooling) + " dim " + std::to_string(t.dim) +
           (t.dynamic ? " dynamic" : " static") + (t.default_vector ? " default" : " zeros") +
           (fs.weighted ? " weighted" : "") + " out_col " + std::to_string(fs.out_col) + " bags " +
           std::to_string(fs.bag_sizes.size()) + " rows_pad " + std::to_string(t.rows_pad) +
           (t.host ? " HOST cache " + std::to_string(t.cache_fraction) : "");
  }
  return out + "\n  staging capacity " + std::to_string(s.staging_capacity);
}

// Mapped pinned host allocations, freed together.
class PinnedArena {
 public:
  ~PinnedArena() {
    for (void* p : allocations_) cudaFreeHost(p);
  }
  // Copies `bytes` into a fresh mapped allocation; returns its device alias.
  const void* CopyMapped(const void* data, size_t bytes) {
    void* p = nullptr;
    error_ = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocMapped);
    if (error_ != cudaSuccess) return nullptr;
    allocations_.push_back(p);
    std::memcpy(p, data, bytes);
    void* d = nullptr;
    error_ = cudaHostGetDevicePointer(&d, p, 0);
    return d;
  }
  cudaError_t error() const { return error_; }

 private:
  std::vector<void*> allocations_;
  cudaError_t error_ = cudaSuccess;
};

struct HostTable {
  std::vector<uint8_t> rows;  // [num_rows, dim] of the storage type
  std::vector<int32_t> slot_of_row;  // HOST tables: cache slot of each row, or -1
  std::vector<float> default_vector;
  std::vector<int64_t> keys;  // dynamic: keys[r] -> row r; a few rows past num_rows
  std::unordered_set<int64_t> key_set;
  HashTable hash;
};

constexpr int kExtraKeys = 5;  // dynamic keys whose row is >= num_rows (unresolved)

HostTable MakeTable(const TableSpec& spec, std::mt19937_64& rng) {
  HostTable t;
  const size_t elem = RowTypeBytes(spec.type);
  const size_t n = static_cast<size_t>(spec.num_rows) * spec.dim;
  t.rows.resize(n * elem);
  for (size_t i = 0; i < n; ++i) {
    const float v = NonZero(rng);
    if (spec.type == RowType::kFp32) {
      std::memcpy(&t.rows[i * 4], &v, 4);
    } else {
      const uint16_t bits = spec.type == RowType::kFp16 ? FloatToHalfBits(v) : FloatToBf16Bits(v);
      std::memcpy(&t.rows[i * 2], &bits, 2);
    }
  }
  if (spec.default_vector) {
    t.default_vector.resize(spec.dim);
    for (float& v : t.default_vector) v = NonZero(rng, 2.0f);
  }
  if (spec.dynamic) {
    const int64_t num_keys = spec.num_rows + kExtraKeys;
    while (static_cast<int64_t>(t.keys.size()) < num_keys) {
      const int64_t k = static_cast<int64_t>(rng());  // both signs
      if (k == kEmptyKey || !t.key_set.insert(k).second) continue;
      t.keys.push_back(k);
    }
    const int64_t min_slots =
        std::max<int64_t>(num_keys, static_cast<int64_t>(num_keys / spec.load_factor));
    const absl::Status st = HashTable::Build(t.keys, min_slots, &t.hash);
    if (!st.ok()) {
      ADD_FAILURE() << st;
    }
  }
  return t;
}

// An id of `spec` that resolves (to a random row), or one that does not.
int64_t MakeId(const TableSpec& spec, const HostTable& t, bool miss, std::mt19937_64& rng) {
  if (!miss) {
    const int64_t row = static_cast<int64_t>(rng() % spec.num_rows);
    return spec.dynamic ? t.keys[row] : row;
  }
  if (spec.dynamic) {
    switch (rng() % 4) {
      case 0:  // a key whose row is past the table's rows
        return t.keys[spec.num_rows + rng() % kExtraKeys];
      case 1:
        return kEmptyKey;
      default:
        while (true) {
          const int64_t k = static_cast<int64_t>(rng());
          if (k != kEmptyKey && t.key_set.count(k) == 0) return k;
        }
    }
  }
  switch (rng() % 4) {
    case 0:
      return -1 - static_cast<int64_t>(rng() % 1000);
    case 1:
      return spec.num_rows + static_cast<int64_t>(rng() % 1000);
    case 2:
      return std::numeric_limits<int64_t>::min();
    default:
      return std::numeric_limits<int64_t>::max();
  }
}

// Elements whose bits differ between `a` and `b` (outputs of `out_stride`
// floats a row; owner: the feature of each element); the first five are
// reported as failures naming both sides.
int BitDifferences(const std::vector<float>& a, const char* a_name, const std::vector<float>& b,
                   const char* b_name, int out_stride, const std::vector<int>& owner) {
  int differ = 0;
  for (size_t at = 0; at < a.size() && at < b.size(); ++at) {
    uint32_t x, y;
    std::memcpy(&x, &a[at], 4);
    std::memcpy(&y, &b[at], 4);
    if (x != y && ++differ <= 5) {
      ADD_FAILURE() << a_name << " and " << b_name << " differ at row " << at / out_stride
                    << " col " << at % out_stride << " (feature " << owner[at] << "): " << a_name
                    << " " << a[at] << " (0x" << std::hex << x << "), " << b_name << " " << b[at]
                    << " (0x" << y << std::dec << ")";
    }
  }
  return differ + static_cast<int>(a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

// Runs the scenario on the GPU and compares with PoolEmbeddings.
void RunScenario(const Scenario& sc, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " (RANKD_TEST_SEED to replay)\n" + Describe(sc));
  std::mt19937_64 rng(seed);
  const int num_tables = static_cast<int>(sc.tables.size());
  const int num_features = static_cast<int>(sc.features.size());

  std::vector<HostTable> host(num_tables);
  for (int t = 0; t < num_tables; ++t) host[t] = MakeTable(sc.tables[t], rng);
  bool any_host = false;
  for (int t = 0; t < num_tables; ++t) {
    const TableSpec& ts = sc.tables[t];
    if (!ts.host) continue;
    any_host = true;
    // A random subset of the rows in random slots.
    std::vector<int64_t> order(ts.num_rows);
    for (int64_t r = 0; r < ts.num_rows; ++r) order[r] = r;
    std::shuffle(order.begin(), order.end(), rng);
    const int64_t cached = static_cast<int64_t>(ts.cache_fraction * ts.num_rows);
    host[t].slot_of_row.assign(ts.num_rows, -1);
    for (int64_t i = 0; i < cached; ++i) host[t].slot_of_row[order[i]] = static_cast<int32_t>(i);
  }
  ASSERT_FALSE(::testing::Test::HasFailure());

  // Global arrays, features one after another, with junk between them that
  // the kernel must never read (NaN weights, unresolvable ids).
  std::vector<int64_t> ids;
  std::vector<float> weights;
  std::vector<int64_t> bag_ids;
  std::vector<int32_t> bag_rows;
  std::vector<int64_t> bag_prefix = {0};
  std::vector<DeviceFeature> features(num_features);
  auto add_junk = [&](int count) {
    for (int i = 0; i < count; ++i) {
      ids.push_back(static_cast<int64_t>(rng()));
      weights.push_back(kNaN);
    }
  };
  for (int f = 0; f < num_features; ++f) {
    const FeatureSpec& fs = sc.features[f];
    const TableSpec& ts = sc.tables[fs.table];
    ASSERT_EQ(fs.bag_sizes.size(), fs.bag_row_counts.size());
    add_junk(3);
    DeviceFeature& df = features[f];
    df.table = fs.table;
    df.out_col = fs.out_col;
    df.bag_begin = static_cast<int64_t>(bag_ids.size());
    df.num_bags = static_cast<int64_t>(fs.bag_sizes.size());
    df.weighted = fs.weighted ? 1 : 0;
    df.id_begin = static_cast<int64_t>(ids.size());
    df.unit_bags = sc.unit_bags && !fs.bag_sizes.empty() &&
                   std::all_of(fs.bag_sizes.begin(), fs.bag_sizes.end(),
                               [](int n) { return n == 1; }) &&
                   std::all_of(fs.bag_row_counts.begin(), fs.bag_row_counts.end(),
                               [](int n) { return n == 1; });
    int32_t row = 0;
    bag_ids.push_back(static_cast<int64_t>(ids.size()));
    bag_rows.push_back(row);
    std::bernoulli_distribution miss(fs.miss_rate);
    for (size_t b = 0; b < fs.bag_sizes.size(); ++b) {
      for (int i = 0; i < fs.bag_sizes[b]; ++i) {
        ids.push_back(MakeId(ts, host[fs.table], miss(rng), rng));
        // Unweighted features get NaN weights: applying them would show.
        weights.push_back(fs.weighted ? NonZero(rng, 1.5f) : kNaN);
      }
      row += fs.bag_row_counts[b];
      bag_ids.push_back(static_cast<int64_t>(ids.size()));
      bag_rows.push_back(row);
    }
    ASSERT_TRUE(fs.bag_sizes.empty() || row == sc.batch) << "feature " << f;
    bag_prefix.push_back(bag_prefix.back() + df.num_bags);
  }
  add_junk(3);

  // CPU reference: expected output (NaN outside the features' slices) and
  // the tolerance of each element.
  const size_t out_size = static_cast<size_t>(sc.batch) * sc.out_stride;
  std::vector<float> expected(out_size, kNaN);
  std::vector<double> tolerance(out_size, 0.0);
  std::vector<int> owner(out_size, -1);  // feature of each element, for messages
  std::vector<unsigned long long> expected_unresolved(num_tables);
  std::vector<unsigned long long> expected_host_reads(num_tables, 0);
  std::vector<std::vector<int64_t>> host_rows_of_table(num_tables);  // resolved rows, all features
  for (int t = 0; t < num_tables; ++t) expected_unresolved[t] = 1000 + 17 * t;  // poison start
  for (int f = 0; f < num_features; ++f) {
    const FeatureSpec& fs = sc.features[f];
    const TableSpec& ts = sc.tables[fs.table];
    const HostTable& ht = host[fs.table];
    const DeviceFeature& df = features[f];
    if (df.num_bags == 0) continue;
    const HashTableView view = ht.hash.view();
    PoolTable pt;
    pt.rows = ht.rows.data();
    pt.row_type = ts.type;
    pt.num_rows = ts.num_rows;
    pt.dim = ts.dim;
    pt.pooling = ts.pooling;
    pt.hash = ts.dynamic ? &view : nullptr;
    pt.default_vector = ts.default_vector ? ht.default_vector.data() : nullptr;
    PoolBags pb;
    pb.ids = ids.data();
    pb.offsets = bag_ids.data() + df.bag_begin;
    pb.weights = fs.weighted ? weights.data() : nullptr;
    pb.num_bags = df.num_bags;
    std::vector<float> pooled(static_cast<size_t>(df.num_bags) * ts.dim);
    expected_unresolved[fs.table] += PoolEmbeddings(pt, pb, pooled.data(), ts.dim);

    for (int64_t b = 0; b < df.num_bags; ++b) {
      const int64_t begin = bag_ids[df.bag_begin + b];
      const int64_t end = bag_ids[df.bag_begin + b + 1];
      // Error scale: sum_i |w_i * v_i| per column (/ n for MEAN).
      std::vector<double> scale(ts.dim, 0.0);
      for (int64_t i = begin; i < end; ++i) {
        int64_t row = ts.dynamic ? HashLookup(view, ids[i]) : ids[i];
        if (row < 0 || row >= ts.num_rows) row = kMissingRow;
        if (ts.host && row != kMissingRow && ht.slot_of_row[row] < 0) {
          ++expected_host_reads[fs.table];
        }
        if (ts.host) host_rows_of_table[fs.table].push_back(row);
        const double w = fs.weighted ? std::fabs(weights[i]) : 1.0;
        for (int c = 0; c < ts.dim; ++c) {
          double v = 0.0;
          if (row != kMissingRow) {
            v = RowElementToFloat(ht.rows.data(), ts.type, row * ts.dim + c);
          } else if (ts.default_vector) {
            v = ht.default_vector[c];
          }
          scale[c] += w * std::fabs(v);
        }
      }
      const int64_t n = end - begin;
      for (int r = bag_rows[df.bag_begin + b]; r < bag_rows[df.bag_begin + b + 1]; ++r) {
        for (int c = 0; c < ts.dim; ++c) {
          const size_t at = static_cast<size_t>(r) * sc.out_stride + fs.out_col + c;
          EXPECT_EQ(owner[at], -1) << "test bug: features overlap at row " << r;
          owner[at] = f;
          expected[at] = pooled[b * ts.dim + c];
          double tol = 0.0;
          if (ts.pooling != Pooling::kMax) {
            tol = 1e-5 * scale[c] / (ts.pooling == Pooling::kMean && n > 0 ? n : 1);
          }
          tolerance[at] = tol;
        }
      }
    }
  }

  // Device data.
  DeviceArena arena;
  PinnedArena pinned;
  constexpr uint32_t kLogEntries = 1 << 12;
  std::vector<DeviceTable> tables(num_tables);
  std::vector<DeviceTable> all_device(num_tables);  // the same tables, all in HBM
  for (int t = 0; t < num_tables; ++t) {
    const TableSpec& ts = sc.tables[t];
    const HostTable& ht = host[t];
    DeviceTable& dt = tables[t];
    dt.rows = arena.Copy(ht.rows, ts.rows_pad);
    if (ts.host) {
      all_device[t].rows = dt.rows;
      dt.rows = pinned.CopyMapped(ht.rows.data(), ht.rows.size());
      ASSERT_CUDA(pinned.error());
      dt.host = 1;
      const int64_t row_bytes = static_cast<int64_t>(ts.dim) * RowTypeBytes(ts.type);
      std::vector<uint8_t> cache(ht.rows.size());  // capacity = num_rows (upper bound)
      for (int64_t r = 0; r < ts.num_rows; ++r) {
        const int32_t slot = ht.slot_of_row[r];
        if (slot >= 0) {
          std::memcpy(&cache[slot * row_bytes], &ht.rows[r * row_bytes], row_bytes);
        }
      }
      if (ts.cache_fraction > 0) {
        dt.cache_slot = arena.Copy(ht.slot_of_row);
        dt.cache_rows = arena.Copy(cache);
      }
      dt.access_log = arena.Copy(std::vector<int64_t>(kLogEntries, -7));
      dt.access_head = arena.Copy(std::vector<unsigned long long>{0});
      dt.access_log_mask = kLogEntries - 1;
      dt.sample_shift = 2;
    }
    dt.row_type = ts.type;
    dt.pooling = ts.pooling;
    dt.dim = ts.dim;
    dt.num_rows = ts.num_rows;
    if (ts.default_vector) dt.default_vector = arena.Copy(ht.default_vector);
    if (ts.dynamic) {
      const HashTableView hv = ht.hash.view();
      const size_t slots = static_cast<size_t>(hv.num_buckets) * kBucketSlots;
      dt.hash.keys = arena.Copy(std::vector<int64_t>(hv.keys, hv.keys + slots), ts.keys_pad);
      dt.hash.rows = arena.Copy(std::vector<int64_t>(hv.rows, hv.rows + slots));
      dt.hash.num_buckets = hv.num_buckets;
    }
    if (ts.host) {
      DeviceTable d = dt;
      d.rows = all_device[t].rows;
      d.host = 0;
      d.cache_slot = nullptr;
      d.cache_rows = nullptr;
      d.access_log = nullptr;
      d.access_head = nullptr;
      all_device[t] = d;
    } else {
      all_device[t] = dt;
    }
  }
  PooledLookupArgs args;
  args.any_host = any_host;
  {
    int64_t offset = 0;  // HOST tables back to back (the staged fetch order)
    for (int t = 0; t < num_tables; ++t) {
      if (!sc.tables[t].host) continue;
      tables[t].host_offset = offset;
      offset += sc.tables[t].num_rows * static_cast<int64_t>(sc.tables[t].dim) *
                static_cast<int64_t>(RowTypeBytes(sc.tables[t].type));
    }
  }
  args.tables = arena.Copy(tables);
  // Unit bags: the explicit entries kept for the general kernel's run, the
  // unit-bag kernel's features' entries poisoned.
  const std::vector<int64_t> explicit_bag_ids = bag_ids;
  const std::vector<int32_t> explicit_bag_rows = bag_rows;
  int unit_pooled = 0;
  if (sc.unit_bags) {
    for (int f = 0; f < num_features; ++f) {
      const int32_t chunks = UnitBagRowChunks(tables[features[f].table]);
      args.unit_bag_chunks = std::max(args.unit_bag_chunks, chunks);
      if (!features[f].unit_bags || chunks == 0) continue;
      ++unit_pooled;
      for (int64_t e = 0; e <= features[f].num_bags; ++e) {
        bag_ids[features[f].bag_begin + e] = 0;
        bag_rows[features[f].bag_begin + e] = 0;
      }
    }
    // As the worker sets it: no general kernel when every feature is unit.
    args.unit_bags_only = unit_pooled == num_features && !any_host;
  }
  // As the worker sets it: all-fp32 cases run the fp32-only kernel.
  args.fp32_tables_only = !any_host && TablesFitFp32Kernel(tables.data(), num_tables);
  args.features = arena.Copy(features);
  args.num_features = num_features;
  if (sc.ids32) {
    // DYNAMIC tables' features read the int64 keys (DeviceFeature::wide_ids).
    for (int f = 0; f < num_features; ++f) {
      features[f].wide_ids = sc.tables[sc.features[f].table].dynamic ? 1 : 0;
    }
    args.features = arena.Copy(features);
    std::vector<int32_t> ids32(ids.size()), bag_ids32(bag_ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids32[i] = (ids[i] >= 0 && ids[i] <= INT32_MAX) ? static_cast<int32_t>(ids[i]) : -1;
    }
    for (size_t i = 0; i < bag_ids.size(); ++i) bag_ids32[i] = static_cast<int32_t>(bag_ids[i]);
    args.ids32 = arena.Copy(ids32);
    args.ids = arena.Copy(ids);
    args.bag_ids32 = arena.Copy(bag_ids32);
  } else {
    args.ids = arena.Copy(ids);
    args.bag_ids = arena.Copy(bag_ids);
  }
  args.weights = arena.Copy(weights);
  args.bag_rows = arena.Copy(bag_rows);
  args.total_bags = bag_prefix.back() + sc.extra_bag_slots;
  args.max_bags_per_feature = sc.max_bags_per_feature;
  if (sc.unit_bags && args.max_bags_per_feature == 0) args.max_bags_per_feature = sc.batch;
  args.out = arena.Copy(std::vector<float>(out_size, kNaN));
  args.out_stride = sc.out_stride;
  std::vector<unsigned long long> unresolved_start(num_tables);
  for (int t = 0; t < num_tables; ++t) unresolved_start[t] = 1000 + 17 * t;
  args.unresolved = sc.count_unresolved ? arena.Copy(unresolved_start) : nullptr;
  args.host_reads = any_host ? arena.Copy(std::vector<unsigned long long>(num_tables, 0)) : nullptr;
  args.host_rows_read =
      any_host ? arena.Copy(std::vector<unsigned long long>(num_tables, 0)) : nullptr;
  // Staging for the HOST tables, and what the CPU twin says it reads.
  int64_t host_ids = 0, max_row_bytes = 0, distinct_total = 0, host_span = 0;
  std::vector<HostReadCount> expected_reads(num_tables);
  for (int t = 0; t < num_tables; ++t) {
    if (!sc.tables[t].host) continue;
    host_ids += static_cast<int64_t>(host_rows_of_table[t].size());
    max_row_bytes = std::max<int64_t>(
        max_row_bytes, static_cast<int64_t>(sc.tables[t].dim) * RowTypeBytes(sc.tables[t].type));
    const std::vector<int32_t>& map = host[t].slot_of_row;
    expected_reads[t] =
        CountHostReads(host_rows_of_table[t].data(), host_rows_of_table[t].size(),
                       sc.tables[t].cache_fraction > 0 ? map.data() : nullptr);
    distinct_total += expected_reads[t].distinct_rows;
    host_span += sc.tables[t].num_rows * static_cast<int64_t>(sc.tables[t].dim) *
                 static_cast<int64_t>(RowTypeBytes(sc.tables[t].type));
  }
  const int64_t staging_capacity = sc.staging_capacity < 0 ? host_ids : sc.staging_capacity;
  if (any_host) {
    void* block = arena.Alloc(
        HostStagingBytes(static_cast<int64_t>(ids.size()), staging_capacity, max_row_bytes));
    args.staging = CarveHostStaging(block, static_cast<int64_t>(ids.size()), staging_capacity,
                                    max_row_bytes, host_span);
  }
  const int64_t* d_prefix = arena.Copy(bag_prefix);
  ASSERT_CUDA(arena.error());
  // cudaMemcpy from pageable memory may return before its DMA lands, and the
  // test stream does not wait for the legacy stream: finish the uploads.
  ASSERT_CUDA(cudaDeviceSynchronize());

  Stream stream;
  ASSERT_CUDA(stream.error());
  ASSERT_CUDA(LaunchPooledLookup(args, d_prefix, stream.get()));
  ASSERT_CUDA(cudaStreamSynchronize(stream.get()));
  ASSERT_CUDA(cudaGetLastError());

  std::vector<float> got(out_size);
  ASSERT_CUDA(cudaMemcpy(got.data(), args.out, out_size * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t at = 0; at < out_size; ++at) {
    const int row = static_cast<int>(at / sc.out_stride);
    const int col = static_cast<int>(at % sc.out_stride);
    bool ok;
    if (std::isnan(expected[at])) {
      ok = std::isnan(got[at]);
    } else {
      ok = !std::isnan(got[at]) &&
           std::fabs(static_cast<double>(got[at]) - expected[at]) <= tolerance[at];
    }
    if (!ok && ++bad <= 10) {
      ADD_FAILURE() << "row " << row << " col " << col << " (feature " << owner[at]
                    << (owner[at] >= 0
                            ? ", element " + std::to_string(col - sc.features[owner[at]].out_col)
                            : std::string(", outside every feature"))
                    << "): got " << got[at] << ", want " << expected[at] << " +- " << tolerance[at];
    }
  }
  EXPECT_EQ(bad, 0) << "elements wrong out of " << out_size;

  if (any_host) {
    // HOST tables: host reads counted exactly, sampled rows all valid, and
    // the output bit-identical to the same tables all in HBM.
    std::vector<unsigned long long> reads(num_tables);
    ASSERT_CUDA(cudaMemcpy(reads.data(), args.host_reads, num_tables * sizeof(unsigned long long),
                           cudaMemcpyDeviceToHost));
    std::vector<unsigned long long> rows_read(num_tables);
    ASSERT_CUDA(cudaMemcpy(rows_read.data(), args.host_rows_read,
                           num_tables * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    unsigned int staged = 0;
    ASSERT_CUDA(cudaMemcpy(&staged, args.staging.count, sizeof(staged), cudaMemcpyDeviceToHost));
    if (staging_capacity >= distinct_total) {
      EXPECT_EQ(staged, distinct_total) << "distinct missed rows staged";
    } else {
      EXPECT_GE(staged, staging_capacity) << "staging filled before reading directly";
    }
    for (int t = 0; t < num_tables; ++t) {
      EXPECT_EQ(reads[t], expected_host_reads[t]) << "host reads of table " << t;
      EXPECT_EQ(static_cast<int64_t>(reads[t]), expected_reads[t].misses) << "table " << t;
      if (staging_capacity >= distinct_total) {
        // Each distinct missed row crosses from host memory exactly once.
        EXPECT_EQ(static_cast<int64_t>(rows_read[t]), expected_reads[t].distinct_rows)
            << "rows read from host memory, table " << t;
      } else {
        // Staged rows once, the overflow once per id.
        EXPECT_GE(static_cast<int64_t>(rows_read[t]), expected_reads[t].distinct_rows) << t;
        EXPECT_LE(static_cast<int64_t>(rows_read[t]), expected_reads[t].misses) << t;
      }
      if (!sc.tables[t].host) continue;
      unsigned long long head = 0;
      ASSERT_CUDA(cudaMemcpy(&head, tables[t].access_head, sizeof(head), cudaMemcpyDeviceToHost));
      std::vector<int64_t> log(kLogEntries);
      ASSERT_CUDA(cudaMemcpy(log.data(), tables[t].access_log, kLogEntries * sizeof(int64_t),
                             cudaMemcpyDeviceToHost));
      for (unsigned long long i = 0; i < std::min<unsigned long long>(head, kLogEntries); ++i) {
        EXPECT_TRUE(log[i] >= 0 && log[i] < sc.tables[t].num_rows)
            << "table " << t << " access log entry " << i << " = " << log[i];
      }
      for (unsigned long long i = head; i < kLogEntries; ++i) {
        EXPECT_EQ(log[i], -7) << "table " << t << ": access log written past its head " << head;
      }
    }
    PooledLookupArgs dev = args;
    dev.any_host = false;
    dev.host_reads = nullptr;
    dev.host_rows_read = nullptr;
    dev.unresolved = nullptr;
    dev.tables = arena.Copy(all_device);
    dev.fp32_tables_only = TablesFitFp32Kernel(all_device.data(), num_tables);
    dev.out = arena.Copy(std::vector<float>(out_size, kNaN));
    ASSERT_CUDA(arena.error());
    ASSERT_CUDA(cudaDeviceSynchronize());  // the uploads, as above
    ASSERT_CUDA(LaunchPooledLookup(dev, d_prefix, stream.get()));
    ASSERT_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<float> in_hbm(out_size);
    ASSERT_CUDA(cudaMemcpy(in_hbm.data(), dev.out, out_size * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(BitDifferences(in_hbm, "all-in-HBM", got, "HOST", sc.out_stride, owner), 0)
        << "HOST tables did not give the all-in-HBM result bit for bit";
  }

  if (sc.unit_bags) {
    SCOPED_TRACE(std::to_string(unit_pooled) + " features in the unit-bag kernel" +
                 (args.unit_bags_only ? " (only)" : ""));
    PooledLookupArgs general = args;
    general.unit_bag_chunks = 0;
    general.unit_bags_only = false;
    general.unresolved = nullptr;
    general.bag_rows = arena.Copy(explicit_bag_rows);
    if (sc.ids32) {
      std::vector<int32_t> bag_ids32(explicit_bag_ids.begin(), explicit_bag_ids.end());
      general.bag_ids32 = arena.Copy(bag_ids32);
    } else {
      general.bag_ids = arena.Copy(explicit_bag_ids);
    }
    general.out = arena.Copy(std::vector<float>(out_size, kNaN));
    ASSERT_CUDA(arena.error());
    ASSERT_CUDA(cudaDeviceSynchronize());  // the uploads, as above
    ASSERT_CUDA(LaunchPooledLookup(general, d_prefix, stream.get()));
    ASSERT_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<float> want(out_size);
    ASSERT_CUDA(
        cudaMemcpy(want.data(), general.out, out_size * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(BitDifferences(want, "general", got, "unit", sc.out_stride, owner), 0)
        << "the unit-bag kernel did not give the general kernel's bits";
  }

  if (sc.count_unresolved) {
    std::vector<unsigned long long> counts(num_tables);
    ASSERT_CUDA(cudaMemcpy(counts.data(), args.unresolved, num_tables * sizeof(unsigned long long),
                           cudaMemcpyDeviceToHost));
    for (int t = 0; t < num_tables; ++t) {
      EXPECT_EQ(counts[t], expected_unresolved[t]) << "unresolved ids of table " << t;
    }
  }
}

// Bag layout helpers.
std::vector<int> PerCandidateRows(int batch) { return std::vector<int>(batch, 1); }

// Random partition of `batch` rows into shared bags of 1..max_rows rows.
std::vector<int> SharedRows(int batch, int max_rows, std::mt19937_64& rng) {
  std::vector<int> counts;
  int left = batch;
  while (left > 0) {
    const int c = std::min(left, 1 + static_cast<int>(rng() % max_rows));
    counts.push_back(c);
    left -= c;
  }
  return counts;
}

// Bag sizes in [0, max_size], about 1 in 8 empty.
std::vector<int> RandomBagSizes(size_t bags, int max_size, std::mt19937_64& rng) {
  std::vector<int> sizes(bags);
  for (int& s : sizes) s = (rng() % 8 == 0) ? 0 : 1 + static_cast<int>(rng() % max_size);
  return sizes;
}

// Places features left to right with random gaps (some aligned to 4 floats so
// both the 16-byte and the scalar store paths run); the stride leaves a few
// poisoned columns at the end.
void LayOutColumns(Scenario* sc, std::mt19937_64& rng) {
  int cursor = static_cast<int>(rng() % 3);
  for (size_t f = 0; f < sc->features.size(); ++f) {
    FeatureSpec& fs = sc->features[f];
    cursor += static_cast<int>(rng() % 4);
    if (f % 2 == 0) cursor = (cursor + 3) / 4 * 4;
    fs.out_col = cursor;
    cursor += sc->tables[fs.table].dim;
  }
  sc->out_stride = cursor + 1 + static_cast<int>(rng() % 4);
  if (rng() % 2 == 0) sc->out_stride = (sc->out_stride + 3) / 4 * 4;
}

// ---------------------------------------------------------------------------
// Every dtype x pooling x weighted x static/dynamic x default vector / zeros.

using Combo = std::tuple<RowType, Pooling, bool /*weighted*/, bool /*dynamic*/, bool /*default*/>;

class PooledCombinationTest : public ::testing::TestWithParam<Combo> {};

TEST_P(PooledCombinationTest, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  const auto [type, pooling, weighted, dynamic, with_default] = GetParam();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  Scenario sc;
  sc.batch = 70;
  // Dims 4, 16, 128, 6 (not a multiple of 4), 64, plus one of: 3, 8, 12, 260
  // and 520 (several column passes), 1.
  const int extra_dims[] = {3, 8, 12, 260, 520, 1};
  const std::vector<int> dims = {4, 16, 128, 6, 64, extra_dims[rng() % 6]};
  for (size_t i = 0; i < dims.size(); ++i) {
    TableSpec t;
    t.type = type;
    t.pooling = pooling;
    t.dim = dims[i];
    t.num_rows = 200 + static_cast<int64_t>(rng() % 300);
    t.dynamic = dynamic;
    t.default_vector = with_default;
    t.load_factor = (i % 2 == 0) ? 0.5 : 0.9;
    sc.tables.push_back(t);
    FeatureSpec f;
    f.table = static_cast<int>(i);
    f.weighted = weighted;
    f.miss_rate = 0.15;
    // One feature with shared (request-level) bags, the others per candidate.
    f.bag_row_counts = (i == 1) ? SharedRows(sc.batch, 12, rng) : PerCandidateRows(sc.batch);
    f.bag_sizes = RandomBagSizes(f.bag_row_counts.size(), i == 2 ? 70 : 30, rng);
    sc.features.push_back(f);
  }
  LayOutColumns(&sc, rng);
  RunScenario(sc, seed);
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  const auto [type, pooling, weighted, dynamic, with_default] = info.param;
  return std::string(TypeName(type)) + "_" + PoolingName(pooling) +
         (weighted ? "_weighted" : "_unweighted") + (dynamic ? "_dynamic" : "_static") +
         (with_default ? "_default" : "_zeros");
}

INSTANTIATE_TEST_SUITE_P(
    All, PooledCombinationTest,
    ::testing::Combine(::testing::Values(RowType::kFp32, RowType::kFp16, RowType::kBf16),
                       ::testing::Values(Pooling::kSum, Pooling::kMean, Pooling::kMax),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
    ComboName);

// ---------------------------------------------------------------------------
// Mixed features in one launch.

Scenario MixedScenario(std::mt19937_64& rng) {
  Scenario sc;
  sc.batch = 150;
  auto table = [&](RowType type, Pooling pooling, int dim, bool dynamic, bool with_default) {
    TableSpec t;
    t.type = type;
    t.pooling = pooling;
    t.dim = dim;
    t.num_rows = 300 + static_cast<int64_t>(rng() % 500);
    t.dynamic = dynamic;
    t.default_vector = with_default;
    sc.tables.push_back(t);
    return static_cast<int>(sc.tables.size()) - 1;
  };
  auto feature = [&](int t, bool weighted, std::vector<int> row_counts, int max_bag) {
    FeatureSpec f;
    f.table = t;
    f.weighted = weighted;
    f.miss_rate = 0.1;
    f.bag_row_counts = std::move(row_counts);
    f.bag_sizes = RandomBagSizes(f.bag_row_counts.size(), max_bag, rng);
    sc.features.push_back(f);
    return static_cast<int>(sc.features.size()) - 1;
  };
  const int t4 = table(RowType::kFp32, Pooling::kSum, 4, false, false);
  const int t16 = table(RowType::kBf16, Pooling::kMean, 16, true, true);
  const int t128 = table(RowType::kFp16, Pooling::kMax, 128, false, true);
  const int t6 = table(RowType::kFp32, Pooling::kMean, 6, true, false);
  const int t64 = table(RowType::kBf16, Pooling::kSum, 64, false, false);
  const int t12 = table(RowType::kFp16, Pooling::kSum, 12, true, true);  // 8-byte loads
  // fp32 dim 128 with rows 4 bytes off 16-byte alignment: scalar loads.
  const int t128u = table(RowType::kFp32, Pooling::kSum, 128, false, true);
  sc.tables[t128u].rows_pad = 4;
  // Hash keys 8 bytes off 16-byte alignment: scalar probes.
  const int t32k = table(RowType::kFp32, Pooling::kMax, 32, true, true);
  sc.tables[t32k].keys_pad = 8;
  sc.tables[t32k].load_factor = 0.95;

  feature(t4, false, PerCandidateRows(sc.batch), 5);
  feature(t16, true, SharedRows(sc.batch, 40, rng), 30);
  feature(t128, true, PerCandidateRows(sc.batch), 25);
  const int big = feature(t6, false, SharedRows(sc.batch, 25, rng), 10);
  sc.features[big].bag_sizes[0] = 1000;  // one long (user history) bag
  feature(t64, false, PerCandidateRows(sc.batch), 20);
  feature(t12, true, PerCandidateRows(sc.batch), 8);
  feature(t128u, false, PerCandidateRows(sc.batch), 6);
  feature(t32k, true, SharedRows(sc.batch, 3, rng), 12);
  feature(t4, true, PerCandidateRows(sc.batch), 3);  // second feature on one table
  const int none = feature(t64, false, {}, 1);       // a feature without bags
  (void)none;
  const int all_empty = feature(t16, false, PerCandidateRows(sc.batch), 1);
  std::fill(sc.features[all_empty].bag_sizes.begin(), sc.features[all_empty].bag_sizes.end(), 0);
  const int long_bag = feature(t128, false, PerCandidateRows(sc.batch), 3);
  sc.features[long_bag].bag_sizes[sc.batch / 2] = 1000;
  // Shuffle feature order so the bag prefix puts small and large dims side by side.
  std::shuffle(sc.features.begin(), sc.features.end(), rng);
  LayOutColumns(&sc, rng);
  sc.extra_bag_slots = 37;
  return sc;
}

// HOST tables with caches of 0, 30, 100% of rows, mixed with DEVICE tables
// in one launch, for every dtype and pooling.
TEST(PooledLookupGpuTest, HostTablesBehindCache) {
  SKIP_WITHOUT_GPU();
  for (RowType type : {RowType::kFp32, RowType::kFp16, RowType::kBf16}) {
    for (Pooling pooling : {Pooling::kSum, Pooling::kMean, Pooling::kMax}) {
     // Staging for every distinct miss, for a few rows (the rest read
     // directly), and none.
     for (int64_t staging : {int64_t{-1}, int64_t{7}, int64_t{0}}) {
      const uint64_t seed = TestSeed();
      std::mt19937_64 rng(seed);
      Scenario sc;
      sc.staging_capacity = staging;
      sc.batch = 90;
      const int dims[] = {128, 16, 6, 64, 260};
      const double fractions[] = {0.0, 0.3, 1.0, 0.3, 0.5};
      for (int i = 0; i < 5; ++i) {
        TableSpec t;
        t.type = type;
        t.pooling = pooling;
        t.dim = dims[i];
        t.num_rows = 300 + static_cast<int64_t>(rng() % 300);
        t.dynamic = i == 3;
        t.default_vector = i % 2 == 1;
        t.host = i != 1;  // table 1 stays in HBM
        t.cache_fraction = fractions[i];
        sc.tables.push_back(t);
        FeatureSpec f;
        f.table = i;
        f.weighted = i % 2 == 0;
        f.bag_row_counts = i == 2 ? SharedRows(sc.batch, 9, rng) : PerCandidateRows(sc.batch);
        f.bag_sizes = RandomBagSizes(f.bag_row_counts.size(), i == 0 ? 60 : 20, rng);
        sc.features.push_back(f);
      }
      LayOutColumns(&sc, rng);
      RunScenario(sc, seed);
     }
    }
  }
}

TEST(PooledLookupGpuTest, MixedFeaturesInOneLaunch) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  RunScenario(MixedScenario(rng), seed);
}

TEST(PooledLookupGpuTest, WithoutUnresolvedCounters) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  Scenario sc = MixedScenario(rng);
  sc.count_unresolved = false;
  RunScenario(sc, seed);
}

TEST(PooledLookupGpuTest, AllIdsUnresolved) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  Scenario sc = MixedScenario(rng);
  for (FeatureSpec& f : sc.features) f.miss_rate = 1.0;
  RunScenario(sc, seed);
}

// A random scenario: dims 1..300, bags up to 200 ids, batches 1..300, every
// row type, pooling and table kind.
Scenario RandomScenario(std::mt19937_64& rng) {
  Scenario sc;
  sc.batch = 1 + static_cast<int>(rng() % 300);
  const int num_tables = 1 + static_cast<int>(rng() % 5);
  for (int t = 0; t < num_tables; ++t) {
    TableSpec ts;
    ts.type = static_cast<RowType>(rng() % 3);
    ts.pooling = static_cast<Pooling>(rng() % 3);
    ts.dim = 1 + static_cast<int>(rng() % 300);
    if (rng() % 2) ts.dim = (ts.dim + 3) / 4 * 4;
    ts.num_rows = 1 + static_cast<int64_t>(rng() % 2000);
    ts.dynamic = rng() % 2;
    ts.default_vector = rng() % 2;
    ts.load_factor = 0.3 + 0.69 * (rng() % 100) / 100.0;
    ts.host = rng() % 3 == 0;
    ts.cache_fraction = (rng() % 5) * 0.25;
    sc.tables.push_back(ts);
  }
  const int num_features = 1 + static_cast<int>(rng() % 8);
  for (int f = 0; f < num_features; ++f) {
    FeatureSpec fs;
    fs.table = static_cast<int>(rng() % num_tables);
    fs.weighted = rng() % 2;
    fs.miss_rate = (rng() % 4) * 0.1;
    fs.bag_row_counts =
        (rng() % 3 == 0) ? SharedRows(sc.batch, 50, rng) : PerCandidateRows(sc.batch);
    fs.bag_sizes =
        RandomBagSizes(fs.bag_row_counts.size(), 1 + static_cast<int>(rng() % 200), rng);
    sc.features.push_back(fs);
  }
  LayOutColumns(&sc, rng);
  sc.extra_bag_slots = static_cast<int64_t>(rng() % 10);
  sc.staging_capacity = rng() % 2 ? -1 : static_cast<int64_t>(rng() % 50);
  return sc;
}

// Random shapes: dims 1..300, bags up to 200 ids, batches 1..300.
TEST(PooledLookupGpuTest, RandomScenarios) {
  SKIP_WITHOUT_GPU();
  const uint64_t base_seed = TestSeed();
  for (int iter = 0; iter < 12; ++iter) {
    const uint64_t seed = base_seed + iter;
    std::mt19937_64 rng(seed);
    Scenario sc = RandomScenario(rng);
    RunScenario(sc, seed);
    if (::testing::Test::HasFailure()) break;
  }
}

// 32-bit ids and bag offsets (the CUDA worker's compact layout) on random
// scenarios: static tables' out-of-range ids (int64 extremes among them)
// narrowed to -1, DYNAMIC tables' features reading their int64 keys
// (wide_ids), HBM and HOST tables.
TEST(PooledLookupGpuTest, ThirtyTwoBitIdsAndOffsets) {
  SKIP_WITHOUT_GPU();
  const uint64_t base_seed = TestSeed();
  for (int iter = 0; iter < 12; ++iter) {
    const uint64_t seed = base_seed + 100 + iter;
    std::mt19937_64 rng(seed);
    Scenario sc = RandomScenario(rng);
    sc.ids32 = true;
    RunScenario(sc, seed);
    if (::testing::Test::HasFailure()) break;
  }
}

// Warps laid out per feature (PooledLookupArgs::max_bags_per_feature, as the
// CUDA worker launches): the bound equal to the most bags of a feature,
// larger, and smaller (the feature's last warp pools the rest), on random
// scenarios of every table kind, and batches of one row.
TEST(PooledLookupGpuTest, WarpsPerFeature) {
  SKIP_WITHOUT_GPU();
  const uint64_t base_seed = TestSeed();
  for (int iter = 0; iter < 12; ++iter) {
    const uint64_t seed = base_seed + 200 + iter;
    std::mt19937_64 rng(seed);
    Scenario sc = MixedScenario(rng);
    if (iter % 2 == 1) {  // HOST tables behind caches too (the resolve pass)
      for (size_t t = 0; t < sc.tables.size(); t += 2) {
        sc.tables[t].host = true;
        sc.tables[t].cache_fraction = 0.3;
      }
    }
    if (iter % 4 == 3) {  // one row: one bag a feature
      sc.batch = 1;
      for (FeatureSpec& f : sc.features) {
        f.bag_row_counts = {1};
        f.bag_sizes = {1 + static_cast<int>(rng() % 5)};
      }
      LayOutColumns(&sc, rng);
    }
    int64_t most = 0;
    for (const FeatureSpec& f : sc.features) {
      most = std::max<int64_t>(most, static_cast<int64_t>(f.bag_sizes.size()));
    }
    const int64_t bounds[] = {most, most + 13, std::max<int64_t>(1, most / 3)};
    sc.max_bags_per_feature = bounds[iter % 3];
    RunScenario(sc, seed);
    if (::testing::Test::HasFailure()) break;
  }
}

// Unit bags (PooledLookupArgs::unit_bag_chunks): features of one id per
// row on tables of every row type, pooling and dim, some qualifying for the
// unit-bag kernel and some not (dims that are not whole 16-byte chunks,
// rows off 16-byte alignment, DYNAMIC and HOST tables), beside multi-hot
// and shared features, with unresolved ids, weights, default vectors, both
// id widths and unaligned output columns; batches of 1 to 700 rows. Every
// fourth scenario has only unit features on qualifying tables (the unit-bag
// kernel alone, PooledLookupArgs::unit_bags_only).
TEST(PooledLookupGpuTest, UnitBagsMatchCpuAndTheGeneralKernel) {
  SKIP_WITHOUT_GPU();
  const uint64_t base_seed = TestSeed();
  const int dims[] = {4, 8, 16, 32, 128, 12, 6, 3, 24, 64};
  const int chunk_dims[] = {8, 16, 32, 128};  // whole 16-byte chunks in every row type
  for (int iter = 0; iter < 16; ++iter) {
    const uint64_t seed = base_seed + 300 + iter;
    std::mt19937_64 rng(seed);
    const bool only_unit = iter % 4 == 3;
    Scenario sc;
    sc.unit_bags = true;
    sc.ids32 = iter % 2 == 1;
    sc.batch = iter % 4 == 0 ? 1 + static_cast<int>(rng() % 3) : 1 + static_cast<int>(rng() % 700);
    const int num_tables = 3 + static_cast<int>(rng() % 4);
    for (int t = 0; t < num_tables; ++t) {
      TableSpec ts;
      ts.type = static_cast<RowType>(rng() % 3);
      ts.pooling = static_cast<Pooling>(rng() % 3);
      ts.dim = dims[rng() % 10];
      ts.num_rows = 1 + static_cast<int64_t>(rng() % 3000);
      ts.default_vector = rng() % 2;
      ts.dynamic = rng() % 6 == 0;
      ts.host = !ts.dynamic && rng() % 8 == 0;
      ts.cache_fraction = 0.5;
      if (rng() % 6 == 0) ts.rows_pad = 4;
      if (only_unit) {
        ts.dim = chunk_dims[rng() % 4];
        ts.dynamic = false;
        ts.host = false;
        ts.rows_pad = 0;
      }
      sc.tables.push_back(ts);
    }
    const int num_features = 2 + static_cast<int>(rng() % 8);
    for (int f = 0; f < num_features; ++f) {
      FeatureSpec fs;
      fs.table = static_cast<int>(rng() % num_tables);
      fs.weighted = rng() % 2;
      fs.miss_rate = (rng() % 4) * 0.1;
      // 0: multi-hot, 1: shared, else unit
      const int kind = only_unit ? 2 : static_cast<int>(rng() % 8);
      fs.bag_row_counts =
          kind == 1 ? SharedRows(sc.batch, 20, rng) : PerCandidateRows(sc.batch);
      fs.bag_sizes = kind <= 1 ? RandomBagSizes(fs.bag_row_counts.size(), 6, rng)
                               : std::vector<int>(fs.bag_row_counts.size(), 1);
      sc.features.push_back(fs);
    }
    LayOutColumns(&sc, rng);
    RunScenario(sc, seed);
    if (::testing::Test::HasFailure()) break;
  }
}

// More features than a grid has rows (65,535): the unit-bag kernel strides
// over them, every one pooled, unit only and beside a general-kernel feature.
TEST(PooledLookupGpuTest, UnitBagsOfMoreFeaturesThanAGridHasRows) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (bool mixed : {false, true}) {
    Scenario sc;
    sc.unit_bags = true;
    sc.batch = 2;
    TableSpec t;
    t.dim = 4;
    t.num_rows = 50;
    t.default_vector = true;
    sc.tables.push_back(t);
    for (int f = 0; f < 65600; ++f) {
      FeatureSpec fs;
      fs.bag_row_counts = PerCandidateRows(sc.batch);
      fs.bag_sizes.assign(sc.batch, 1);
      sc.features.push_back(fs);
    }
    if (mixed) sc.features.back().bag_sizes = {2, 3};  // not unit: the general kernel
    LayOutColumns(&sc, rng);
    RunScenario(sc, seed);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(PooledLookupGpuTest, UnitBagKernelRefusesTheSlotLayout) {
  SKIP_WITHOUT_GPU();
  DeviceArena arena;
  PooledLookupArgs args;
  args.tables = arena.Copy(std::vector<DeviceTable>(1));
  args.features = arena.Copy(std::vector<DeviceFeature>(1));
  args.num_features = 1;
  args.ids = arena.Copy(std::vector<int64_t>{0});
  args.bag_ids = arena.Copy(std::vector<int64_t>{0, 1});
  args.bag_rows = arena.Copy(std::vector<int32_t>{0, 1});
  args.out = arena.Copy(std::vector<float>(4, 0.0f));
  args.out_stride = 4;
  args.total_bags = 1;
  args.unit_bag_chunks = 1;
  const int64_t* prefix = arena.Copy(std::vector<int64_t>{0, 1});
  ASSERT_CUDA(arena.error());
  EXPECT_EQ(LaunchPooledLookup(args, prefix, nullptr), cudaErrorInvalidValue)
      << "unit_bag_chunks without max_bags_per_feature";
}

// The benchmark's shape, smaller table: B 4096, bag 20, dim 128.
TEST(PooledLookupGpuTest, BenchmarkShape) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (RowType type : {RowType::kFp32, RowType::kBf16}) {
    Scenario sc;
    sc.batch = 4096;
    TableSpec t;
    t.type = type;
    t.dim = 128;
    t.num_rows = 20000;
    sc.tables.push_back(t);
    FeatureSpec f;
    f.miss_rate = 0.0;
    f.bag_row_counts = PerCandidateRows(sc.batch);
    f.bag_sizes.assign(sc.batch, 20);
    sc.features.push_back(f);
    sc.out_stride = 128;
    RunScenario(sc, seed);
  }
}

TEST(PooledLookupGpuTest, NothingToDoLaunchesNothing) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  ASSERT_CUDA(stream.error());
  PooledLookupArgs args;  // total_bags 0, every pointer null
  EXPECT_EQ(LaunchPooledLookup(args, nullptr, stream.get()), cudaSuccess);
  args.total_bags = 10;  // features still 0
  EXPECT_EQ(LaunchPooledLookup(args, nullptr, stream.get()), cudaSuccess);
  args.num_features = 1;  // now the pointers are needed
  EXPECT_EQ(LaunchPooledLookup(args, nullptr, stream.get()), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchHashLookup(HashTableView{}, nullptr, 0, nullptr, stream.get()), cudaSuccess);
  ASSERT_CUDA(cudaStreamSynchronize(stream.get()));
}

// ---------------------------------------------------------------------------
// Hash lookup.

// Runs LaunchHashLookup on `queries` and compares with HashLookupBatch.
void CheckHashLookup(const HashTable& table, const std::vector<int64_t>& queries, size_t keys_pad) {
  const HashTableView hv = table.view();
  std::vector<int64_t> want(queries.size());
  HashLookupBatch(hv, queries, want.data());

  DeviceArena arena;
  const size_t slots = static_cast<size_t>(hv.num_buckets) * kBucketSlots;
  HashTableView dv;
  dv.keys = arena.Copy(std::vector<int64_t>(hv.keys, hv.keys + slots), keys_pad);
  dv.rows = arena.Copy(std::vector<int64_t>(hv.rows, hv.rows + slots));
  dv.num_buckets = hv.num_buckets;
  const int64_t* d_queries = arena.Copy(queries);
  int64_t* d_out = arena.Copy(std::vector<int64_t>(queries.size(), int64_t{0x5a5a5a5a5a5a5a5a}));
  ASSERT_CUDA(arena.error());
  // cudaMemcpy from pageable memory may return before its DMA lands, and the
  // test stream does not wait for the legacy stream: finish the uploads.
  ASSERT_CUDA(cudaDeviceSynchronize());
  Stream stream;
  ASSERT_CUDA(stream.error());
  ASSERT_CUDA(
      LaunchHashLookup(dv, d_queries, static_cast<int64_t>(queries.size()), d_out, stream.get()));
  ASSERT_CUDA(cudaStreamSynchronize(stream.get()));
  std::vector<int64_t> got(queries.size());
  ASSERT_CUDA(cudaMemcpy(got.data(), d_out, got.size() * sizeof(int64_t), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (got[i] != want[i] && ++bad <= 10) {
      ADD_FAILURE() << "query " << i << " key " << queries[i] << ": got " << got[i] << ", want "
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << "of " << queries.size() << " queries";
}

class HashLookupGpuTest : public ::testing::TestWithParam<double> {};

// 2^21 slots filled to the load factor; 1M queries: half present, half
// absent, both signs, plus kEmptyKey. Keys and rows 16-byte aligned and keys
// 8 bytes off (the scalar probe).
TEST_P(HashLookupGpuTest, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  const double load = GetParam();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", load factor " + std::to_string(load));
  std::mt19937_64 rng(seed);
  constexpr int64_t kSlots = int64_t{1} << 21;
  const int64_t n = static_cast<int64_t>(load * kSlots);
  std::vector<int64_t> keys;
  std::unordered_set<int64_t> key_set;
  keys.reserve(n);
  while (static_cast<int64_t>(keys.size()) < n) {
    const int64_t k = static_cast<int64_t>(rng());
    if (k != kEmptyKey && key_set.insert(k).second) keys.push_back(k);
  }
  HashTable table;
  ASSERT_TRUE(HashTable::Build(keys, kSlots, &table).ok());
  ASSERT_EQ(table.num_slots(), kSlots);

  std::vector<int64_t> queries(1 << 20);
  for (size_t i = 0; i < queries.size(); ++i) {
    if (i % 2 == 0) {
      queries[i] = keys[rng() % keys.size()];
    } else {
      int64_t k;
      do {
        k = static_cast<int64_t>(rng());
      } while (key_set.count(k) != 0);
      queries[i] = k;
    }
  }
  queries[1] = kEmptyKey;
  queries[3] = 0;
  queries[5] = -1;
  std::shuffle(queries.begin(), queries.end(), rng);
  CheckHashLookup(table, queries, 0);
  CheckHashLookup(table, queries, 8);
}

INSTANTIATE_TEST_SUITE_P(LoadFactors, HashLookupGpuTest, ::testing::Values(0.5, 0.9),
                         [](const ::testing::TestParamInfo<double>& info) {
                           return info.param == 0.5 ? std::string("Half")
                                                    : std::string("NinetyPercent");
                         });

// A completely full table has no empty slot: a missing key's probe must stop
// after num_buckets buckets, as on the CPU.
TEST(HashLookupGpuFullTableTest, MissingKeysTerminate) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> keys;
  std::unordered_set<int64_t> key_set;
  while (keys.size() < 4 * kBucketSlots) {
    const int64_t k = static_cast<int64_t>(rng() % 100000) - 50000;
    if (key_set.insert(k).second) keys.push_back(k);
  }
  HashTable table;
  ASSERT_TRUE(HashTable::Build(keys, static_cast<int64_t>(keys.size()), &table).ok());
  ASSERT_EQ(table.num_slots(), static_cast<int64_t>(keys.size()));
  std::vector<int64_t> queries = keys;
  for (int i = 0; i < 1000; ++i) queries.push_back(200000 + i);
  queries.push_back(kEmptyKey);
  std::shuffle(queries.begin(), queries.end(), rng);
  CheckHashLookup(table, queries, 0);
  CheckHashLookup(table, queries, 8);
}

}  // namespace
}  // namespace rankd::kernels::cuda
