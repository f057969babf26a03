#include "engine/cuda/pack_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "kernels/cpu/host_resources.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace rankd::engine::cuda {
namespace {

// Names each pool thread, so per-thread profiles tell packing apart.
struct PackThreadEnvironment : Eigen::StlThreadEnvironment {
  EnvThread* CreateThread(std::function<void()> f) {
    return new EnvThread([f = std::move(f)] {
      pthread_setname_np(pthread_self(), "rankd-pack");
      f();
    });
  }
};

}  // namespace

struct PackPool::Impl {
  explicit Impl(int threads) : pool(threads, /*allow_spinning=*/true) {}
  Eigen::ThreadPoolTempl<PackThreadEnvironment> pool;
};

namespace {

// One Run's tasks. Shared with the helpers it scheduled: a helper that wakes
// after every task was claimed only looks at `next` and leaves, possibly
// after Run returned, so the state outlives Run while a helper holds it.
struct RunState {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int64_t n = 0;
  const std::function<void(int64_t)>* task = nullptr;  // called only before Run returns

  void Work() {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      (*task)(i);
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
};

}  // namespace

PackPool::PackPool(int threads)
    : threads_(std::max(threads, 1)), impl_(std::make_unique<Impl>(threads_)) {}

PackPool::~PackPool() = default;

void PackPool::Run(int64_t n, const std::function<void(int64_t)>& task) {
  if (n <= 0) return;
  auto state = std::make_shared<RunState>();
  state->n = n;
  state->task = &task;
  const int helpers = static_cast<int>(std::min<int64_t>(threads_, n - 1));
  for (int h = 0; h < helpers; ++h) {
    impl_->pool.Schedule([state] { state->Work(); });
  }
  state->Work();
  // Every task is claimed; wait only for those still running on a helper
  // (not for helpers that have not woken up yet: they will find none left).
  while (state->done.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

std::function<void(int64_t, const std::function<void(int64_t)>&)> PackPool::AsParallelFor() {
  return [this](int64_t n, const std::function<void(int64_t)>& task) { Run(n, task); };
}

int PackPool::DefaultThreads() {
  return std::min(8, kernels::UsableCpus() / 2);
}

}  // namespace rankd::engine::cuda
