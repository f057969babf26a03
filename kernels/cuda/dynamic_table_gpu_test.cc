// GPU dynamic-table updates (kernels/cuda/dynamic_table.h) against the CPU
// twin (kernels/cpu/dynamic_table.h): random streams of upserts (with
// evictions, LRU / LFU / none), erases and rehashes applied to a CPU table
// and a GPU table that start from the same contents; after every step the
// two agree on the stored key set, each key's row bytes and score, the
// evicted key set, size / free_count and every stat but `rehashes`, and the
// GPU table passes ValidateDynamicTable. Outputs are poisoned (scratch,
// evicted keys, free rows' bytes). Also: GPU init vs InitDynamicTable, score
// touches of the pooled lookup vs PoolEmbeddings, and the row-scatter
// kernels vs their twins. Needs a CUDA device (tags "gpu", "manual").
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/row_scatter.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/dynamic_table.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/gpu_test_util.h"
#include "kernels/cuda/row_scatter.h"

namespace rankd::kernels::cuda {
namespace {

using ::rankd::kernels::cuda::testing::TestSeed;

template <typename T>
T* DeviceAlloc(int64_t count) {
  void* p = nullptr;
  EXPECT_CUDA(cudaMalloc(&p, sizeof(T) * std::max<int64_t>(count, 1)));
  return static_cast<T*>(p);
}

template <typename T>
void ToDevice(T* d, const T* h, int64_t count) {
  if (count > 0) {
    EXPECT_CUDA(cudaMemcpy(d, h, sizeof(T) * count, cudaMemcpyHostToDevice));
  }
}

template <typename T>
void ToHost(T* h, const T* d, int64_t count) {
  if (count > 0) {
    EXPECT_CUDA(cudaMemcpy(h, d, sizeof(T) * count, cudaMemcpyDeviceToHost));
  }
}

// Host copy of a device table, with a view over the copy.
struct HostCopy {
  std::vector<int64_t> slot_keys, slot_rows, row_keys, free_rows;
  std::vector<uint64_t> scores;
  std::vector<char> rows;
  DynamicTableCounters counters;
  DynamicTableView view;
};

// A device table shaped like a CPU DynamicTableStorage.
class DeviceTableFixture {
 public:
  explicit DeviceTableFixture(const DynamicTableView& like) {
    v_ = like;
    v_.slot_keys = DeviceAlloc<int64_t>(like.num_slots());
    v_.slot_rows = DeviceAlloc<int64_t>(like.num_slots());
    v_.row_keys = DeviceAlloc<int64_t>(like.max_keys);
    v_.scores = DeviceAlloc<uint64_t>(like.max_keys);
    v_.free_rows = DeviceAlloc<int64_t>(like.max_keys);
    v_.counters = DeviceAlloc<DynamicTableCounters>(1);
    v_.rows = DeviceAlloc<char>(like.max_keys * like.row_bytes);
    EXPECT_CUDA(cudaMemset(v_.rows, 0x7f, like.max_keys * like.row_bytes));
    stats_ = DeviceAlloc<DynamicStats>(1);
    EXPECT_CUDA(cudaMemset(stats_, 0, sizeof(DynamicStats)));
  }
  ~DeviceTableFixture() {
    cudaFree(v_.slot_keys);
    cudaFree(v_.slot_rows);
    cudaFree(v_.row_keys);
    cudaFree(v_.scores);
    cudaFree(v_.free_rows);
    cudaFree(v_.counters);
    cudaFree(v_.rows);
    cudaFree(stats_);
  }
  const DynamicTableView& view() const { return v_; }
  DynamicStats* stats() { return stats_; }

  // Copies every array of the CPU table `h` to the device.
  void Upload(const DynamicTableView& h) {
    ToDevice(v_.slot_keys, h.slot_keys, h.num_slots());
    ToDevice(v_.slot_rows, h.slot_rows, h.num_slots());
    ToDevice(v_.row_keys, h.row_keys, h.max_keys);
    ToDevice(v_.scores, h.scores, h.max_keys);
    ToDevice(v_.free_rows, h.free_rows, h.max_keys);
    ToDevice(v_.counters, h.counters, 1);
    ToDevice(static_cast<char*>(v_.rows), static_cast<const char*>(h.rows),
             h.max_keys * h.row_bytes);
  }

  void Download(HostCopy* c) const {
    c->slot_keys.resize(v_.num_slots());
    c->slot_rows.resize(v_.num_slots());
    c->row_keys.resize(v_.max_keys);
    c->free_rows.resize(v_.max_keys);
    c->scores.resize(v_.max_keys);
    c->rows.resize(v_.max_keys * v_.row_bytes);
    ToHost(c->slot_keys.data(), v_.slot_keys, v_.num_slots());
    ToHost(c->slot_rows.data(), v_.slot_rows, v_.num_slots());
    ToHost(c->row_keys.data(), v_.row_keys, v_.max_keys);
    ToHost(c->free_rows.data(), v_.free_rows, v_.max_keys);
    ToHost(c->scores.data(), v_.scores, v_.max_keys);
    ToHost(c->rows.data(), static_cast<const char*>(v_.rows), v_.max_keys * v_.row_bytes);
    ToHost(&c->counters, v_.counters, 1);
    c->view = v_;
    c->view.slot_keys = c->slot_keys.data();
    c->view.slot_rows = c->slot_rows.data();
    c->view.row_keys = c->row_keys.data();
    c->view.free_rows = c->free_rows.data();
    c->view.scores = c->scores.data();
    c->view.rows = c->rows.data();
    c->view.counters = &c->counters;
  }

  DynamicStats TakeStats() {
    DynamicStats s;
    ToHost(&s, stats_, 1);
    EXPECT_CUDA(cudaMemset(stats_, 0, sizeof(DynamicStats)));
    return s;
  }

 private:
  DynamicTableView v_;
  DynamicStats* stats_ = nullptr;
};

// key -> (row bytes, score) of a table.
std::map<int64_t, std::pair<std::vector<char>, uint64_t>> Contents(const DynamicTableView& v) {
  std::map<int64_t, std::pair<std::vector<char>, uint64_t>> out;
  const HashTableView hv = AsHashTableView(v);
  for (int64_t r = 0; r < v.max_keys; ++r) {
    const int64_t key = v.row_keys[r];
    if (key == kEmptyKey) continue;
    const int64_t row = HashLookup(hv, key);  // through the slots, as serving does
    EXPECT_EQ(row, r) << "key " << key;
    const char* p = static_cast<const char*>(v.rows) + r * v.row_bytes;
    out[key] = {std::vector<char>(p, p + v.row_bytes), v.scores[r]};
  }
  return out;
}

void ExpectSameTables(const DynamicTableView& cpu, DeviceTableFixture& gpu, const char* what,
                      int step) {
  HostCopy c;
  gpu.Download(&c);
  const absl::Status valid = ValidateDynamicTable(c.view);
  ASSERT_TRUE(valid.ok()) << what << " step " << step << ": " << valid;
  ASSERT_EQ(c.counters.size, cpu.counters->size) << what << " step " << step;
  ASSERT_EQ(c.counters.free_count, cpu.counters->free_count) << what << " step " << step;
  const auto a = Contents(cpu);
  const auto b = Contents(c.view);
  ASSERT_EQ(a.size(), b.size()) << what << " step " << step;
  for (const auto& [key, e] : a) {
    auto it = b.find(key);
    ASSERT_NE(it, b.end()) << what << " step " << step << ": key " << key << " missing on GPU";
    ASSERT_EQ(e.first, it->second.first) << what << " step " << step << ": bytes of " << key;
    ASSERT_EQ(e.second, it->second.second) << what << " step " << step << ": score of " << key;
  }
}

void ExpectSameStats(const DynamicStats& a, const DynamicStats& b, int step) {
  EXPECT_EQ(a.inserted, b.inserted) << "step " << step;
  EXPECT_EQ(a.updated, b.updated) << "step " << step;
  EXPECT_EQ(a.evicted, b.evicted) << "step " << step;
  EXPECT_EQ(a.deleted, b.deleted) << "step " << step;
  EXPECT_EQ(a.not_found, b.not_found) << "step " << step;
  EXPECT_EQ(a.failed, 0) << "step " << step;
  EXPECT_EQ(b.failed, 0) << "step " << step;
}

struct StreamCase {
  int64_t max_keys;
  int64_t min_slots;
  int64_t row_bytes;
  EvictionPolicy policy;
  int steps;
  int64_t max_batch;
  int64_t key_space;  // keys in [-key_space, key_space]
  bool tie_scores;    // LRU with few distinct `now` values (ties by key)
};

void RunStream(const StreamCase& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " (RANKD_TEST_SEED)");
  std::mt19937_64 rng(seed);
  DynamicTableStorage cpu;
  ASSERT_TRUE(DynamicTableStorage::Create(c.max_keys, c.min_slots, c.row_bytes, &cpu).ok());
  const DynamicTableView& v = cpu.view();
  DeviceTableFixture gpu(v);
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));

  // Same initial keys on both: InitDynamicTable vs LaunchDynamicInit.
  std::uniform_int_distribution<int64_t> key_dist(-c.key_space, c.key_space);
  std::set<int64_t> init_set;
  while (static_cast<int64_t>(init_set.size()) < c.max_keys / 2) init_set.insert(key_dist(rng));
  std::vector<int64_t> init_keys(init_set.begin(), init_set.end());
  std::shuffle(init_keys.begin(), init_keys.end(), rng);
  for (int64_t r = 0; r < static_cast<int64_t>(init_keys.size()); ++r) {
    for (int64_t b = 0; b < c.row_bytes; ++b) cpu.row(r)[b] = static_cast<char>(rng());
  }
  gpu.Upload(v);  // rows' bytes (and a valid empty table)
  ASSERT_TRUE(InitDynamicTable(v, init_keys).ok());
  int64_t* d_init = DeviceAlloc<int64_t>(init_keys.size());
  ToDevice(d_init, init_keys.data(), init_keys.size());
  ASSERT_CUDA(LaunchDynamicInit(gpu.view(), d_init, init_keys.size(), gpu.stats(), stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  cudaFree(d_init);
  EXPECT_EQ(gpu.TakeStats().failed, 0);
  ExpectSameTables(v, gpu, "init", -1);

  const int64_t scratch_bytes = DynamicUpsertScratchBytes(c.max_keys, c.max_batch);
  void* scratch = DeviceAlloc<char>(scratch_bytes);
  int64_t* d_keys = DeviceAlloc<int64_t>(c.max_batch);
  int64_t* d_evicted = DeviceAlloc<int64_t>(c.max_batch + 1);
  char* d_src = DeviceAlloc<char>(c.max_batch * c.row_bytes);
  uint64_t now = 1;
  int64_t evictions = 0;
  // Steps past c.steps run only while nothing has been evicted yet, each a
  // full-size upsert, so every stream fills its table whatever its seed drew
  // (a seed with many erases and small upserts used to end half full).
  const int max_steps = c.steps + 4 + static_cast<int>(2 * c.max_keys / c.max_batch);
  for (int step = 0; step < max_steps && (step < c.steps || evictions == 0); ++step) {
    const bool filling = step >= c.steps;
    const int op = filling ? 9 : static_cast<int>(rng() % 10);
    if (op < 2) {  // erase (repeats and sentinels included)
      std::vector<int64_t> keys(1 + rng() % c.max_batch);
      for (int64_t& k : keys) k = key_dist(rng);
      if (rng() % 4 == 0) keys[0] = kDeletedKey;
      if (keys.size() > 2) keys[1] = keys[2];
      const DynamicStats a = DynamicErase(v, keys);
      ToDevice(d_keys, keys.data(), keys.size());
      ASSERT_CUDA(LaunchDynamicErase(gpu.view(), d_keys, keys.size(), gpu.stats(), stream));
      ASSERT_CUDA(cudaStreamSynchronize(stream));
      ExpectSameStats(a, gpu.TakeStats(), step);
    } else if (op < 3) {  // explicit rehash
      DynamicRehash(v);
      ASSERT_CUDA(LaunchDynamicRehash(gpu.view(), gpu.stats(), stream));
      ASSERT_CUDA(cudaStreamSynchronize(stream));
      EXPECT_EQ(gpu.TakeStats().failed, 0);
    } else {  // upsert
      std::set<int64_t> kset;
      const int64_t want = filling ? c.max_batch : 1 + static_cast<int64_t>(rng() % c.max_batch);
      while (static_cast<int64_t>(kset.size()) < want) kset.insert(key_dist(rng));
      std::vector<int64_t> keys(kset.begin(), kset.end());
      std::shuffle(keys.begin(), keys.end(), rng);
      std::vector<char> src(keys.size() * c.row_bytes);
      for (char& b : src) b = static_cast<char>(rng());
      if (!c.tie_scores || rng() % 4 == 0) ++now;
      std::vector<int64_t> ev(keys.size(), 0);
      const auto before = Contents(v);  // to explain a differing eviction
      const DynamicStats a = DynamicUpsert(v, keys, src.data(), c.policy, now, ev.data());
      ToDevice(d_keys, keys.data(), keys.size());
      ToDevice(d_src, src.data(), src.size());
      // Poison: scratch and the evicted-keys output.
      ASSERT_CUDA(cudaMemset(scratch, 0xa5, scratch_bytes));
      ASSERT_CUDA(cudaMemset(d_evicted, 0x5a, 8 * (c.max_batch + 1)));
      ASSERT_CUDA(LaunchDynamicUpsert(gpu.view(), d_keys, keys.size(), d_src, c.policy, now,
                                      scratch, scratch_bytes, gpu.stats(), d_evicted, stream));
      ASSERT_CUDA(cudaStreamSynchronize(stream));
      const DynamicStats b = gpu.TakeStats();
      ExpectSameStats(a, b, step);
      std::vector<int64_t> gev(c.max_batch + 1);
      ToHost(gev.data(), d_evicted, c.max_batch + 1);
      std::vector<int64_t> cpu_ev(ev.begin(), ev.begin() + a.evicted);
      std::vector<int64_t> gpu_ev(gev.begin(), gev.begin() + std::max<int64_t>(0, b.evicted));
      std::sort(cpu_ev.begin(), cpu_ev.end());
      std::sort(gpu_ev.begin(), gpu_ev.end());
      if (cpu_ev != gpu_ev) {
        std::vector<int64_t> only_cpu, only_gpu;
        std::set_difference(cpu_ev.begin(), cpu_ev.end(), gpu_ev.begin(), gpu_ev.end(),
                            std::back_inserter(only_cpu));
        std::set_difference(gpu_ev.begin(), gpu_ev.end(), cpu_ev.begin(), cpu_ev.end(),
                            std::back_inserter(only_gpu));
        const std::set<int64_t> in_call(keys.begin(), keys.end());
        std::ostringstream why;
        why << "need " << a.evicted << "; CPU max evicted (score, key):";
        uint64_t max_score = 0;
        int64_t max_key = 0;
        for (int64_t k : cpu_ev) {
          const uint64_t sc = before.at(k).second;
          if (sc > max_score || (sc == max_score && k > max_key)) max_score = sc, max_key = k;
        }
        why << " (" << max_score << ", " << max_key << ")";
        for (const auto* side : {&only_cpu, &only_gpu}) {
          why << (side == &only_cpu ? "; only CPU:" : "; only GPU:");
          for (int64_t k : *side) {
            auto it = before.find(k);
            why << " " << k << "(score " << (it == before.end() ? -1 : int64_t(it->second.second))
                << (in_call.count(k) ? ", in call" : "") << ")";
          }
        }
        ADD_FAILURE() << "evicted sets differ at step " << step << ": " << why.str();
        break;
      }
      int64_t poison;
      std::memset(&poison, 0x5a, 8);
      EXPECT_EQ(gev[b.evicted], poison) << "wrote past the evicted keys";
      evictions += a.evicted;
    }
    ExpectSameTables(v, gpu, "stream", step);
    if (::testing::Test::HasFatalFailure()) break;
  }
  EXPECT_GT(evictions, 0) << "the stream should have filled the table";
  cudaFree(scratch);
  cudaFree(d_keys);
  cudaFree(d_evicted);
  cudaFree(d_src);
  cudaStreamDestroy(stream);
}

TEST(DynamicTableGpuTest, RandomStreamLru) {
  SKIP_WITHOUT_GPU();
  RunStream({500, 0, 64, EvictionPolicy::kLru, 120, 200, 2000, false}, TestSeed());
}
TEST(DynamicTableGpuTest, RandomStreamLruTies) {
  SKIP_WITHOUT_GPU();
  RunStream({300, 512, 20, EvictionPolicy::kLru, 120, 150, 1500, true}, TestSeed());
}
TEST(DynamicTableGpuTest, RandomStreamLfu) {
  SKIP_WITHOUT_GPU();
  RunStream({400, 0, 32, EvictionPolicy::kLfu, 120, 200, 1200, false}, TestSeed());
}
TEST(DynamicTableGpuTest, RandomStreamNoPolicyFullSlots) {
  SKIP_WITHOUT_GPU();
  RunStream({256, 256, 16, EvictionPolicy::kNone, 80, 100, 1000, false}, TestSeed());
}
TEST(DynamicTableGpuTest, RandomStreamLarge) {
  SKIP_WITHOUT_GPU();
  RunStream({200000, 0, 16, EvictionPolicy::kLru, 12, 60000, 400000, true}, TestSeed());
}

// Pooled lookups with scoring on: GPU touches == CPU touches (LRU and LFU),
// pooled values equal, and scoring off changes nothing.
TEST(DynamicTableGpuTest, LookupTouchesScores) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kDim = 16;
  constexpr int64_t kKeys = 3000;
  for (EvictionPolicy policy :
       {EvictionPolicy::kLru, EvictionPolicy::kLfu, EvictionPolicy::kNone}) {
    DynamicTableStorage cpu;
    ASSERT_TRUE(DynamicTableStorage::Create(kKeys, 0, kDim * 4, &cpu).ok());
    const DynamicTableView& v = cpu.view();
    std::vector<int64_t> keys(kKeys);
    for (int64_t r = 0; r < kKeys; ++r) {
      keys[r] = static_cast<int64_t>(rng() >> 1) - (int64_t{1} << 61);
      float* row = reinterpret_cast<float*>(cpu.row(r));
      for (int d = 0; d < kDim; ++d) row[d] = static_cast<float>(static_cast<int>(rng() % 1000));
    }
    ASSERT_TRUE(InitDynamicTable(v, keys).ok());
    for (int64_t r = 0; r < kKeys; ++r) v.scores[r] = rng() % 50;
    DynamicErase(v, {keys[0], keys[1]});  // tombstones on some probe paths
    DeviceTableFixture gpu(v);
    gpu.Upload(v);
    const std::vector<uint64_t> before(v.scores, v.scores + kKeys);

    // Bags: ids of stored, erased and unknown keys, repeats included: a
    // few hot keys recur within a warp's ids (the kernel combines a warp's
    // touches of one row), and some bags are long (pooled by a whole warp).
    // A block (32 bags) with a long bag sees more distinct rows than its LFU
    // aggregate holds (kAggSlots = 512), so its direct-add fallback runs too.
    constexpr int64_t kBags = 700;
    std::vector<int64_t> ids, bag_ids = {0};
    std::vector<int32_t> bag_rows = {0};
    for (int64_t b = 0; b < kBags; ++b) {
      const int len = static_cast<int>(b % 50 == 7 ? 300 + rng() % 100 : rng() % 40);
      for (int i = 0; i < len; ++i) {
        const int pick = static_cast<int>(rng() % 10);
        ids.push_back(pick == 0   ? static_cast<int64_t>(rng())
                      : pick <= 3 ? keys[2 + rng() % 4]
                                  : keys[rng() % kKeys]);
      }
      bag_ids.push_back(static_cast<int64_t>(ids.size()));
      bag_rows.push_back(static_cast<int32_t>(b + 1));
    }
    const uint64_t now = 1000;
    const HashTableView hv = AsHashTableView(v);
    PoolTable pt;
    pt.rows = v.rows;
    pt.num_rows = kKeys;
    pt.dim = kDim;
    pt.hash = &hv;
    pt.scores = v.scores;
    pt.score_policy = policy;
    pt.score_now = now;
    PoolBags pb;
    pb.ids = ids.data();
    pb.offsets = bag_ids.data();
    pb.num_bags = kBags;
    std::vector<float> cpu_out(kBags * kDim);
    PoolEmbeddings(pt, pb, cpu_out.data(), kDim);

    DeviceTable table;
    table.rows = gpu.view().rows;
    table.dim = kDim;
    table.num_rows = kKeys;
    table.hash = HashTableView{gpu.view().slot_keys, gpu.view().slot_rows, v.num_buckets};
    table.scores = reinterpret_cast<unsigned long long*>(gpu.view().scores);
    table.score_policy = static_cast<int32_t>(policy);
    DeviceFeature feature;
    feature.num_bags = kBags;
    DeviceTable* d_table = DeviceAlloc<DeviceTable>(1);
    DeviceFeature* d_feature = DeviceAlloc<DeviceFeature>(1);
    int64_t* d_ids = DeviceAlloc<int64_t>(ids.size());
    int64_t* d_bag_ids = DeviceAlloc<int64_t>(bag_ids.size());
    int32_t* d_bag_rows = DeviceAlloc<int32_t>(bag_rows.size());
    int64_t* d_prefix = DeviceAlloc<int64_t>(2);
    unsigned long long* d_now = DeviceAlloc<unsigned long long>(1);
    float* d_out = DeviceAlloc<float>(kBags * kDim);
    const int64_t prefix[2] = {0, kBags};
    const unsigned long long now_value = now;
    ToDevice(d_table, &table, 1);
    ToDevice(d_feature, &feature, 1);
    ToDevice(d_ids, ids.data(), ids.size());
    ToDevice(d_bag_ids, bag_ids.data(), bag_ids.size());
    ToDevice(d_bag_rows, bag_rows.data(), bag_rows.size());
    ToDevice(d_prefix, prefix, 2);
    ToDevice(d_now, &now_value, 1);
    ASSERT_CUDA(cudaMemset(d_out, 0xff, sizeof(float) * kBags * kDim));  // NaN poison
    PooledLookupArgs args;
    args.tables = d_table;
    args.features = d_feature;
    args.num_features = 1;
    args.ids = d_ids;
    args.bag_ids = d_bag_ids;
    args.bag_rows = d_bag_rows;
    args.total_bags = kBags;
    args.out = d_out;
    args.out_stride = kDim;
    args.score_now = 7;            // overridden by score_now_ptr
    args.score_now_ptr = d_now;
    ASSERT_CUDA(LaunchPooledLookup(args, d_prefix, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<float> gpu_out(kBags * kDim);
    ToHost(gpu_out.data(), d_out, kBags * kDim);
    for (int64_t i = 0; i < kBags * kDim; ++i) {
      ASSERT_EQ(cpu_out[i], gpu_out[i]) << "output " << i;
    }
    HostCopy c;
    gpu.Download(&c);
    int64_t touched = 0;
    for (int64_t r = 0; r < kKeys; ++r) {
      ASSERT_EQ(c.scores[r], v.scores[r]) << "score of row " << r << " policy "
                                          << static_cast<int>(policy);
      touched += v.scores[r] != before[r];
    }
    if (policy != EvictionPolicy::kNone) {
      EXPECT_GT(touched, 100);
    } else {
      EXPECT_EQ(touched, 0);
    }
    for (void* p : std::initializer_list<void*>{d_table, d_feature, d_ids, d_bag_ids, d_bag_rows,
                                                d_prefix, d_now, d_out}) {
      cudaFree(p);
    }
  }
}

TEST(RowScatterGpuTest, ScatterAndWriteThroughMatchTwins) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int64_t row_bytes : {512, 36, 7}) {
    const int64_t rows = 5000, n = 1700, capacity = 800;
    std::vector<char> table(rows * row_bytes), src(n * row_bytes);
    for (char& b : table) b = static_cast<char>(rng());
    for (char& b : src) b = static_cast<char>(rng());
    std::vector<int64_t> perm(rows);
    for (int64_t i = 0; i < rows; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> ids(perm.begin(), perm.begin() + n);
    std::vector<int32_t> slot(rows, -1);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t s = 0; s < capacity; ++s) slot[perm[s]] = static_cast<int32_t>(s);
    std::vector<char> cache(capacity * row_bytes);
    for (char& b : cache) b = static_cast<char>(rng());

    char* d_table = DeviceAlloc<char>(table.size());
    char* d_src = DeviceAlloc<char>(src.size());
    char* d_cache = DeviceAlloc<char>(cache.size());
    int64_t* d_ids = DeviceAlloc<int64_t>(n);
    int32_t* d_slot = DeviceAlloc<int32_t>(rows);
    ToDevice(d_table, table.data(), table.size());
    ToDevice(d_src, src.data(), src.size());
    ToDevice(d_cache, cache.data(), cache.size());
    ToDevice(d_ids, ids.data(), n);
    ToDevice(d_slot, slot.data(), rows);
    ScatterRows(table.data(), row_bytes, ids.data(), n, src.data());
    CacheWriteThrough(slot.data(), cache.data(), row_bytes, ids.data(), n, src.data());
    ASSERT_CUDA(LaunchScatterRows(d_table, row_bytes, d_ids, n, d_src, nullptr));
    ASSERT_CUDA(LaunchCacheWriteThrough(d_slot, d_cache, row_bytes, d_ids, n, d_src, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<char> gt(table.size()), gc(cache.size());
    ToHost(gt.data(), d_table, gt.size());
    ToHost(gc.data(), d_cache, gc.size());
    EXPECT_EQ(gt, table) << "row_bytes " << row_bytes;
    EXPECT_EQ(gc, cache) << "row_bytes " << row_bytes;
    cudaFree(d_table);
    cudaFree(d_src);
    cudaFree(d_cache);
    cudaFree(d_ids);
    cudaFree(d_slot);
  }
}

}  // namespace
}  // namespace rankd::kernels::cuda
