// The narrow-MLP kernel (kernels/cuda/narrow_mlp.h) against cuBLASLt's TF32
// GEMMs, one layer each, for the same chain of layers on the same inputs.
// Each variant is captured into a CUDA graph of --reps back-to-back runs of
// the chain (each run reading the previous one's input buffer, so they
// depend on each other like the layers of a forward), replayed --iters times
// after a warm-up; the figure is the median replay over --reps, in us.
//
//   narrow_mlp_bench --widths 256,64,16 --rows 256,2048,4096
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
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
#include "kernels/cuda/narrow_mlp.h"

ABSL_FLAG(std::string, widths, "256,64,16", "the chain: input width, then each layer's output");
ABSL_FLAG(std::string, rows, "256,2048,4096", "row counts to time");
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

float* DeviceRandom(size_t n, std::mt19937_64* rng) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
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
  enqueue(0);  // once outside the capture: cuBLASLt makes its plans there
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < reps; ++r) enqueue(r);
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

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<int> widths = ParseList(absl::GetFlag(FLAGS_widths));
  const std::vector<int> row_counts = ParseList(absl::GetFlag(FLAGS_rows));
  const int reps = absl::GetFlag(FLAGS_reps), iters = absl::GetFlag(FLAGS_iters);
  const int layers = static_cast<int>(widths.size()) - 1;
  if (layers < 1 || layers > kc::kNarrowMlpMaxLayers || reps < 1 || iters < 1) {
    std::fprintf(stderr, "need 2 to %d widths, reps and iters >= 1\n", kc::kNarrowMlpMaxLayers + 1);
    return 2;
  }
  std::mt19937_64 rng(7);
  std::vector<kc::DeviceLinear> linear(layers);
  kc::NarrowMlpArgs chain;
  chain.num_layers = layers;
  int widest = 0;
  for (int i = 0; i < layers; ++i) {
    linear[i] = kc::DeviceLinear{DeviceRandom(static_cast<size_t>(widths[i]) * widths[i + 1], &rng),
                                 DeviceRandom(widths[i + 1], &rng), widths[i], widths[i + 1]};
    chain.layers[i] = kc::NarrowLayer{linear[i].weight, linear[i].bias, widths[i], widths[i + 1]};
  }
  for (int w : widths) widest = std::max(widest, w);
  if (!kc::NarrowMlpFits(chain.layers, layers)) {
    std::fprintf(stderr, "the narrow-MLP kernel does not take this chain\n");
    return 2;
  }
  auto runner = kc::LinearRunner::Create(kc::MathMode::kTf32);
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
    return 2;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int max_rows = 0;
  for (int r : row_counts) max_rows = std::max(max_rows, r);
  // x, and the ping-pong buffers the layers write; a run's output feeds the next run.
  float* buf[3];
  for (float*& b : buf) b = DeviceRandom(static_cast<size_t>(max_rows) * widest, &rng);

  for (int rows : row_counts) {
    const double cublas_us = TimeGraph(stream, reps, iters, [&](int) {
      const float* in = buf[0];
      for (int i = 0; i < layers; ++i) {
        float* out = buf[1 + i % 2];
        absl::Status s = (*runner)->Run(linear[i], in, widths[i], rows,
                                        rankd::kernels::Activation::kRelu, out, widths[i + 1],
                                        stream);
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.ToString().c_str());
          std::exit(2);
        }
        in = out;
      }
    });
    double narrow_us[2];
    for (int chained = 0; chained < 2; ++chained) {
      narrow_us[chained] = TimeGraph(stream, reps, iters, [&](int r) {
        kc::NarrowMlpArgs a = chain;
        a.x = buf[0];
        a.x_ld = widths[0];
        a.rows = rows;
        a.y = buf[1 + r % 2];
        a.y_ld = widths.back();
        CHECK_CUDA(kc::LaunchNarrowMlp(a, chained == 1 && r > 0, stream));
      });
    }
    std::printf("RESULT widths=%s rows=%d cublas_us=%.2f narrow_us=%.2f narrow_chained_us=%.2f\n",
                absl::GetFlag(FLAGS_widths).c_str(), rows, cublas_us, narrow_us[0], narrow_us[1]);
  }
  return 0;
}
