// host_read_bench: how fast the GPU gathers random rows from pinned host
// memory, by how that memory was allocated and how large it is. This is what
// bounds lookups of HOST tables that miss the HBM cache (issue 5): the
// staging pass copies each distinct missed row with the same kind of gather.
//
// For each allocation kind and buffer size: `--rows` rows of `--row_bytes`
// picked uniformly at random (or the same rows sorted by address) are copied
// into HBM with LaunchFillCacheRows (one warp a row, 16-byte loads); reported
// GB/s and M rows/s are the median of --iters launches. `--blocks` caps the
// grid (warps then loop over the rows in order): with rows sorted by address,
// that bounds the span of host addresses in flight at once.
//   thp        mmap + MADV_HUGEPAGE, cudaHostRegister (what HostTables does)
//   nothp      mmap + MADV_NOHUGEPAGE, cudaHostRegister
//   hostalloc  cudaHostAlloc (the driver's own pinned allocation)
//   hugetlb    mmap MAP_HUGETLB (2 MiB pages from the hugetlbfs pool; skipped
//              when the pool has none: this tool never changes host settings)
//   pool       cudaMallocFromPoolAsync from a pinned memory pool located on
//              the host (cudaMemLocationTypeHost), device access granted:
//              the driver's virtual-memory allocator, which maps host memory
//              in its own (larger) granules
//   poolnuma   the same on host NUMA node 0 (cudaMemLocationTypeHostNuma)
#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/check_cuda.h"
#include "bench/gpu/event_timer.h"
#include "kernels/cuda/embedding_cache.h"

ABSL_FLAG(std::string, kinds, "thp,nothp,hostalloc,hugetlb,pool,poolnuma", "allocation kinds");
ABSL_FLAG(std::string, sizes_gib, "0.0625,1,4,12", "host buffer sizes, GiB");
ABSL_FLAG(int64_t, rows, 131072, "rows gathered a launch");
ABSL_FLAG(int64_t, row_bytes, 512, "bytes a row");
ABSL_FLAG(int, iters, 9, "timed launches (median)");
ABSL_FLAG(std::string, blocks, "0",
          "grid caps to compare (LaunchFillCacheRows max_blocks; 0 = one warp a row)");

namespace {

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "(unreadable)" : line;
}

std::string MeminfoLine(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line;
  }
  return std::string(key) + " (none)";
}

void Touch(void* p, int64_t bytes) {
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const int64_t chunk = (bytes + threads - 1) / threads;
      const int64_t begin = std::min(bytes, chunk * t);
      const int64_t end = std::min(bytes, begin + chunk);
      std::memset(static_cast<char*>(p) + begin, t + 1, end - begin);
    });
  }
  for (auto& t : pool) t.join();
}

struct HostBuffer {
  void* host = nullptr;
  const void* device = nullptr;
  bool registered = false, mapped = false, driver = false;
  cudaMemPool_t pool = nullptr;
  int64_t bytes = 0;
};

// Empty `host` when the kind cannot be had here (reason printed).
HostBuffer Allocate(const std::string& kind, int64_t bytes) {
  HostBuffer b;
  b.bytes = bytes;
  if (kind == "pool" || kind == "poolnuma") {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = kind == "pool" ? cudaMemLocationTypeHost : cudaMemLocationTypeHostNuma;
    props.location.id = 0;
    if (const cudaError_t err = cudaMemPoolCreate(&b.pool, &props); err != cudaSuccess) {
      std::printf("  %s: cudaMemPoolCreate failed: %s\n", kind.c_str(),
                  rankd::kernels::cuda::CudaErrorText(err).c_str());
      return HostBuffer{};
    }
    cudaMemAccessDesc desc = {};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = 0;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    void* p = nullptr;
    cudaError_t err = cudaMemPoolSetAccess(b.pool, &desc, 1);
    if (err == cudaSuccess) err = cudaMallocFromPoolAsync(&p, bytes, b.pool, 0);
    if (err == cudaSuccess) err = cudaStreamSynchronize(0);
    if (err != cudaSuccess) {
      std::printf("  %s: pool allocation of %lld bytes failed: %s\n", kind.c_str(),
                  static_cast<long long>(bytes), rankd::kernels::cuda::CudaErrorText(err).c_str());
      cudaMemPoolDestroy(b.pool);
      return HostBuffer{};
    }
    b.host = p;
    b.device = p;  // one address for host and device
    Touch(p, bytes);
    return b;
  }
  if (kind == "hostalloc") {
    if (cudaHostAlloc(&b.host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
      std::printf("  %s: cudaHostAlloc of %lld bytes failed\n", kind.c_str(),
                  static_cast<long long>(bytes));
      cudaGetLastError();
      return HostBuffer{};
    }
    b.driver = true;
    Touch(b.host, bytes);
  } else {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (kind == "hugetlb") flags |= MAP_HUGETLB;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) {
      std::printf("  %s: mmap failed (%s; HugePages_Free: %s)\n", kind.c_str(),
                  std::strerror(errno), MeminfoLine("HugePages_Free").c_str());
      return HostBuffer{};
    }
    if (kind == "thp") madvise(m, bytes, MADV_HUGEPAGE);
    if (kind == "nothp") madvise(m, bytes, MADV_NOHUGEPAGE);
    b.host = m;
    b.mapped = true;
    Touch(m, bytes);
    if (cudaHostRegister(m, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable) !=
        cudaSuccess) {
      std::printf("  %s: cudaHostRegister failed\n", kind.c_str());
      cudaGetLastError();
      munmap(m, bytes);
      return HostBuffer{};
    }
    b.registered = true;
  }
  void* d = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(&d, b.host, 0));
  b.device = d;
  return b;
}

void Free(HostBuffer& b) {
  if (b.host == nullptr) return;
  if (b.pool != nullptr) {
    cudaFreeAsync(b.host, 0);
    cudaStreamSynchronize(0);
    cudaMemPoolDestroy(b.pool);
    b = HostBuffer{};
    return;
  }
  if (b.registered) cudaHostUnregister(b.host);
  if (b.driver) cudaFreeHost(b.host);
  if (b.mapped) munmap(b.host, b.bytes);
  b = HostBuffer{};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t n = absl::GetFlag(FLAGS_rows);
  const int64_t row_bytes = absl::GetFlag(FLAGS_row_bytes);
  if (n <= 0 || row_bytes <= 0 || row_bytes % 16 != 0) {
    std::fprintf(stderr, "--rows must be > 0 and --row_bytes a positive multiple of 16\n");
    return 2;
  }
  std::vector<int> block_caps;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_blocks), ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 0) {
      std::fprintf(stderr, "--blocks: \"%s\" is not a count >= 0\n", std::string(s).c_str());
      return 2;
    }
    block_caps.push_back(v);
  }
  if (block_caps.empty()) block_caps.push_back(0);
  std::printf("THP: %s; defrag: %s\n",
              FirstLine("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
              FirstLine("/sys/kernel/mm/transparent_hugepage/defrag").c_str());
  std::printf("%s; %s\n", MeminfoLine("HugePages_Total").c_str(),
              MeminfoLine("Hugepagesize").c_str());

  void* d_out = nullptr;
  int64_t* d_rows = nullptr;
  int32_t* d_slots = nullptr;
  CHECK_CUDA(cudaMalloc(&d_out, n * row_bytes));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), n * 8));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_slots), n * 4));
  std::vector<int32_t> slots(n);
  for (int64_t i = 0; i < n; ++i) slots[i] = static_cast<int32_t>(i);
  CHECK_CUDA(cudaMemcpy(d_slots, slots.data(), n * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  rankd::bench::EventTimer timer;

  std::vector<std::string> table;
  for (absl::string_view kind_view :
       absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipEmpty())) {
    const std::string kind(kind_view);
    for (absl::string_view s :
         absl::StrSplit(absl::GetFlag(FLAGS_sizes_gib), ',', absl::SkipEmpty())) {
      double gib = 0;
      if (!absl::SimpleAtod(s, &gib) || gib <= 0) {
        std::fprintf(stderr, "--sizes_gib: cannot parse \"%s\"\n", std::string(s).c_str());
        return 2;
      }
      const int64_t bytes = static_cast<int64_t>(gib * (int64_t{1} << 30)) / (2 << 20) * (2 << 20);
      const std::string before = MeminfoLine("AnonHugePages");
      HostBuffer b = Allocate(kind, bytes);
      if (b.host == nullptr) continue;
      const std::string after = MeminfoLine("AnonHugePages");
      const int64_t num_rows = bytes / row_bytes;
      std::mt19937_64 rng(42);
      std::vector<int64_t> rows(n);
      for (auto& r : rows) r = static_cast<int64_t>(rng() % num_rows);
      for (int sorted = 0; sorted < 2; ++sorted) {
        if (sorted) std::sort(rows.begin(), rows.end());
        CHECK_CUDA(cudaMemcpy(d_rows, rows.data(), n * 8, cudaMemcpyHostToDevice));
        for (const int max_blocks : block_caps) {
          std::vector<float> ms;
          for (int i = 0; i < absl::GetFlag(FLAGS_iters) + 1; ++i) {
            const double t = timer.Ms(stream, [&] {
              CHECK_CUDA(rankd::kernels::cuda::LaunchFillCacheRows(
                  b.device, num_rows, row_bytes, d_rows, d_slots, n, d_out, n, stream, max_blocks));
            });
            if (i > 0) ms.push_back(static_cast<float>(t));
          }
          std::sort(ms.begin(), ms.end());
          const double med = ms[ms.size() / 2] * 1e-3;
          char line[300];
          std::snprintf(line, sizeof(line),
                        "%-9s %7.3f GiB %-6s blocks %-5d %7.1f GB/s %7.1f M rows/s", kind.c_str(),
                        gib, sorted ? "sorted" : "random", max_blocks, n * row_bytes / med / 1e9,
                        n / med / 1e6);
          std::printf("%s   [%s -> %s]\n", line, before.c_str(), after.c_str());
          table.push_back(line);
        }
      }
      Free(b);
    }
  }
  std::printf("\n==== host_read_bench (%lld rows of %lld bytes a launch) ====\n",
              static_cast<long long>(n), static_cast<long long>(row_bytes));
  for (const auto& l : table) std::printf("%s\n", l.c_str());
  return 0;
}
