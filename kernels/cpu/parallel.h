// ParallelChunks: splits [0, n) into fixed-size chunks and runs them on a few
// short-lived std::threads. Meant for load-time bulk work (filling tens of GB
// of rows, building hash tables), where a thread's start cost is nothing next
// to the work; the serving path uses the engine's long-lived pools instead.
#ifndef RANKD_KERNELS_CPU_PARALLEL_H_
#define RANKD_KERNELS_CPU_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels/cpu/host_resources.h"

namespace rankd::kernels {

// `requested` threads, or every CPU this process may use when 0 (its
// affinity and cgroup CPU quota: host_resources.h; at least 1).
inline int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  return UsableCpus();
}

// Calls fn(begin, end) for consecutive chunks [begin, end) of at most `chunk`
// items covering [0, n), on min(num_threads, chunks) threads (the caller is
// one of them; num_threads 0 = every hardware thread; fewer where the process
// cannot start that many). Chunks are handed out in increasing order from a
// shared counter, so a slow thread never holds up the others' share. `fn` must be thread-safe and must not throw. Returns
// when every chunk is done.
template <typename F>
void ParallelChunks(int64_t n, int64_t chunk, int num_threads, const F& fn) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int threads = static_cast<int>(
      std::min<int64_t>(ResolveThreads(num_threads), chunks));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      const int64_t begin = c * chunk;
      fn(begin, std::min(n, begin + chunk));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    // A helper the process cannot start (its thread or memory limit:
    // std::system_error) is done without: the chunks come from a shared
    // counter, so the threads that did start, the caller's included, do its
    // share.
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace rankd::kernels

#endif  // RANKD_KERNELS_CPU_PARALLEL_H_
