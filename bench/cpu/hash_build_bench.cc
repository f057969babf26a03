// Host hash-table build rate (keys/s) for a DYNAMIC table's keys, the step a
// model load runs once per DYNAMIC table: HashTable::Build (one thread) vs
// BuildParallel at several thread counts. Keys are distinct pseudo-random
// int64s (splitmix64 of the row), as exported ids look to the table.
//
//   hash_build_bench --keys 100000000 --threads 1,2,16
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/parallel.h"

ABSL_FLAG(int64_t, keys, 10'000'000, "keys to insert");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated BuildParallel thread counts");
ABSL_FLAG(bool, serial, true, "also time the single-threaded HashTable::Build");
ABSL_FLAG(int, repeats, 3, "builds per configuration; the best is reported");

namespace {

using rankd::kernels::HashTable;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Seconds of the fastest of --repeats calls of build(&t), each into a fresh
// table t (its destruction untimed); nullopt if a build fails.
template <typename Build>
std::optional<double> BestSeconds(Build build) {
  double best = 1e30;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    HashTable t;
    const auto start = std::chrono::steady_clock::now();
    if (!build(&t).ok()) return std::nullopt;
    best = std::min(best, Seconds(start));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t n = absl::GetFlag(FLAGS_keys);
  std::vector<int64_t> keys(n);
  rankd::kernels::ParallelChunks(n, 1 << 20, 0, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      // HashKey is a bijection: distinct rows give distinct keys.
      int64_t k = static_cast<int64_t>(rankd::kernels::HashKey(r));
      keys[r] = k == rankd::kernels::kEmptyKey ? 0 : k;
    }
  });
  std::printf("keys %lld, capacity %lld slots (%.2f GB of hash arrays)\n",
              static_cast<long long>(n), static_cast<long long>(HashTable::SlotsFor(2 * n)),
              HashTable::SlotsFor(2 * n) * 16 / 1e9);
  auto report = [&](const char* what, int threads, double best) {
    std::printf("%-14s threads %2d: %.3f s, %.1f M keys/s\n", what, threads, best,
                n / best / 1e6);
  };
  if (absl::GetFlag(FLAGS_serial)) {
    const std::optional<double> best =
        BestSeconds([&](HashTable* t) { return HashTable::Build(keys, 0, t); });
    if (!best) return 1;
    report("Build", 1, *best);
  }
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(s, &threads)) return 2;
    rankd::kernels::HashBuildOptions o;
    o.num_threads = threads;
    const std::optional<double> best = BestSeconds(
        [&](HashTable* t) { return HashTable::BuildParallel(keys, 0, o, t); });
    if (!best) return 1;
    report("BuildParallel", threads, *best);
    // The part of it that only allocates and initialises the arrays.
    const std::optional<double> init = BestSeconds(
        [&](HashTable* t) { return HashTable::BuildParallel({}, 2 * n, o, t); });
    if (!init) return 1;
    std::printf("  of which array init (no keys): %.3f s\n", *init);
  }
  return 0;
}
