// dynamic_table_bench: online embedding updates on one GPU (issue 16).
//
//   scatter   LaunchScatterRows: --scatter_n rows of --scatter_dim fp32 into a
//             --scatter_table_rows-row table in HBM at random distinct ids,
//             source in device memory; and from pinned host memory (H2D copy
//             of ids + rows, then the scatter, timed together).
//             Target: >= 50 M rows/s (dim 128, from device memory).
//   fill      LaunchDynamicUpsert of new keys, --batch keys a call, into an
//             empty table of --slots slots and max_keys = slots / 2 until it
//             is full (load factor 0.5). Target: >= 1 G keys/s.
//   evict     further batches of new keys into the full table (each call
//             evicts --batch LRU keys). Target: >= 300 M keys/s.
//   lookup    LaunchPooledLookup over the full table: --lookup_bags bags of
//             --bag stored keys, without scores, with LRU and with LFU score
//             touches; the ratio touched / plain (requirement: >= 0.8);
//             then the same over Zipf(1)-ranked keys.
// Each figure: CUDA events around each call, median of --iters (fill: the
// whole fill, repeated). Results are sanity-checked (stats of every upsert,
// lookup output NaN-free). One line per figure, with units.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/gpu/check_cuda.h"
#include "bench/gpu/device_array.h"
#include "bench/gpu/event_timer.h"
#include "bench/median.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/dynamic_table.h"
#include "kernels/cuda/embedding_lookup.h"
#include "kernels/cuda/row_scatter.h"

ABSL_FLAG(int, iters, 10, "timed calls per figure (median reported)");
ABSL_FLAG(int64_t, scatter_n, int64_t{1} << 20, "rows per ScatterRows call");
ABSL_FLAG(int64_t, scatter_table_rows, 10000000, "rows of the scatter's table");
ABSL_FLAG(int, scatter_dim, 128, "fp32 dim of scattered rows");
ABSL_FLAG(int64_t, slots, int64_t{1} << 24, "hash slots of the dynamic table (max_keys = slots/2)");
ABSL_FLAG(int64_t, batch, int64_t{1} << 20, "keys per upsert call");
ABSL_FLAG(int, dim, 32, "fp32 dim of the dynamic table's rows");
ABSL_FLAG(int, evict_batches, 8, "upsert calls timed on the full table");
ABSL_FLAG(int64_t, lookup_bags, 65536, "bags per pooled lookup");
ABSL_FLAG(int, bag, 20, "keys per bag");
ABSL_FLAG(bool, scatter, true, "run the scatter figures");
ABSL_FLAG(bool, upsert, true, "run the upsert and lookup figures");

namespace {

using rankd::bench::Alloc;
using rankd::bench::Median;

namespace rk = rankd::kernels;
namespace rkc = rankd::kernels::cuda;

// Milliseconds of what `launch` enqueues on `stream`.
template <typename Launch>
double TimeOnceMs(cudaStream_t stream, Launch&& launch) {
  return rankd::bench::EventTimer().Ms(stream, launch);
}

template <typename Launch>
double MedianMs(cudaStream_t stream, Launch&& launch) {
  launch();  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_iters)); ++i) {
    t.push_back(TimeOnceMs(stream, launch));
  }
  return Median(t);
}

void Figure(const char* name, double value, const char* unit) {
  std::printf("%-44s %12.1f %s\n", name, value, unit);
  std::fflush(stdout);
}

void RandomFill(void* d, int64_t bytes, uint64_t seed) {
  std::vector<uint32_t> h((bytes + 3) / 4);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (auto& x : h) x = rng() & 0x3f7fffffu;  // finite floats
  CHECK_CUDA(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
}

void BenchScatter(cudaStream_t stream) {
  const int64_t n = absl::GetFlag(FLAGS_scatter_n);
  const int64_t rows = std::max(absl::GetFlag(FLAGS_scatter_table_rows), n);
  const int64_t row_bytes = int64_t{4} * absl::GetFlag(FLAGS_scatter_dim);
  char* table = Alloc<char>(rows * row_bytes);
  char* src = Alloc<char>(n * row_bytes);
  int64_t* ids = Alloc<int64_t>(n);
  RandomFill(src, n * row_bytes, 1);
  std::vector<int64_t> perm(rows);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(2);
  for (int64_t i = 0; i < n; ++i) std::swap(perm[i], perm[i + rng() % (rows - i)]);
  CHECK_CUDA(cudaMemcpy(ids, perm.data(), 8 * n, cudaMemcpyHostToDevice));
  const double ms = MedianMs(stream, [&] {
    CHECK_CUDA(rkc::LaunchScatterRows(table, row_bytes, ids, n, src, stream));
  });
  Figure("scatter_rows from device (rows/s)", n / (ms * 1e-3), "rows/s");
  Figure("scatter_rows from device (GB/s of rows)", n * row_bytes / (ms * 1e-3) / 1e9, "GB/s");

  void* h_src = nullptr;
  void* h_ids = nullptr;
  CHECK_CUDA(cudaHostAlloc(&h_src, n * row_bytes, cudaHostAllocDefault));
  CHECK_CUDA(cudaHostAlloc(&h_ids, 8 * n, cudaHostAllocDefault));
  CHECK_CUDA(cudaMemcpy(h_src, src, n * row_bytes, cudaMemcpyDeviceToHost));
  std::memcpy(h_ids, perm.data(), 8 * n);
  const double ms_host = MedianMs(stream, [&] {
    CHECK_CUDA(cudaMemcpyAsync(ids, h_ids, 8 * n, cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(cudaMemcpyAsync(src, h_src, n * row_bytes, cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(rkc::LaunchScatterRows(table, row_bytes, ids, n, src, stream));
  });
  Figure("scatter_rows from pinned host, H2D+scatter", n / (ms_host * 1e-3), "rows/s");
  // Check one row.
  std::vector<char> a(row_bytes), b(row_bytes);
  CHECK_CUDA(cudaMemcpy(a.data(), table + perm[n / 2] * row_bytes, row_bytes,
                        cudaMemcpyDeviceToHost));
  std::memcpy(b.data(), static_cast<char*>(h_src) + (n / 2) * row_bytes, row_bytes);
  if (a != b) {
    std::fprintf(stderr, "scatter check failed\n");
    std::exit(1);
  }
  CHECK_CUDA(cudaFreeHost(h_src));
  CHECK_CUDA(cudaFreeHost(h_ids));
  CHECK_CUDA(cudaFree(table));
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(ids));
}

struct DeviceDynamicTable {
  rk::DynamicTableView v;
  void Create(int64_t slots, int64_t max_keys, int64_t row_bytes) {
    v.num_buckets = rk::HashTable::SlotsFor(slots) / rk::kBucketSlots;
    v.max_keys = max_keys;
    v.row_bytes = row_bytes;
    v.slot_keys = Alloc<int64_t>(v.num_slots());
    v.slot_rows = Alloc<int64_t>(v.num_slots());
    v.row_keys = Alloc<int64_t>(max_keys);
    v.scores = Alloc<uint64_t>(max_keys);
    v.free_rows = Alloc<int64_t>(max_keys);
    v.counters = Alloc<rk::DynamicTableCounters>(1);
    v.rows = Alloc<char>(max_keys * row_bytes);
  }
  void Destroy() {
    for (void* p : {static_cast<void*>(v.slot_keys), static_cast<void*>(v.slot_rows),
                    static_cast<void*>(v.row_keys), static_cast<void*>(v.scores),
                    static_cast<void*>(v.free_rows), static_cast<void*>(v.counters), v.rows}) {
      CHECK_CUDA(cudaFree(p));
    }
  }
};

void CheckStats(rk::DynamicStats* d_stats, int64_t inserted, int64_t evicted, const char* what) {
  rk::DynamicStats s;
  CHECK_CUDA(cudaMemcpy(&s, d_stats, sizeof(s), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemset(d_stats, 0, sizeof(s)));
  if (s.inserted != inserted || s.evicted != evicted || s.failed != 0 || s.updated != 0) {
    std::fprintf(stderr, "%s: stats inserted %lld evicted %lld failed %lld (want %lld, %lld)\n",
                 what, static_cast<long long>(s.inserted), static_cast<long long>(s.evicted),
                 static_cast<long long>(s.failed), static_cast<long long>(inserted),
                 static_cast<long long>(evicted));
    std::exit(1);
  }
}

double BenchLookup(cudaStream_t stream, const DeviceDynamicTable& t, const int64_t* d_ids,
                   int64_t bags, int bag, int dim, rk::EvictionPolicy policy) {
  rkc::DeviceTable table;
  table.rows = t.v.rows;
  table.dim = dim;
  table.num_rows = t.v.max_keys;
  table.hash = rk::HashTableView{t.v.slot_keys, t.v.slot_rows, t.v.num_buckets};
  if (policy != rk::EvictionPolicy::kNone) {
    table.scores = reinterpret_cast<unsigned long long*>(t.v.scores);
    table.score_policy = static_cast<int32_t>(policy);
  }
  rkc::DeviceFeature feature;
  feature.num_bags = bags;
  std::vector<int64_t> bag_ids(bags + 1);
  std::vector<int32_t> bag_rows(bags + 1);
  for (int64_t b = 0; b <= bags; ++b) {
    bag_ids[b] = b * bag;
    bag_rows[b] = static_cast<int32_t>(b);
  }
  const int64_t prefix[2] = {0, bags};
  auto* d_table = Alloc<rkc::DeviceTable>(1);
  auto* d_feature = Alloc<rkc::DeviceFeature>(1);
  auto* d_bag_ids = Alloc<int64_t>(bags + 1);
  auto* d_bag_rows = Alloc<int32_t>(bags + 1);
  auto* d_prefix = Alloc<int64_t>(2);
  auto* d_out = Alloc<float>(bags * dim);
  CHECK_CUDA(cudaMemcpy(d_table, &table, sizeof(table), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_feature, &feature, sizeof(feature), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_bag_ids, bag_ids.data(), 8 * (bags + 1), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_bag_rows, bag_rows.data(), 4 * (bags + 1), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_prefix, prefix, 16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(d_out, 0xff, sizeof(float) * bags * dim));
  rkc::PooledLookupArgs args;
  args.tables = d_table;
  args.features = d_feature;
  args.num_features = 1;
  args.ids = d_ids;
  args.bag_ids = d_bag_ids;
  args.bag_rows = d_bag_rows;
  args.total_bags = bags;
  args.out = d_out;
  args.out_stride = dim;
  // Each launch is a new batch, a new logical time (as in serving): an LRU
  // touch then writes every row it reads, not only the first launch's. The
  // clock also starts each call above every score an earlier call left (LRU
  // times, plus LFU counts of at most 2^26 a call), so no LRU touch of a
  // later call (the Zipf runs after the uniform ones) is skipped as already
  // current.
  static unsigned long long clock = 1ull << 30;
  clock += 1ull << 28;
  const double ms = MedianMs(stream, [&] {
    args.score_now = ++clock;
    CHECK_CUDA(rkc::LaunchPooledLookup(args, d_prefix, stream));
  });
  std::vector<float> out(dim);
  CHECK_CUDA(cudaMemcpy(out.data(), d_out, 4 * dim, cudaMemcpyDeviceToHost));
  for (float f : out) {
    if (std::isnan(f)) {
      std::fprintf(stderr, "lookup output left poisoned\n");
      std::exit(1);
    }
  }
  for (void* p : {static_cast<void*>(d_table), static_cast<void*>(d_feature),
                  static_cast<void*>(d_bag_ids), static_cast<void*>(d_bag_rows),
                  static_cast<void*>(d_prefix), static_cast<void*>(d_out)}) {
    CHECK_CUDA(cudaFree(p));
  }
  return bags * bag / (ms * 1e-3);
}

void BenchUpsert(cudaStream_t stream) {
  const int64_t slots = absl::GetFlag(FLAGS_slots);
  const int64_t max_keys = rk::HashTable::SlotsFor(slots) / 2;
  const int64_t batch = std::min(absl::GetFlag(FLAGS_batch), max_keys);
  const int dim = absl::GetFlag(FLAGS_dim);
  const int64_t row_bytes = int64_t{4} * dim;
  const int fill_batches = static_cast<int>(max_keys / batch);
  const int evict_batches = std::max(1, absl::GetFlag(FLAGS_evict_batches));
  const int64_t total_keys = (fill_batches + evict_batches) * batch;

  DeviceDynamicTable t;
  t.Create(slots, max_keys, row_bytes);
  // Unique keys: splitmix64 of a counter is a bijection.
  std::vector<int64_t> keys(total_keys);
  for (int64_t i = 0; i < total_keys; ++i) {
    int64_t k = static_cast<int64_t>(rk::HashKey(i + 12345));
    if (k == rk::kEmptyKey || k == rk::kDeletedKey) k = i;  // never in practice
    keys[i] = k;
  }
  int64_t* d_keys = Alloc<int64_t>(total_keys);
  CHECK_CUDA(cudaMemcpy(d_keys, keys.data(), 8 * total_keys, cudaMemcpyHostToDevice));
  char* d_src = Alloc<char>(batch * row_bytes);
  RandomFill(d_src, batch * row_bytes, 3);
  const int64_t scratch_bytes = rkc::DynamicUpsertScratchBytes(max_keys, batch);
  void* scratch = Alloc<char>(scratch_bytes);
  auto* d_stats = Alloc<rk::DynamicStats>(1);
  CHECK_CUDA(cudaMemset(d_stats, 0, sizeof(rk::DynamicStats)));
  int64_t* d_evicted = Alloc<int64_t>(batch);
  std::printf("dynamic table: %lld slots, max_keys %lld, dim %d fp32, batch %lld\n",
              static_cast<long long>(t.v.num_slots()), static_cast<long long>(max_keys), dim,
              static_cast<long long>(batch));

  // Fill from empty to load factor 0.5, --iters times (re-initialised).
  std::vector<double> fill_ms;
  for (int it = 0; it <= std::max(1, absl::GetFlag(FLAGS_iters) / 3); ++it) {
    CHECK_CUDA(rkc::LaunchDynamicInit(t.v, nullptr, 0, d_stats, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemset(d_stats, 0, sizeof(rk::DynamicStats)));
    const double ms = TimeOnceMs(stream, [&] {
      for (int b = 0; b < fill_batches; ++b) {
        CHECK_CUDA(rkc::LaunchDynamicUpsert(t.v, d_keys + b * batch, batch, d_src,
                                            rk::EvictionPolicy::kLru, 1 + b, scratch,
                                            scratch_bytes, d_stats, nullptr, stream));
      }
    });
    CheckStats(d_stats, fill_batches * batch, 0, "fill");
    if (it > 0) fill_ms.push_back(ms);  // the first is a warm-up
  }
  Figure("upsert new keys, fill to LF 0.5 (keys/s)", fill_batches * batch / (Median(fill_ms) * 1e-3),
         "keys/s");

  // Lookups on the full table: stored keys, uniform.
  const int64_t bags = absl::GetFlag(FLAGS_lookup_bags);
  const int bag = absl::GetFlag(FLAGS_bag);
  std::vector<int64_t> ids(bags * bag);
  std::mt19937_64 rng(4);
  for (int64_t& id : ids) id = keys[rng() % (fill_batches * batch)];
  int64_t* d_ids = Alloc<int64_t>(ids.size());
  CHECK_CUDA(cudaMemcpy(d_ids, ids.data(), 8 * ids.size(), cudaMemcpyHostToDevice));
  const double plain = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kNone);
  const double lru = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kLru);
  const double lfu = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kLfu);
  Figure("lookup, no score touch (ids/s)", plain, "ids/s");
  Figure("lookup, LRU score touch (ids/s)", lru, "ids/s");
  Figure("lookup, LFU score touch (ids/s)", lfu, "ids/s");
  Figure("lookup LRU / plain (target >= 80)", 100.0 * lru / plain, "%");
  Figure("lookup LFU / plain (target >= 80)", 100.0 * lfu / plain, "%");
  // Serving traffic is skewed: the same over Zipf(1)-ranked keys (rank =
  // floor((n + 1)^u) - 1, u uniform, the continuous inverse CDF), ranks
  // spread over the rows by an odd multiplier (a bijection modulo 2^k).
  const int64_t stored = fill_batches * batch;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t& id : ids) {
    const int64_t rank = std::min<int64_t>(
        stored - 1, static_cast<int64_t>(std::exp(unit(rng) * std::log(stored + 1.0))) - 1);
    id = keys[static_cast<uint64_t>(rank * 0x9E3779B97F4A7C15ull) % static_cast<uint64_t>(stored)];
  }
  CHECK_CUDA(cudaMemcpy(d_ids, ids.data(), 8 * ids.size(), cudaMemcpyHostToDevice));
  const double zplain = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kNone);
  const double zlru = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kLru);
  const double zlfu = BenchLookup(stream, t, d_ids, bags, bag, dim, rk::EvictionPolicy::kLfu);
  Figure("zipf lookup, no score touch (ids/s)", zplain, "ids/s");
  Figure("zipf lookup LRU / plain (target >= 80)", 100.0 * zlru / zplain, "%");
  Figure("zipf lookup LFU / plain (target >= 80)", 100.0 * zlfu / zplain, "%");

  // Evicting upserts into the full table.
  std::vector<double> evict_ms;
  for (int b = 0; b < evict_batches; ++b) {
    const int64_t* k = d_keys + (fill_batches + b) * batch;
    evict_ms.push_back(TimeOnceMs(stream, [&] {
      CHECK_CUDA(rkc::LaunchDynamicUpsert(t.v, k, batch, d_src, rk::EvictionPolicy::kLru,
                                          1000 + b, scratch, scratch_bytes, d_stats, d_evicted,
                                          stream));
    }));
    CheckStats(d_stats, batch, batch, "evict");
  }
  Figure("upsert new keys into full table, evicting (keys/s)", batch / (Median(evict_ms) * 1e-3),
         "keys/s");

  CHECK_CUDA(cudaFree(d_ids));
  CHECK_CUDA(cudaFree(d_keys));
  CHECK_CUDA(cudaFree(d_src));
  CHECK_CUDA(cudaFree(scratch));
  CHECK_CUDA(cudaFree(d_stats));
  CHECK_CUDA(cudaFree(d_evicted));
  t.Destroy();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n", prop.name);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (absl::GetFlag(FLAGS_scatter)) BenchScatter(stream);
  if (absl::GetFlag(FLAGS_upsert)) BenchUpsert(stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
