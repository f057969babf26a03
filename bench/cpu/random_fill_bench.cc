// Fill rate (GB/s) of RANDOM table rows, the loader's work for
// `init { kind: RANDOM }` tables: FillRandomRows over a fresh host mapping
// (first touch: page faults included, as at load) and again over the same,
// already-faulted memory (generation and conversion alone), per dtype.
//
//   random_fill_bench --gb 2 --dim 128 --threads 1,2
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/model/host_memory.h"
#include "engine/model/table_init.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/types.h"

ABSL_FLAG(double, gb, 1.0, "bytes of rows per fill, in GB (1e9)");
ABSL_FLAG(int, dim, 128, "row width");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated thread counts");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using rankd::kernels::RowType;
  const int dim = absl::GetFlag(FLAGS_dim);
  for (absl::string_view ts : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(ts, &threads)) return 2;
    for (RowType type : {RowType::kFp32, RowType::kFp16, RowType::kBf16}) {
      const int64_t row_bytes = dim * static_cast<int64_t>(rankd::kernels::RowTypeBytes(type));
      const int64_t rows = static_cast<int64_t>(absl::GetFlag(FLAGS_gb) * 1e9) / row_bytes;
      auto mem = rankd::engine::AllocateHostBytes(rows * row_bytes, "bench rows");
      if (!mem.ok()) {
        std::fprintf(stderr, "%s\n", std::string(mem.status().message()).c_str());
        return 1;
      }
      const uint64_t stream = rankd::engine::RandomTableStream(1, "bench");
      const float scale = rankd::engine::DefaultRandomInitScale(rows);
      auto fill = [&] {
        const auto start = std::chrono::steady_clock::now();
        rankd::kernels::ParallelChunks(
            rows, std::max<int64_t>(1, (8 << 20) / row_bytes), threads,
            [&](int64_t b, int64_t e) {
              rankd::engine::FillRandomRows(stream, scale, dim, type, b, e,
                                            mem->data() + b * row_bytes);
            });
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      const double first = fill();
      const double again = fill();
      const double gb = rows * row_bytes / 1e9;
      std::printf("%s dim %d threads %d: %.2f GB, first touch %.2f GB/s, faulted %.2f GB/s%s\n",
                  type == RowType::kFp32 ? "fp32" : type == RowType::kFp16 ? "fp16" : "bf16", dim,
                  threads, gb, gb / first, gb / again,
                  mem->huge_pages_advised() ? "" : " (no huge pages)");
    }
  }
  return 0;
}
