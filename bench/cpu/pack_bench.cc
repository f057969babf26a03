// pack_bench: the CUDA worker's host packing (engine/cuda/batch_packer.h) on
// the CPU alone, phase by phase, for one request of B candidates: the
// request offsets, the id count, and PackSlice into an arena laid out as the
// worker lays it out for that bucket (compact ids, unit bags), alone or
// split over a PackPool of --threads threads. No GPU: the arena is ordinary
// memory, touched before timing. Prints one RESULT line of medians in us.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_input.h"
#include "bench/median.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/pack_pool.h"

ABSL_FLAG(std::string, model, "", "model version directory (rankd gen-model)");
ABSL_FLAG(std::string, request, "", "JSON-lines file; its first ScoreRequest is packed");
ABSL_FLAG(int, threads, 0, "PackPool threads (0 = pack on the calling thread alone)");
ABSL_FLAG(int, iters, 200, "timed packs");
ABSL_FLAG(int, warmup, 20, "untimed packs first");
ABSL_FLAG(bool, compact_ids, true, "the compact layout (int32 ids and offsets), as the worker");
ABSL_FLAG(int, unit_bags_min_rows, 512, "buckets of at least this many rows use unit bags");
ABSL_FLAG(int, gap_us, 0,
          "sleep this long between packs, so the pool's threads fall asleep between them as "
          "they do between a server's batches at low load (0 = back to back)");

namespace {

using rankd::bench::Median;

using Clock = std::chrono::steady_clock;
double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int64_t RoundUpPow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_iters) < 1 || absl::GetFlag(FLAGS_warmup) < 0 ||
      absl::GetFlag(FLAGS_threads) < 0 || absl::GetFlag(FLAGS_threads) > 256 ||
      absl::GetFlag(FLAGS_gap_us) < 0 || absl::GetFlag(FLAGS_gap_us) > 1000000) {
    std::cerr << "--iters must be >= 1, --warmup >= 0, --threads in [0, 256], --gap_us in [0, "
                 "1000000]\n";
    return 2;
  }
  namespace ec = rankd::engine::cuda;
  auto input =
      rankd::bench::LoadBenchInput(absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_request));
  if (!input.ok()) {
    std::cerr << input.status() << "\n";
    return 2;
  }
  const rankd::engine::Model& m = *(*input)->model;
  const rankd::engine::Request* reqs[] = {&(*input)->request};
  const int64_t rows = (*input)->request.num_candidates;
  const int64_t bucket = RoundUpPow2(rows);

  std::unique_ptr<ec::PackPool> pool;
  ec::ParallelFor parallel;
  if (absl::GetFlag(FLAGS_threads) > 0) {
    pool = std::make_unique<ec::PackPool>(absl::GetFlag(FLAGS_threads));
    parallel = pool->AsParallelFor();
  }
  std::vector<int> feat_col;
  int col = m.dense_out_width();
  for (const rankd::engine::SparseFeature& f : m.features) {
    feat_col.push_back(col);
    col += m.tables[f.table].dim;
  }
  ec::RequestOffsets offsets;
  ec::ComputeRequestOffsets(m, reqs, &offsets, parallel, /*bag_offsets=*/false);
  const int64_t ids = ec::CountSliceIds(m, reqs, offsets, 0, rows);
  const bool compact = absl::GetFlag(FLAGS_compact_ids) && ec::CompactIdsFit(ids);
  const int dense_ld = (m.num_dense + 3) / 4 * 4;
  const int min_unit = absl::GetFlag(FLAGS_unit_bags_min_rows);
  const ec::PackedLayout proto_layout =
      ec::MakeLayout(m, bucket, ids, dense_ld, compact, min_unit > 0 && bucket >= min_unit);
  std::vector<uint8_t> arena(proto_layout.bytes + 64);
  uint8_t* base = arena.data() + (64 - reinterpret_cast<uintptr_t>(arena.data()) % 64) % 64;

  std::vector<double> t_offsets, t_count, t_pack;
  ec::PackedLayout layout = proto_layout;
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_iters); ++i) {
    if (absl::GetFlag(FLAGS_gap_us) > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(absl::GetFlag(FLAGS_gap_us)));
    }
    const auto t0 = Clock::now();
    ec::ComputeRequestOffsets(m, reqs, &offsets, parallel, /*bag_offsets=*/false);
    const auto t1 = Clock::now();
    const int64_t n = ec::CountSliceIds(m, reqs, offsets, 0, rows);
    const auto t2 = Clock::now();
    layout = ec::MakeLayout(m, bucket, n, dense_ld, compact, proto_layout.unit_bags);
    ec::PackSlice(m, reqs, offsets, 0, rows, feat_col, &layout, base, parallel);
    const auto t3 = Clock::now();
    if (i < absl::GetFlag(FLAGS_warmup)) continue;
    t_offsets.push_back(Us(t0, t1));
    t_count.push_back(Us(t1, t2));
    t_pack.push_back(Us(t2, t3));
  }
  const double bytes = static_cast<double>(layout.ids_end());
  std::printf(
      "RESULT model=%s rows=%lld bucket=%lld threads=%d compact=%d unit_bags=%d all_unit=%d "
      "gap_us=%d offsets_us=%.1f count_us=%.1f pack_us=%.1f pack_min_us=%.1f arena_bytes=%.0f\n",
      m.name.c_str(), static_cast<long long>(rows), static_cast<long long>(bucket),
      absl::GetFlag(FLAGS_threads), compact ? 1 : 0, layout.unit_bags ? 1 : 0,
      layout.all_unit ? 1 : 0, absl::GetFlag(FLAGS_gap_us), Median(t_offsets), Median(t_count), Median(t_pack),
      *std::min_element(t_pack.begin(), t_pack.end()), bytes);
  return 0;
}
