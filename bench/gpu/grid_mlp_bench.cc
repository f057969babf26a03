// The grid MLP (kernels/cuda/grid_mlp.h) against cuBLASLt's TF32 GEMMs, one
// layer each, for the same chain of ReLU layers on the same inputs. Each
// variant is captured into a CUDA graph of --reps back-to-back runs of the
// chain (each run reading the same input, writing the same buffers, so they
// depend on each other like the layers of a forward), replayed --iters times
// after a warm-up; the figure is the median replay over --reps, in us. The
// last layer's outputs of both are compared (max |diff| / max |cuBLASLt|).
//
//   grid_mlp_bench --widths 16,512,256,64,16 --rows 256,2048,16384
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/check_cuda.h"
#include "bench/median.h"
#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/grid_mlp.h"

ABSL_FLAG(std::string, widths, "16,512,256,64,16",
          "the chain: input width, then each layer's output");
ABSL_FLAG(std::string, rows, "256,2048,4096,16384", "row counts to time");
ABSL_FLAG(int, reps, 20, "runs of the chain per graph");
ABSL_FLAG(int, iters, 50, "timed graph replays (after 5 untimed)");

namespace {

namespace kc = rankd::kernels::cuda;

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      std::fprintf(stderr, "bad number '%s' in '%s'\n", std::string(part).c_str(), text.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

float* DeviceRandom(size_t n, float scale, std::mt19937_64* rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> h(n);
  for (float& v : h) v = u(*rng);
  float* d = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

// Median us per run of the chain: `enqueue` adds one run to the stream.
template <typename Enqueue>
double TimeGraph(cudaStream_t stream, int reps, int iters, Enqueue enqueue) {
  enqueue();  // once outside the capture: cuBLASLt makes its plans there
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < reps; ++r) enqueue();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int i = 0; i < 5 + iters; ++i) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 5) us.push_back(1000.0 * ms / reps);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return rankd::bench::Median(us);
}

std::vector<float> ToHost(const float* d, size_t n) {
  std::vector<float> h(n);
  CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<int> widths = ParseList(absl::GetFlag(FLAGS_widths));
  const std::vector<int> row_counts = ParseList(absl::GetFlag(FLAGS_rows));
  const int reps = absl::GetFlag(FLAGS_reps), iters = absl::GetFlag(FLAGS_iters);
  const int layers = static_cast<int>(widths.size()) - 1;
  if (layers < 1 || layers > kc::kGridMlpMaxLayers || reps < 1 || iters < 1) {
    std::fprintf(stderr, "need 2 to %d widths, reps and iters >= 1\n", kc::kGridMlpMaxLayers + 1);
    return 2;
  }
  std::mt19937_64 rng(7);
  std::vector<kc::DeviceLinear> linear(layers);
  for (int i = 0; i < layers; ++i) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(widths[i]));
    linear[i] = kc::DeviceLinear{
        DeviceRandom(static_cast<size_t>(widths[i]) * widths[i + 1], scale, &rng),
        DeviceRandom(widths[i + 1], scale, &rng), widths[i], widths[i + 1]};
  }
  auto runner = kc::LinearRunner::Create(kc::MathMode::kTf32);
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
    return 2;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int max_rows = *std::max_element(row_counts.begin(), row_counts.end());
  float* x = DeviceRandom(static_cast<size_t>(max_rows) * widths[0], 1.0f, &rng);
  std::vector<float*> out(layers);
  for (int i = 0; i < layers; ++i) {
    out[i] = DeviceRandom(static_cast<size_t>(max_rows) * widths[i + 1], 1.0f, &rng);
  }
  std::printf("%8s %12s %12s %8s %10s\n", "rows", "cublaslt_us", "grid_mlp_us", "ratio",
              "max_diff");
  for (int rows : row_counts) {
    auto run_cublas = [&] {
      const float* in = x;
      for (int i = 0; i < layers; ++i) {
        absl::Status s = (*runner)->Run(linear[i], in, widths[i], rows,
                                        rankd::kernels::Activation::kRelu, out[i], widths[i + 1],
                                        stream);
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.ToString().c_str());
          std::exit(2);
        }
        in = out[i];
      }
    };
    kc::GridMlpArgs a;
    a.x = x;
    a.x_ld = widths[0];
    a.rows = rows;
    a.num_layers = layers;
    for (int i = 0; i < layers; ++i) {
      a.layer[i] = kc::GridMlpLayer{linear[i].weight, linear[i].bias, widths[i], widths[i + 1],
                                    /*relu=*/true, out[i], widths[i + 1]};
    }
    if (!kc::GridMlpFits(a)) {
      std::fprintf(stderr, "the grid MLP does not take this chain\n");
      return 2;
    }
    auto run_grid = [&] { CHECK_CUDA(kc::LaunchGridMlp(a, stream)); };
    const size_t n = static_cast<size_t>(rows) * widths.back();
    run_cublas();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const std::vector<float> want = ToHost(out.back(), n);
    run_grid();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const std::vector<float> got = ToHost(out.back(), n);
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    }
    const double cublas_us = TimeGraph(stream, reps, iters, run_cublas);
    const double grid_us = TimeGraph(stream, reps, iters, run_grid);
    std::printf("%8d %12.2f %12.2f %8.2f %10.2e\n", rows, cublas_us, grid_us, grid_us / cublas_us,
                diff / scale);
  }
  return 0;
}
