// CPU-side checks of the cuBLASLt loader; runs in CI on machines without a
// GPU (and on GPU machines). The numerical tests are cublaslt_gpu_test.cc.
#include "kernels/cuda/cublaslt.h"

#include <cuda_runtime_api.h>
#include <pthread.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rankd::kernels::cuda {
namespace {

// True if libcublasLt is mapped into this process (linked, or dlopen'ed).
bool CublasLtMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (absl::StrContains(line, "libcublasLt")) return true;
  }
  return false;
}

// Read before main(): every NEEDED library (of the binary and of the shared
// libraries it links, transitively) is mapped by then.
const bool kMappedAtStartup = CublasLtMapped();

bool HaveGpu() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) cudaGetLastError();
  return err == cudaSuccess && n > 0;
}

TEST(CublasLtTest, NotLinked) {
  // Linked normally, cuBLASLt's 94 KB of static TLS breaks prometheus-cpp's
  // 100 KiB-stack threads (docs/build.md); it must come by dlopen.
  EXPECT_FALSE(kMappedAtStartup)
      << "libcublasLt is a NEEDED library of this test binary or of a library it "
         "links; cuBLASLt must only be loaded with dlopen (kernels/cuda/cublaslt.cc)";
}

TEST(CublasLtTest, CreateSucceedsOnGpuOrFailsWithAClearMessage) {
  absl::StatusOr<std::unique_ptr<LinearRunner>> runner = LinearRunner::Create(MathMode::kFp32);
  if (HaveGpu()) {
    ASSERT_TRUE(runner.ok()) << runner.status();
    EXPECT_EQ((*runner)->mode(), MathMode::kFp32);
    return;
  }
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition) << runner.status();
  const std::string msg(runner.status().message());
  // Either the library is missing, or (here, where it is installed) no device.
  EXPECT_TRUE(absl::StrContains(msg, "CUDA device") || absl::StrContains(msg, "libcublasLt"))
      << msg;
  if (CublasLtMapped()) {
    EXPECT_TRUE(absl::StrContains(msg, "no usable CUDA device (cudaGetDevice: ")) << msg;
  }
  // Asking again gives the same answer (the library is loaded only once).
  absl::StatusOr<std::unique_ptr<LinearRunner>> again = LinearRunner::Create(MathMode::kTf32);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), runner.status().code());
}

TEST(CublasLtTest, ConcurrentCreateIsSafe) {
  const bool gpu = HaveGpu();
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto r = LinearRunner::Create(MathMode::kFp32, /*workspace_bytes=*/1 << 20);
      (r.ok() ? ok : failed).fetch_add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), gpu ? 8 : 0);
  EXPECT_EQ(failed.load(), gpu ? 0 : 8);
}

void* Noop(void* arg) {
  static_cast<std::atomic<bool>*>(arg)->store(true);
  return nullptr;
}

TEST(CublasLtTest, SmallStackThreadsStartAfterLoading) {
  (void)LinearRunner::Create(MathMode::kFp32);  // loads the library if installed
  if (!CublasLtMapped()) GTEST_SKIP() << "libcublasLt.so.13 is not installed here";
  // What civetweb does (prometheus-cpp's Exposer): threads with 100 KiB stacks.
  // With cuBLASLt's TLS static (linked), glibc refuses them (EINVAL).
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 100 * 1024), 0);
  std::atomic<bool> ran{false};
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, &Noop, &ran);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(rc, 0) << "pthread_create with a 100 KiB stack failed: " << rc;
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace rankd::kernels::cuda
