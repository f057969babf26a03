// lookup_bench: the embedding lookup kernels (kernels/cuda/embedding_lookup.h)
// on one GPU, against the device's own copy bandwidth.
//
//   copy     cudaMemcpyAsync device->device of --copy_mib MiB; bandwidth
//            counts bytes read + written (the ceiling for the lookups).
//   pooled   LaunchPooledLookup, one feature: --batch bags of --bag ids, dim
//            --dim, a --rows-row table, fp32 and bf16, ids uniform and Zipf
//            (--zipf, exponent 1.05, hot rows scattered over the table).
//            Effective bytes = ids * row_bytes (rows read) + batch * dim * 4
//            (output written) + ids * 8 (ids read); reported as bytes/s and
//            as % of the copy bandwidth (target >= 80%).
//   hash     LaunchHashLookup: --hash_queries keys, all present, in a table of
//            --hash_slots slots at load factors 0.5 and 0.8 (target >= 4 G
//            keys/s at 0.5).
// Every timing: CUDA events around each launch, --warmup launches first, the
// median of --iters. Results are checked (pooled: sampled bags against the
// CPU twin PoolEmbeddings and no NaN left in the poisoned output; hash: every
// row); a failed check exits 1. A table of the results is printed last.
//
// The table's rows repeat a random 64 MiB pattern (rows are gathered at
// random, so the values do not change the timing; the pattern keeps the host
// setup and the CPU check small).
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
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/gpu/check_cuda.h"
#include "bench/gpu/device_array.h"
#include "bench/median.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"

ABSL_FLAG(int, iters, 50, "timed launches per measurement (median reported)");
ABSL_FLAG(int, warmup, 5, "untimed launches before each measurement");
ABSL_FLAG(int64_t, copy_mib, 1024, "size of the device-to-device copy");
ABSL_FLAG(int64_t, batch, 65536, "bags (candidates) per pooled lookup");
ABSL_FLAG(int, bag, 20, "ids per bag");
ABSL_FLAG(int, dim, 128, "embedding dim");
ABSL_FLAG(int64_t, rows, int64_t{4} << 20, "table rows");
ABSL_FLAG(bool, zipf, true, "also time Zipf(1.05) ids");
ABSL_FLAG(int64_t, hash_slots, int64_t{64} << 20, "hash table slots");
ABSL_FLAG(int64_t, hash_queries, int64_t{16} << 20, "keys per hash lookup");
ABSL_FLAG(bool, pooled, true, "run the pooled lookup benchmarks");
ABSL_FLAG(bool, hash, true, "run the hash lookup benchmarks");

namespace {

using rankd::bench::Median;
using rankd::bench::ToDevice;

namespace rk = rankd::kernels;
namespace rkc = rankd::kernels::cuda;

// Median milliseconds of `launch` (which enqueues on `stream`), timed with
// events around each call. Unlike EventTimer (bench/gpu/event_timer.h) the
// calls are queued back to back and the host waits once at the end, so no
// launch waits for the host: the copy it is compared with is timed the same way.
template <typename Launch>
double TimeMs(cudaStream_t stream, Launch&& launch) {
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters));
  for (int i = 0; i < warmup; ++i) launch();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> events(2 * iters);
  for (cudaEvent_t& e : events) CHECK_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventRecord(events[2 * i], stream));
    launch();
    CHECK_CUDA(cudaEventRecord(events[2 * i + 1], stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> ms(iters);
  for (int i = 0; i < iters; ++i) {
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
    ms[i] = t;
  }
  for (cudaEvent_t& e : events) CHECK_CUDA(cudaEventDestroy(e));
  return Median(ms);
}

struct Result {
  std::string what;
  double us = 0;
  std::string rate;        // keys/s or bytes/s
  double bytes_per_s = 0;  // effective, 0 = n/a
  double pct_copy = 0;
  std::string note;
};

std::string Giga(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f G%s", v / 1e9, unit);
  return buf;
}

bool g_failed = false;

// ---------------------------------------------------------------------------

double CopyBandwidth(cudaStream_t stream, std::vector<Result>* results) {
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_copy_mib)) << 20;
  void* src = nullptr;
  void* dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemset(src, 0x3c, bytes));
  const double ms = TimeMs(stream, [&] {
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  const double bw = 2.0 * bytes / (ms * 1e-3);
  results->push_back({"copy d2d " + std::to_string(bytes >> 20) + " MiB", ms * 1e3, Giga(bw, "B/s"),
                      bw, 100.0, "read + written"});
  std::printf("copy: %.1f us, %.1f GB/s (read + written)\n", ms * 1e3, bw / 1e9);
  return bw;
}

// Zipf(s) ranks over [0, n) by inverting the CDF (binary search).
class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += 1.0 / std::pow(static_cast<double>(i + 1), s);
      cdf_[i] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  int64_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return std::min<int64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
                             static_cast<int64_t>(cdf_.size()) - 1);
  }

 private:
  std::vector<double> cdf_;
};

void PooledBench(rk::RowType type, bool zipf, double copy_bw, cudaStream_t stream,
                 std::vector<Result>* results) {
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int bag = absl::GetFlag(FLAGS_bag);
  const int dim = absl::GetFlag(FLAGS_dim);
  const int64_t num_rows = absl::GetFlag(FLAGS_rows);
  const size_t elem = rk::RowTypeBytes(type);
  const size_t row_bytes = dim * elem;
  const int64_t num_ids = batch * bag;
  std::mt19937_64 rng(42 + static_cast<int>(type) + (zipf ? 7 : 0));

  // Pattern of random nonzero rows, repeated over the table.
  const int64_t pattern_rows =
      std::max<int64_t>(1, std::min<int64_t>(num_rows, (int64_t{64} << 20) / row_bytes));
  std::vector<uint8_t> pattern(pattern_rows * row_bytes);
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  for (int64_t i = 0; i < pattern_rows * dim; ++i) {
    const float v = (rng() & 1) ? mag(rng) : -mag(rng);
    if (type == rk::RowType::kFp32) {
      std::memcpy(&pattern[i * 4], &v, 4);
    } else {
      const uint16_t b =
          type == rk::RowType::kFp16 ? rk::FloatToHalfBits(v) : rk::FloatToBf16Bits(v);
      std::memcpy(&pattern[i * 2], &b, 2);
    }
  }
  char* d_rows = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), num_rows * row_bytes));
  for (int64_t r = 0; r < num_rows; r += pattern_rows) {
    const int64_t n = std::min(pattern_rows, num_rows - r);
    CHECK_CUDA(
        cudaMemcpy(d_rows + r * row_bytes, pattern.data(), n * row_bytes, cudaMemcpyHostToDevice));
  }

  // Ids: uniform, or Zipf ranks scattered by an odd multiplier (a bijection
  // on [0, 2^k); rejected when outside the table for other sizes).
  std::vector<int64_t> ids(num_ids);
  if (zipf) {
    const Zipf z(num_rows, 1.05);
    int64_t pow2 = 1;
    while (pow2 < num_rows) pow2 <<= 1;
    for (int64_t& id : ids) {
      int64_t r = z(rng);
      do {
        r = static_cast<int64_t>((static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ULL) &
                                 static_cast<uint64_t>(pow2 - 1));
      } while (r >= num_rows);
      id = r;
    }
  } else {
    for (int64_t& id : ids) id = static_cast<int64_t>(rng() % num_rows);
  }
  std::vector<int64_t> bag_ids(batch + 1);
  std::vector<int32_t> bag_rows(batch + 1);
  for (int64_t b = 0; b <= batch; ++b) {
    bag_ids[b] = b * bag;
    bag_rows[b] = static_cast<int32_t>(b);
  }

  rkc::DeviceTable table;
  table.rows = d_rows;
  table.row_type = type;
  table.pooling = rk::Pooling::kSum;
  table.dim = dim;
  table.num_rows = num_rows;
  rkc::DeviceFeature feature;
  feature.num_bags = batch;
  rkc::PooledLookupArgs args;
  args.tables = ToDevice(std::vector<rkc::DeviceTable>{table});
  args.fp32_tables_only = rkc::TablesFitFp32Kernel(&table, 1);  // as the worker sets it
  args.features = ToDevice(std::vector<rkc::DeviceFeature>{feature});
  args.num_features = 1;
  args.ids = ToDevice(ids);
  args.bag_ids = ToDevice(bag_ids);
  args.bag_rows = ToDevice(bag_rows);
  args.total_bags = batch;
  args.out_stride = dim;
  const size_t out_size = batch * dim;
  args.out = ToDevice(std::vector<float>(out_size, std::numeric_limits<float>::quiet_NaN()));
  const int64_t* d_prefix = ToDevice(std::vector<int64_t>{0, batch});

  const double ms =
      TimeMs(stream, [&] { CHECK_CUDA(rkc::LaunchPooledLookup(args, d_prefix, stream)); });

  // Check: no NaN left; sampled bags against the CPU twin.
  std::vector<float> out(out_size);
  CHECK_CUDA(cudaMemcpy(out.data(), args.out, out_size * sizeof(float), cudaMemcpyDeviceToHost));
  int64_t nan_count = 0;
  for (float v : out) nan_count += std::isnan(v);
  rk::PoolTable pt;
  pt.rows = pattern.data();
  pt.row_type = type;
  pt.num_rows = pattern_rows;
  pt.dim = dim;
  pt.pooling = rk::Pooling::kSum;
  double max_err = 0;  // relative to sum |v|
  const int64_t sample = std::min<int64_t>(batch, 512);
  for (int64_t s = 0; s < sample; ++s) {
    const int64_t b = (s * 7919) % batch;
    std::vector<int64_t> local(bag);
    for (int i = 0; i < bag; ++i) local[i] = ids[b * bag + i] % pattern_rows;
    const int64_t offsets[2] = {0, bag};
    rk::PoolBags pb;
    pb.ids = local.data();
    pb.offsets = offsets;
    pb.num_bags = 1;
    std::vector<float> want(dim);
    rk::PoolEmbeddings(pt, pb, want.data(), dim);
    for (int c = 0; c < dim; ++c) {
      double scale = 0;
      for (int i = 0; i < bag; ++i) {
        scale += std::fabs(rk::RowElementToFloat(pattern.data(), type, local[i] * dim + c));
      }
      const double err = std::fabs(out[b * dim + c] - want[c]) / std::max(scale, 1e-30);
      max_err = std::max(max_err, std::isnan(err) ? 1e30 : err);
    }
  }
  const bool ok = nan_count == 0 && max_err <= 1e-5;
  if (!ok) g_failed = true;

  const double seconds = ms * 1e-3;
  const double bytes = static_cast<double>(num_ids) * row_bytes + out_size * 4.0 + num_ids * 8.0;
  const double bw = bytes / seconds;
  char what[128];
  const char* type_name = type == rk::RowType::kFp32   ? "fp32"
                          : type == rk::RowType::kBf16 ? "bf16"
                                                       : "fp16";
  std::snprintf(what, sizeof(what), "pooled %s %s B%lld bag%d dim%d", type_name,
                zipf ? "zipf1.05" : "uniform", static_cast<long long>(batch), bag, dim);
  char note[96];
  std::snprintf(note, sizeof(note), "%s (max err %.1e, NaN %lld)", ok ? "check ok" : "CHECK FAILED",
                max_err, static_cast<long long>(nan_count));
  results->push_back(
      {what, ms * 1e3, Giga(num_ids / seconds, "keys/s"), bw, 100.0 * bw / copy_bw, note});
  std::printf("%s: %.1f us, %.3f G keys/s, %.1f GB/s effective, %.1f%% of copy; %s\n", what,
              ms * 1e3, num_ids / seconds / 1e9, bw / 1e9, 100.0 * bw / copy_bw, note);

  CHECK_CUDA(cudaFree(d_rows));
  CHECK_CUDA(cudaFree(const_cast<rkc::DeviceTable*>(args.tables)));
  CHECK_CUDA(cudaFree(const_cast<rkc::DeviceFeature*>(args.features)));
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(args.ids)));
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(args.bag_ids)));
  CHECK_CUDA(cudaFree(const_cast<int32_t*>(args.bag_rows)));
  CHECK_CUDA(cudaFree(args.out));
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(d_prefix)));
}

void HashBench(double load, cudaStream_t stream, std::vector<Result>* results) {
  const int64_t slots = absl::GetFlag(FLAGS_hash_slots);
  const int64_t n = static_cast<int64_t>(load * slots);
  const int64_t q = absl::GetFlag(FLAGS_hash_queries);
  // Distinct keys of both signs: an odd multiplier is a bijection on 64 bits.
  std::vector<int64_t> keys(n);
  for (int64_t r = 0; r < n; ++r) {
    // (r + 1) * odd is 2^63 (kEmptyKey) only when r + 1 is a multiple of 2^63.
    keys[r] = static_cast<int64_t>((static_cast<uint64_t>(r) + 1) * 0x9E3779B97F4A7C15ULL);
  }
  rk::HashTable table;
  // Every core (the keys-to-rows semantics are Build()'s; see hash_table.h).
  const absl::Status st = rk::HashTable::BuildParallel(keys, slots, rk::HashBuildOptions{}, &table);
  if (!st.ok()) {
    std::fprintf(stderr, "hash build: %s\n", st.ToString().c_str());
    std::exit(2);
  }
  std::mt19937_64 rng(7);
  std::vector<int64_t> queries(q);
  std::vector<int64_t> want(q);
  for (int64_t i = 0; i < q; ++i) {
    want[i] = static_cast<int64_t>(rng() % n);
    queries[i] = keys[want[i]];
  }
  const rk::HashTableView hv = table.view();
  const size_t table_slots = static_cast<size_t>(hv.num_buckets) * rk::kBucketSlots;
  rk::HashTableView dv;
  dv.keys = ToDevice(std::vector<int64_t>(hv.keys, hv.keys + table_slots));
  dv.rows = ToDevice(std::vector<int64_t>(hv.rows, hv.rows + table_slots));
  dv.num_buckets = hv.num_buckets;
  const int64_t* d_queries = ToDevice(queries);
  int64_t* d_out = ToDevice(std::vector<int64_t>(q, -7));

  const double ms =
      TimeMs(stream, [&] { CHECK_CUDA(rkc::LaunchHashLookup(dv, d_queries, q, d_out, stream)); });
  std::vector<int64_t> got(q);
  CHECK_CUDA(cudaMemcpy(got.data(), d_out, q * sizeof(int64_t), cudaMemcpyDeviceToHost));
  int64_t wrong = 0;
  for (int64_t i = 0; i < q; ++i) wrong += got[i] != want[i];
  if (wrong != 0) g_failed = true;

  const double seconds = ms * 1e-3;
  char what[128];
  std::snprintf(what, sizeof(what), "hash lookup load %.2f, %lld slots, %lld keys", load,
                static_cast<long long>(table_slots), static_cast<long long>(q));
  char note[96];
  std::snprintf(note, sizeof(note), "%s (%lld wrong)", wrong == 0 ? "check ok" : "CHECK FAILED",
                static_cast<long long>(wrong));
  results->push_back({what, ms * 1e3, Giga(q / seconds, "keys/s"), 0, 0, note});
  std::printf("%s: %.1f us, %.3f G keys/s; %s\n", what, ms * 1e3, q / seconds / 1e9, note);
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(dv.keys)));
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(dv.rows)));
  CHECK_CUDA(cudaFree(const_cast<int64_t*>(d_queries)));
  CHECK_CUDA(cudaFree(d_out));
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("device: %s, %d SMs, L2 %d MiB, %.1f GiB; runtime %d, driver %d\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20,
              prop.totalGlobalMem / double(1 << 30), runtime, driver);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<Result> results;
  const double copy_bw = CopyBandwidth(stream, &results);
  if (absl::GetFlag(FLAGS_pooled)) {
    for (bool zipf : {false, true}) {
      if (zipf && !absl::GetFlag(FLAGS_zipf)) continue;
      for (rk::RowType type : {rk::RowType::kFp32, rk::RowType::kBf16}) {
        PooledBench(type, zipf, copy_bw, stream, &results);
      }
    }
  }
  if (absl::GetFlag(FLAGS_hash)) {
    for (double load : {0.5, 0.8}) HashBench(load, stream, &results);
  }
  CHECK_CUDA(cudaStreamDestroy(stream));

  std::printf("\n| what | time (us) | rate | effective bytes/s | %% of copy | check |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    char bw[32] = "-";
    char pct[32] = "-";
    if (r.bytes_per_s > 0) std::snprintf(bw, sizeof(bw), "%.1f GB/s", r.bytes_per_s / 1e9);
    if (r.pct_copy > 0) std::snprintf(pct, sizeof(pct), "%.1f%%", r.pct_copy);
    std::printf("| %s | %.1f | %s | %s | %s | %s |\n", r.what.c_str(), r.us, r.rate.c_str(), bw,
                pct, r.note.c_str());
  }
  std::printf(
      "targets: pooled >= 80%% of copy; hash >= 4 G keys/s at load 0.5; "
      "torch embedding_bag (fp32 uniform) 2.98 G keys/s = 1.63 TB/s\n");
  return g_failed ? 1 : 0;
}
