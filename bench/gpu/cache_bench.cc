// cache_bench: embedding lookups with the tables in pinned host memory
// (placement HOST) behind the HBM cache, against all-in-HBM and against host
// reads with no cache, on one GPU.
//
// Shape: the 26 tables of the mlperf preset (DLRMv2) scaled by --scale, dim
// 128, --dtype rows, one bag per candidate per table with mlperf's multi-hot
// bag sizes (214 ids a candidate), --batch candidates a launch. Ids are
// Zipf(alpha) over each table's rows (continuous inverse-CDF approximation),
// ranks scattered over the table by a multiplication modulo the row count, so
// hot rows are not the low ids the warm start would load (`--scatter=false`
// keeps rank = row: the host rows then lie in frequency order, which shows
// what a frequency-ordered host layout would buy).
//
// For each alpha and cache size (fraction of every table's rows; with
// --shared_cache, the default, the tables share one cache of all those slots,
// as rankd serve does, and its slots go to the rows accessed most): the caches
// start empty and learn through the real refresh (sampled access log -> hot
// set) over --warmup_batches batches drawn from the same distribution; the
// timed batch is a fresh one. Each case is timed with the misses staged into
// HBM first and read directly inside the pooling kernel; the first keys/s is
// the one CudaWorker's policy would run (staged at >= 3% misses). Reported:
// keys/s (median launch time), hit rate
// (from the kernel's host-read counters), rows read from host memory (each
// distinct missed row once, through the HBM staging buffer) and their GB/s.
// Every mode's output must equal the all-in-HBM output bit for bit (exit 1
// otherwise).
#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/check_cuda.h"
#include "bench/gpu/device_array.h"
#include "bench/gpu/event_timer.h"
#include "bench/median.h"
#include "engine/cuda/cuda_worker.h"
#include "engine/cuda/embedding_cache.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/embedding_lookup.h"

ABSL_FLAG(double, scale, 0.25, "fraction of the mlperf table sizes");
ABSL_FLAG(std::string, dtype, "fp32", "row type: fp32 | fp16");
ABSL_FLAG(int, batch, 4096, "candidates per launch");
ABSL_FLAG(std::string, alphas, "1.05,1.2", "Zipf exponents");
ABSL_FLAG(std::string, fractions, "1,0.5,0.1,0.01", "cache sizes, fraction of each table's rows");
ABSL_FLAG(int, warmup_batches, 160, "batches before timing (the caches learn from them)");
ABSL_FLAG(int, refresh_every, 8, "warm-up batches between cache refreshes");
ABSL_FLAG(int, iters, 20, "timed launches (median reported)");
ABSL_FLAG(int, sample_shift, 0, "cache access sampling: 1 in 2^k (0: every access)");
ABSL_FLAG(double, decay, 0.8, "hot-set count decay per refresh (EmbeddingCache::Options::decay)");
ABSL_FLAG(int64_t, staging_mib, 128,
          "HBM staging for a batch's distinct missed rows (CudaWorker::Options::host_staging_bytes)");
ABSL_FLAG(bool, scatter, true, "scatter Zipf ranks over each table (false: row = rank)");
ABSL_FLAG(bool, shared_cache, true,
          "the 26 tables share one cache of all their slots (DeviceModel::Options::shared_cache); "
          "false: each table caches its own fraction");
ABSL_FLAG(bool, hbm, true, "also time all tables in HBM (needs the tables' bytes free on the GPU)");

namespace {

using rankd::bench::Median;

namespace rk = rankd::kernels;
namespace rkc = rankd::kernels::cuda;
namespace ec = rankd::engine::cuda;

const int64_t kRows[26] = {40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63,
                           40000000, 3067956, 405282, 10, 2209, 11938, 155, 4, 976,
                           14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36};
const int kBags[26] = {3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};
constexpr int kDim = 128;

std::vector<double> ParseList(const std::string& s) {
  std::vector<double> v;
  for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    double d;
    if (!absl::SimpleAtod(p, &d)) {
      std::fprintf(stderr, "cannot parse \"%s\" as a number\n", std::string(p).c_str());
      std::exit(2);
    }
    v.push_back(d);
  }
  return v;
}

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Pinned, mapped host rows of one table, filled in parallel.
struct HostRows {
  void* host = nullptr;
  int64_t bytes = 0;
  const void* device = nullptr;
};

HostRows MakeHostRows(int64_t bytes, uint64_t seed) {
  HostRows r;
  r.bytes = bytes;
  const int64_t mapped = (bytes + 4095) / 4096 * 4096;
  void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "cannot map %lld bytes of host memory\n", static_cast<long long>(bytes));
    std::exit(2);
  }
  madvise(m, mapped, MADV_HUGEPAGE);
  // Values in [-1, 1) as fp32 bit patterns of small numbers (fp16: halves).
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  const int64_t words = bytes / 4;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      auto* w = static_cast<uint32_t*>(m);
      for (int64_t i = t; i < words; i += threads) {
        const uint64_t x = Mix(seed ^ static_cast<uint64_t>(i));
        // 0x3C00xxxx-ish: finite values, both signs, for fp32 and fp16 pairs.
        w[i] = static_cast<uint32_t>(x & 0x83FF83FFu) | 0x38003800u;
      }
    });
  }
  for (auto& t : pool) t.join();
  CHECK_CUDA(cudaHostRegister(m, mapped, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* d = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(&d, m, 0));
  r.host = m;
  r.device = d;
  return r;
}

// Zipf(alpha) rank in [0, n), continuous inverse-CDF approximation.
int64_t ZipfRank(double alpha, int64_t n, double u) {
  if (n <= 1) return 0;
  const double e = 1.0 - alpha;
  const double x = std::pow((std::pow(static_cast<double>(n), e) - 1.0) * u + 1.0, 1.0 / e);
  return std::min<int64_t>(n - 1, std::max<int64_t>(0, static_cast<int64_t>(x) - 1));
}

struct Batch {
  std::vector<int64_t> ids;
  int64_t* d_ids = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const double scale = absl::GetFlag(FLAGS_scale);
  const bool fp16 = absl::GetFlag(FLAGS_dtype) == "fp16";
  if (!fp16 && absl::GetFlag(FLAGS_dtype) != "fp32") {
    std::fprintf(stderr, "--dtype: fp32 or fp16\n");
    return 2;
  }
  const int B = absl::GetFlag(FLAGS_batch);
  const int64_t elem = fp16 ? 2 : 4;
  const int64_t row_bytes = kDim * elem;
  int64_t rows[26];
  int64_t total_bytes = 0, total_rows = 0;
  for (int t = 0; t < 26; ++t) {
    rows[t] = std::max<int64_t>(1, static_cast<int64_t>(kRows[t] * scale));
    total_rows += rows[t];
    total_bytes += rows[t] * row_bytes;
  }
  int ids_per_candidate = 0;
  for (int b : kBags) ids_per_candidate += b;
  const int64_t keys = static_cast<int64_t>(ids_per_candidate) * B;
  std::printf("cache_bench: 26 tables, %lld rows, %.2f GB of %s rows in pinned host memory; "
              "batch %d, %lld keys a launch\n",
              static_cast<long long>(total_rows), total_bytes / 1e9, fp16 ? "fp16" : "fp32", B,
              static_cast<long long>(keys));

  std::vector<HostRows> host(26);
  for (int t = 0; t < 26; ++t) host[t] = MakeHostRows(rows[t] * row_bytes, 1000 + t);

  // Bag layout: feature t's bags are candidates in order, kBags[t] ids each.
  std::vector<rkc::DeviceFeature> features(26);
  std::vector<int64_t> bag_ids, bag_prefix = {0};
  std::vector<int32_t> bag_rows;
  int64_t id_pos = 0;
  for (int t = 0; t < 26; ++t) {
    features[t].table = t;
    features[t].out_col = t * kDim;
    features[t].bag_begin = static_cast<int64_t>(bag_ids.size());
    features[t].num_bags = B;
    for (int c = 0; c <= B; ++c) {
      bag_ids.push_back(id_pos + static_cast<int64_t>(c) * kBags[t]);
      bag_rows.push_back(c);
    }
    id_pos += static_cast<int64_t>(B) * kBags[t];
    bag_prefix.push_back(bag_prefix.back() + B);
  }
  rkc::PooledLookupArgs args;
  args.features = rankd::bench::ToDevice(features);
  args.num_features = 26;
  args.bag_ids = rankd::bench::ToDevice(bag_ids);
  args.bag_rows = rankd::bench::ToDevice(bag_rows);
  args.total_bags = bag_prefix.back();
  const int64_t* d_prefix = rankd::bench::ToDevice(bag_prefix);
  args.out_stride = 26 * kDim;
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float) * B * args.out_stride));
  args.out = out;
  unsigned long long* counters = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&counters), 3 * 26 * 8));
  args.unresolved = counters;
  args.host_reads = counters + 26;
  args.host_rows_read = counters + 52;
  {
    const int64_t stride = (row_bytes + 15) / 16 * 16;
    const int64_t staging_rows =
        std::min<int64_t>(keys, (absl::GetFlag(FLAGS_staging_mib) << 20) / stride);
    void* block = nullptr;
    CHECK_CUDA(cudaMalloc(&block, rkc::HostStagingBytes(keys, staging_rows, row_bytes)));
    args.staging = rkc::CarveHostStaging(block, keys, staging_rows, row_bytes, total_bytes);
    unsigned int* limit = nullptr;
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&limit), sizeof(unsigned int)));
    args.staging.limit = limit;
    std::printf("staging: %lld rows (%lld MiB) for each batch's distinct missed rows\n",
                static_cast<long long>(staging_rows), static_cast<long long>(staging_rows * stride >> 20));
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  rankd::bench::EventTimer timer;

  std::vector<rkc::DeviceTable> tables(26);
  int64_t host_offset = 0;
  for (int t = 0; t < 26; ++t) {
    tables[t].host_offset = host_offset;  // HOST tables back to back, for the fetch order
    host_offset += rows[t] * row_bytes;
    tables[t].row_type = fp16 ? rk::RowType::kFp16 : rk::RowType::kFp32;
    tables[t].pooling = rk::Pooling::kSum;
    tables[t].dim = kDim;
    tables[t].num_rows = rows[t];
  }
  rkc::DeviceTable* d_tables = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_tables), sizeof(rkc::DeviceTable) * 26));
  args.tables = d_tables;

  // One timed measurement of the current tables on batch `b`.
  struct Result {
    double keys_per_s = 0;
    double hit_rate = 1;
    double host_gbs = 0;
    double rows_read_fraction = 0;  // rows read from host / cache misses
    std::vector<float> out;
  };
  // staged: misses staged into HBM first (HostStaging); else read from host
  // memory inside the pooling kernel (the staging limit set to 0).
  auto measure = [&](const Batch& b, bool any_host, bool staged = true) {
    CHECK_CUDA(cudaMemcpy(d_tables, tables.data(), sizeof(rkc::DeviceTable) * 26,
                          cudaMemcpyHostToDevice));
    const unsigned int limit = staged ? static_cast<unsigned int>(args.staging.capacity) : 0u;
    CHECK_CUDA(cudaMemcpy(const_cast<unsigned int*>(args.staging.limit), &limit, sizeof(limit),
                          cudaMemcpyHostToDevice));
    args.ids = b.d_ids;
    args.any_host = any_host;
    std::vector<double> us;
    unsigned long long reads = 0, rows_read = 0;
    for (int i = 0; i < absl::GetFlag(FLAGS_iters) + 2; ++i) {
      CHECK_CUDA(cudaMemsetAsync(counters, 0, 3 * 26 * 8, stream));
      const double ms =
          timer.Ms(stream, [&] { CHECK_CUDA(rkc::LaunchPooledLookup(args, d_prefix, stream)); });
      if (i >= 2) us.push_back(ms * 1000.0);
      std::vector<unsigned long long> c(52);
      CHECK_CUDA(cudaMemcpy(c.data(), counters + 26, 52 * 8, cudaMemcpyDeviceToHost));
      reads = 0;
      rows_read = 0;
      for (int t = 0; t < 26; ++t) {
        reads += c[t];
        rows_read += c[26 + t];
      }
    }
    Result r;
    const double med = Median(us);
    r.keys_per_s = keys / (med * 1e-6);
    r.hit_rate = any_host ? 1.0 - static_cast<double>(reads) / keys : 1.0;
    r.host_gbs = rows_read * row_bytes / (med * 1e-6) / 1e9;
    r.rows_read_fraction = reads > 0 ? static_cast<double>(rows_read) / reads : 0.0;
    r.out.resize(static_cast<size_t>(B) * args.out_stride);
    CHECK_CUDA(cudaMemcpy(r.out.data(), out, sizeof(float) * r.out.size(), cudaMemcpyDeviceToHost));
    return r;
  };

  std::vector<std::string> table_lines;
  bool all_exact = true;
  for (double alpha : ParseList(absl::GetFlag(FLAGS_alphas))) {
    // Warm-up batches plus the timed one, all from the same distribution.
    const int nb = absl::GetFlag(FLAGS_warmup_batches) + 1;
    std::vector<Batch> batches(nb);
    // Ids on every core (each batch from its own seeded generator).
    std::vector<std::thread> gen;
    const int gen_threads = std::max(1u, std::thread::hardware_concurrency());
    for (int g = 0; g < gen_threads; ++g) {
      gen.emplace_back([&, g] {
    for (int k = g; k < nb; k += gen_threads) {
      std::mt19937_64 rng(Mix(static_cast<uint64_t>(alpha * 1000) * 131 + k));
      std::uniform_real_distribution<double> u(0.0, 1.0);
      Batch& b = batches[k];
      b.ids.reserve(keys);
      for (int t = 0; t < 26; ++t) {
        const int64_t n = rows[t];
        const int64_t mult = absl::GetFlag(FLAGS_scatter)
                                 ? 2654435761LL % std::max<int64_t>(n, 1)  // prime: a bijection unless it divides n
                                 : 1;
        for (int64_t i = 0; i < static_cast<int64_t>(B) * kBags[t]; ++i) {
          const int64_t rank = ZipfRank(alpha, n, u(rng));
          b.ids.push_back(n > 1 ? static_cast<int64_t>((static_cast<__int128>(rank) * (mult == 0 ? 1 : mult)) % n) : 0);
        }
      }
    }
      });
    }
    for (auto& t : gen) t.join();
    for (Batch& b : batches) {
      b.d_ids = rankd::bench::ToDevice(b.ids);
      std::vector<int64_t>().swap(b.ids);  // keep only the device copy
    }
    const Batch& timed = batches.back();

    // All in HBM (the reference output).
    Result hbm;
    std::vector<void*> device_rows;
    if (absl::GetFlag(FLAGS_hbm)) {
      for (int t = 0; t < 26; ++t) {
        void* d = nullptr;
        CHECK_CUDA(cudaMalloc(&d, host[t].bytes));
        CHECK_CUDA(cudaMemcpy(d, host[t].host, host[t].bytes, cudaMemcpyHostToDevice));
        device_rows.push_back(d);
        tables[t].rows = d;
        tables[t].host = 0;
        tables[t].cache_slot = nullptr;
        tables[t].cache_rows = nullptr;
        tables[t].access_log = nullptr;
      }
      hbm = measure(timed, false);
      for (void* d : device_rows) cudaFree(d);
      char line[300];
      std::snprintf(line, sizeof(line), "zipf %.2f  all in HBM            %8.1f M keys/s   hit 1.000",
                    alpha, hbm.keys_per_s / 1e6);
      table_lines.push_back(line);
      std::printf("%s\n", line);
    }
    // Host reads, no cache.
    for (int t = 0; t < 26; ++t) {
      tables[t].rows = host[t].device;
      tables[t].host = 1;
      tables[t].cache_slot = nullptr;
      tables[t].cache_rows = nullptr;
      tables[t].access_log = nullptr;
    }
    Result none = measure(timed, true);
    Result none_direct = measure(timed, true, false);
    const bool none_exact =
        hbm.out.empty() || (none.out == hbm.out && none_direct.out == hbm.out);
    all_exact = all_exact && none_exact;
    {
      char line[300];
      std::snprintf(line, sizeof(line),
                    "zipf %.2f  host, no cache        %8.1f M keys/s   hit %.3f  host %.1f GB/s (%.2f of misses read); direct %.1f M%s",
                    alpha, none.keys_per_s / 1e6, none.hit_rate, none.host_gbs, none.rows_read_fraction,
                    none_direct.keys_per_s / 1e6,
                    none_exact ? "" : "  MISMATCH");
      table_lines.push_back(line);
      std::printf("%s\n", line);
    }
    // Host behind caches of each size.
    for (double fraction : ParseList(absl::GetFlag(FLAGS_fractions))) {
      // Per table: capacity, log and changes as DeviceModel would give a
      // cache of its own; shared (--shared_cache): one cache of them all.
      std::vector<std::vector<ec::EmbeddingCache::Member>> groups;
      for (int t = 0; t < 26; ++t) {
        ec::EmbeddingCache::Member m;
        m.table = "t" + std::to_string(t);
        m.num_rows = rows[t];
        m.host_rows = host[t].device;
        const int64_t capacity = std::max<int64_t>(1, static_cast<int64_t>(fraction * rows[t]));
        m.warm_rows = capacity;  // the capacity it brings (no warm start: prefill off)
        // Room for every sampled access between two refreshes.
        m.log_entries = std::min<int64_t>(
            int64_t{1} << 23,
            (int64_t{B} * kBags[t] * absl::GetFlag(FLAGS_refresh_every) >>
             absl::GetFlag(FLAGS_sample_shift)) + 1);
        if (groups.empty() || !absl::GetFlag(FLAGS_shared_cache)) groups.emplace_back();
        groups.back().push_back(std::move(m));
      }
      std::vector<std::unique_ptr<ec::EmbeddingCache>> caches;
      int next_table = 0;
      for (auto& g : groups) {
        ec::EmbeddingCache::Options o;
        o.capacity_rows = 0;
        o.max_changes = 0;
        for (const auto& m : g) {
          o.capacity_rows += m.warm_rows;
          o.max_changes += std::max<int64_t>(m.warm_rows / 4, 1 << 16);
        }
        o.sample_shift = absl::GetFlag(FLAGS_sample_shift);
        o.prefill = false;
        o.decay = static_cast<float>(absl::GetFlag(FLAGS_decay));
        const int members = static_cast<int>(g.size());
        auto c = ec::EmbeddingCache::Create(std::move(g), row_bytes, o);
        if (!c.ok()) {
          std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
          return 2;
        }
        for (int m = 0; m < members; ++m, ++next_table) {
          tables[next_table].rows = host[next_table].device;
          (*c)->Describe(m, &tables[next_table]);
        }
        caches.push_back(std::move(*c));
      }
      CHECK_CUDA(cudaMemcpy(d_tables, tables.data(), sizeof(rkc::DeviceTable) * 26,
                            cudaMemcpyHostToDevice));
      // Learn the hot set from the warm-up batches through the real refresh.
      const int every = std::max(1, absl::GetFlag(FLAGS_refresh_every));
      for (int k = 0; k + 1 < nb; ++k) {
        args.ids = batches[k].d_ids;
        args.any_host = true;
        CHECK_CUDA(rkc::LaunchPooledLookup(args, d_prefix, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        if ((k + 1) % every != 0 && k + 2 < nb) continue;
        for (auto& c : caches) {
          absl::Status s = c->Refresh(stream, nullptr);
          if (!s.ok()) {
            std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
            return 2;
          }
        }
      }
      // Time with the log off (steady state, no refresh traffic).
      for (int t = 0; t < 26; ++t) tables[t].access_log = nullptr;
      Result staged = measure(timed, true);
      Result direct = measure(timed, true, false);
      // What CudaWorker would run (its default Options::staging_min_miss_rate).
      const bool pick_staged =
          1.0 - staged.hit_rate >= ec::CudaWorker::Options{}.staging_min_miss_rate;
      Result& r = pick_staged ? staged : direct;
      const bool exact = hbm.out.empty() || (staged.out == hbm.out && direct.out == hbm.out);
      all_exact = all_exact && exact;
      int64_t cached = 0;
      for (auto& c : caches) cached += c->stats().occupied;
      char line[300];
      std::snprintf(line, sizeof(line),
                    "zipf %.2f  cache %5.1f%% (%5.1f%% full) %8.1f M keys/s   hit %.3f  host %.1f GB/s (%.2f of misses read); staged %.1f M, direct %.1f M -> %s%s",
                    alpha, fraction * 100, 100.0 * cached / std::max<int64_t>(1, static_cast<int64_t>(fraction * total_rows)),
                    r.keys_per_s / 1e6, r.hit_rate, r.host_gbs, r.rows_read_fraction,
                    staged.keys_per_s / 1e6, direct.keys_per_s / 1e6,
                    pick_staged ? "staged" : "direct", exact ? "" : "  MISMATCH");
      table_lines.push_back(line);
      std::printf("%s\n", line);
      // Where the slots went: each table's cached rows, % of its rows.
      std::string shares = "  cached, % of each table's rows:";
      int t = 0;
      for (auto& c : caches) {
        for (int m = 0; m < c->num_members(); ++m, ++t) {
          shares += " " + std::to_string(t) + ":" +
                    std::to_string(static_cast<int>(std::lround(100.0 * c->cached_rows(m) / rows[t])));
        }
      }
      std::printf("%s\n", shares.c_str());
    }
    for (Batch& b : batches) cudaFree(b.d_ids);
  }
  std::printf("\n==== cache_bench (scale %.3g, %s, batch %d, %lld keys/launch, ranks %s, %s; outputs %s the "
              "all-in-HBM output) ====\n",
              scale, fp16 ? "fp16" : "fp32", B, static_cast<long long>(keys),
              absl::GetFlag(FLAGS_scatter) ? "scattered" : "= rows",
              absl::GetFlag(FLAGS_shared_cache) ? "one shared cache" : "a cache per table",
              all_exact ? "all equal" : "NOT all equal to");
  for (const auto& l : table_lines) std::printf("%s\n", l.c_str());
  for (HostRows& h : host) {
    cudaHostUnregister(h.host);
    munmap(h.host, (h.bytes + 4095) / 4096 * 4096);
  }
  return all_exact ? 0 : 1;
}
