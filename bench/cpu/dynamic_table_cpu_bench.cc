// dynamic_table_cpu_bench: the CPU twin of the dynamic-table updates
// (kernels/cpu/dynamic_table.h) and the cost of score touches in CPU serving
// lookups (PoolEmbeddings with PoolTable::scores), single-threaded.
//   fill     DynamicUpsert of new keys, --batch a call, until the table of
//            --max_keys keys (2 x max_keys slots: load factor 0.5) is full
//   evict    further batches of new keys into the full table (LRU)
//   lookup   PoolEmbeddings of --lookup_bags bags of --bag stored keys: no
//            scores, LRU, LFU; ratio touched / plain (requirement: >= 80%)
// Each lookup figure is the median of --iters runs. One line per figure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"

ABSL_FLAG(int64_t, max_keys, int64_t{1} << 20, "keys the table holds");
ABSL_FLAG(int64_t, batch, int64_t{1} << 16, "keys per upsert call");
ABSL_FLAG(int, dim, 32, "fp32 dim");
ABSL_FLAG(int, evict_batches, 8, "upsert calls on the full table");
ABSL_FLAG(int64_t, lookup_bags, 16384, "bags per lookup");
ABSL_FLAG(int, bag, 20, "keys per bag");
ABSL_FLAG(int, iters, 9, "lookup repetitions (median)");

namespace {
namespace rk = rankd::kernels;

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

void Figure(const char* name, double value, const char* unit) {
  std::printf("%-44s %12.1f %s\n", name, value, unit);
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t max_keys = absl::GetFlag(FLAGS_max_keys);
  const int64_t batch = std::min(absl::GetFlag(FLAGS_batch), max_keys);
  const int dim = absl::GetFlag(FLAGS_dim);
  const int evict_batches = absl::GetFlag(FLAGS_evict_batches);
  rk::DynamicTableStorage st;
  if (!rk::DynamicTableStorage::Create(max_keys, 0, 4 * dim, &st).ok()) return 2;
  const rk::DynamicTableView& v = st.view();
  const int64_t fill_batches = max_keys / batch;
  const int64_t total = (fill_batches + evict_batches) * batch;
  std::vector<int64_t> keys(total);
  for (int64_t i = 0; i < total; ++i) keys[i] = static_cast<int64_t>(rk::HashKey(i + 777));
  std::vector<float> src(batch * dim);
  std::mt19937 rng(1);
  for (float& f : src) f = static_cast<float>(rng() % 1000) / 100.0f;
  std::printf("cpu dynamic table: max_keys %lld, %lld slots, dim %d, batch %lld\n",
              static_cast<long long>(max_keys), static_cast<long long>(v.num_slots()), dim,
              static_cast<long long>(batch));

  auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < fill_batches; ++b) {
    rk::DynamicUpsert(v, absl::MakeConstSpan(keys.data() + b * batch, batch), src.data(),
                      rk::EvictionPolicy::kLru, 1 + b, nullptr);
  }
  Figure("cpu upsert new keys, fill to LF 0.5 (keys/s)", fill_batches * batch / Seconds(t0),
         "keys/s");

  const int64_t bags = absl::GetFlag(FLAGS_lookup_bags);
  const int bag = absl::GetFlag(FLAGS_bag);
  std::vector<int64_t> ids(bags * bag), offsets(bags + 1);
  std::mt19937_64 rng64(2);
  for (int64_t& id : ids) id = keys[rng64() % (fill_batches * batch)];
  for (int64_t b = 0; b <= bags; ++b) offsets[b] = b * bag;
  std::vector<float> out(bags * dim);
  const rk::HashTableView hv = rk::AsHashTableView(v);
  // Policies interleaved (after one untimed round) so drift hits all three;
  // `now` advances every round, so each LRU touch stores.
  std::vector<double> runs[3];
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters));
  for (int it = -1; it < iters; ++it) {
    for (int p = 0; p < 3; ++p) {
      rk::PoolTable t;
      t.rows = v.rows;
      t.num_rows = max_keys;
      t.dim = dim;
      t.hash = &hv;
      t.scores = p == 0 ? nullptr : v.scores;
      t.score_policy = static_cast<rk::EvictionPolicy>(p);
      t.score_now = (uint64_t{1} << 20) + it + 1;
      rk::PoolBags pb;
      pb.ids = ids.data();
      pb.offsets = offsets.data();
      pb.num_bags = bags;
      auto t1 = std::chrono::steady_clock::now();
      rk::PoolEmbeddings(t, pb, out.data(), dim);
      if (it >= 0) runs[p].push_back(Seconds(t1));
    }
  }
  double rate[3];
  for (int p = 0; p < 3; ++p) {
    std::sort(runs[p].begin(), runs[p].end());
    rate[p] = ids.size() / runs[p][runs[p].size() / 2];
  }
  Figure("cpu lookup, no score touch (ids/s)", rate[0], "ids/s");
  Figure("cpu lookup, LRU score touch (ids/s)", rate[1], "ids/s");
  Figure("cpu lookup, LFU score touch (ids/s)", rate[2], "ids/s");
  Figure("cpu lookup LRU / plain (target >= 80)", 100.0 * rate[1] / rate[0], "%");
  Figure("cpu lookup LFU / plain (target >= 80)", 100.0 * rate[2] / rate[0], "%");

  std::vector<int64_t> evicted(batch);
  t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < evict_batches; ++b) {
    const rk::DynamicStats s = rk::DynamicUpsert(
        v, absl::MakeConstSpan(keys.data() + (fill_batches + b) * batch, batch), src.data(),
        rk::EvictionPolicy::kLru, 1000000 + b, evicted.data());
    if (s.evicted != batch) {
      std::fprintf(stderr, "evicted %lld, want %lld\n", static_cast<long long>(s.evicted),
                   static_cast<long long>(batch));
      return 1;
    }
  }
  Figure("cpu upsert into full table, evicting (keys/s)", evict_batches * batch / Seconds(t0),
         "keys/s");
  return 0;
}
