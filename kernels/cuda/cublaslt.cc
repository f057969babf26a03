// LinearRunner over cuBLASLt, which is loaded with dlopen (see cublaslt.h for
// why). <cublasLt.h> is included for its types and enums only: every function
// is called through a pointer resolved with dlsym, so this file never makes a
// link-time reference to libcublasLt (kernels/cuda/cublaslt_test.cc checks).
//
// Layout. cuBLASLt is column-major; our matrices are row-major. A row-major
// [R, C] matrix with leading dimension ld is the column-major [C, R] matrix
// with the same ld, i.e. its transpose. So, with k = in, m = out, n = rows:
//   y  (row-major [rows, out], ld out_ld) = col-major Y^T [out, rows], ld out_ld
//   x  (row-major [rows, in],  ld in_ld)  = col-major X^T [in, rows],  ld in_ld
//   W  (row-major [out, in],   ld in)     = col-major W^T [in, out],   ld in
// and y = x W^T  <=>  Y^T = W X^T = op(A) B with
//   A = W^T as stored (layout [k=in, m=out], ld in), transa = T -> op(A) = W [m, k]
//   B = X^T as stored (layout [k=in, n=rows], ld in_ld), transb = N
//   C = D = Y^T (layout [m=out, n=rows], ld out_ld)
// The bias epilogue adds bias[i] to row i of D (cuBLASLt: "bias vector length
// must match matrix D rows count"), i.e. to output feature i: what we want.
//
// Plans. One plan per (shape, act, bias?, pointer alignments): matmul
// descriptor, four layouts, heuristic preference and the chosen algorithm.
// cuBLASLt's heuristics take pointer alignment into account (the default
// assumes 256-byte aligned A/B/C/D and reads the bias pointer's value), so the
// actual alignments of the call that creates a plan are given to the
// heuristic and stored with the plan; a later call may use a plan whose
// alignments are no stricter than its own pointers'.
#include "kernels/cuda/cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/types.h"
#include "kernels/cuda/cuda_status.h"

namespace rankd::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// The library, loaded once per process.

struct CublasLtApi {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  // Optional (only used for messages).
  decltype(&cublasLtGetStatusName) get_status_name = nullptr;
  decltype(&cublasLtGetStatusString) get_status_string = nullptr;
};

// The soname the GPU machines' loader finds; the second name is a fallback for
// machines where /usr/local/cuda is installed but not on the loader's path.
constexpr const char* kLibraryNames[] = {
    "libcublasLt.so.13",
    "/usr/local/cuda/lib64/libcublasLt.so.13",
};

absl::once_flag g_load_once;
const CublasLtApi* g_api = nullptr;  // set once, never freed
absl::Status* g_load_status = nullptr;

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
    return false;
  }
  *fn = reinterpret_cast<Fn>(sym);
  return true;
}

void LoadOnce() {
  std::string errors;
  void* lib = nullptr;
  for (const char* name : kLibraryNames) {
    // RTLD_LOCAL: nothing else in the process binds to its symbols. Never
    // dlclose'd: handles and plans may outlive any one runner.
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", err != nullptr ? err : name);
  }
  if (lib == nullptr) {
    g_load_status = new absl::Status(absl::FailedPreconditionError(
        absl::StrCat("cuBLASLt: cannot load libcublasLt.so.13 (CUDA 13 cuBLAS): ", errors)));
    return;
  }
  auto* api = new CublasLtApi;
  std::string missing;
  Resolve(lib, "cublasLtCreate", &api->create, &missing);
  Resolve(lib, "cublasLtDestroy", &api->destroy, &missing);
  Resolve(lib, "cublasLtMatmulDescCreate", &api->matmul_desc_create, &missing);
  Resolve(lib, "cublasLtMatmulDescDestroy", &api->matmul_desc_destroy, &missing);
  Resolve(lib, "cublasLtMatmulDescSetAttribute", &api->matmul_desc_set_attribute, &missing);
  Resolve(lib, "cublasLtMatrixLayoutCreate", &api->matrix_layout_create, &missing);
  Resolve(lib, "cublasLtMatrixLayoutDestroy", &api->matrix_layout_destroy, &missing);
  Resolve(lib, "cublasLtMatmulPreferenceCreate", &api->preference_create, &missing);
  Resolve(lib, "cublasLtMatmulPreferenceDestroy", &api->preference_destroy, &missing);
  Resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &api->preference_set_attribute, &missing);
  Resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &api->algo_get_heuristic, &missing);
  Resolve(lib, "cublasLtMatmul", &api->matmul, &missing);
  if (!missing.empty()) {
    delete api;
    g_load_status = new absl::Status(absl::FailedPreconditionError(
        absl::StrCat("cuBLASLt: libcublasLt.so.13 lacks symbols: ", missing)));
    return;
  }
  std::string optional_missing;  // fine: messages fall back to the number
  Resolve(lib, "cublasLtGetStatusName", &api->get_status_name, &optional_missing);
  Resolve(lib, "cublasLtGetStatusString", &api->get_status_string, &optional_missing);
  g_api = api;
  g_load_status = new absl::Status();
}

absl::StatusOr<const CublasLtApi*> LoadApi() {
  absl::call_once(g_load_once, LoadOnce);
  if (!g_load_status->ok()) return *g_load_status;
  return g_api;
}

// ---------------------------------------------------------------------------
// Messages.

std::string StatusText(const CublasLtApi& api, cublasStatus_t s) {
  std::string text;
  if (api.get_status_name != nullptr) {
    const char* name = api.get_status_name(s);
    if (name != nullptr) text = name;
  }
  if (text.empty()) text = absl::StrCat("cublasStatus_t ", static_cast<int>(s));
  if (api.get_status_string != nullptr) {
    const char* str = api.get_status_string(s);
    if (str != nullptr && *str != '\0') absl::StrAppend(&text, " (", str, ")");
  }
  return text;
}

const char* ActName(Activation act) {
  switch (act) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

const char* ModeName(MathMode mode) { return mode == MathMode::kTf32 ? "tf32" : "fp32"; }

// Largest power of two dividing the address, capped at 256 (the largest
// alignment cuBLASLt's heuristics ask about).
uint32_t Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  const uintptr_t low = a & (~a + 1);
  return low >= 256 ? 256 : static_cast<uint32_t>(low);
}

// ---------------------------------------------------------------------------
// Plans.

struct ShapeKey {
  int64_t in = 0;
  int64_t out = 0;
  int64_t in_ld = 0;
  int64_t out_ld = 0;
  int64_t rows = 0;
  Activation act = Activation::kNone;
  bool has_bias = false;
  bool bf16 = false;  // bf16 weight and input (fp32 accumulation and output)

  bool operator==(const ShapeKey& o) const {
    return in == o.in && out == o.out && in_ld == o.in_ld && out_ld == o.out_ld && rows == o.rows &&
           act == o.act && has_bias == o.has_bias && bf16 == o.bf16;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ShapeKey& k) {
    return H::combine(std::move(h), k.in, k.out, k.in_ld, k.out_ld, k.rows, k.act, k.has_bias,
                      k.bf16);
  }
};

struct Alignments {
  uint32_t a = 256;     // weight
  uint32_t b = 256;     // input
  uint32_t d = 256;     // output (C = D)
  uint32_t bias = 256;  // bias (given to the heuristic through its pointer)

  // True if an algorithm chosen for `this` works with pointers aligned `cur`.
  bool NoStricterThan(const Alignments& cur) const {
    return a <= cur.a && b <= cur.b && d <= cur.d && bias <= cur.bias;
  }
};

struct Plan {
  const CublasLtApi* api = nullptr;
  Alignments align;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  size_t algo_workspace_bytes = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (api == nullptr) return;
    if (pref != nullptr) api->preference_destroy(pref);
    if (d != nullptr) api->matrix_layout_destroy(d);
    if (b != nullptr) api->matrix_layout_destroy(b);
    if (a != nullptr) api->matrix_layout_destroy(a);
    if (desc != nullptr) api->matmul_desc_destroy(desc);
  }
};

std::string Describe(const ShapeKey& k, MathMode mode) {
  return absl::StrCat("[in=", k.in, " out=", k.out, " rows=", k.rows, " in_ld=", k.in_ld,
                      " out_ld=", k.out_ld, " act=", ActName(k.act),
                      " bias=", k.has_bias ? "yes" : "no",
                      " mode=", k.bf16 ? "bf16 (fp32 accumulation)" : ModeName(mode), "]");
}

}  // namespace

struct LinearRunner::Impl {
  const CublasLtApi* api = nullptr;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Usually one plan per shape; more only if a shape is run with pointers of
  // weaker alignment than any earlier plan allows.
  absl::flat_hash_map<ShapeKey, std::vector<std::unique_ptr<Plan>>, absl::Hash<ShapeKey>> plans;

  ~Impl() {
    plans.clear();  // descriptors before the handle
    if (handle != nullptr) api->destroy(handle);
    // cudaFree waits for the device, so no matmul still uses the workspace.
    if (workspace != nullptr) cudaFree(workspace);
  }

  absl::StatusOr<Plan*> MakePlan(const ShapeKey& k, MathMode mode, const Alignments& align,
                                 const float* bias);
};

absl::StatusOr<Plan*> LinearRunner::Impl::MakePlan(const ShapeKey& k, MathMode mode,
                                                   const Alignments& align, const float* bias) {
  const CublasLtApi& lt = *api;
  auto plan = std::make_unique<Plan>();
  plan->api = api;
  plan->align = align;
  auto check = [&](cublasStatus_t s, const char* what) -> absl::Status {
    if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cuBLASLt: ", what, " failed for linear ",
                                            Describe(k, mode), ": ", StatusText(lt, s)));
  };
#define RANKD_LT_CHECK(expr)                 \
  do {                                       \
    absl::Status st_ = check((expr), #expr); \
    if (!st_.ok()) return st_;               \
  } while (0)

  // bf16 inputs take plain 32F compute: bf16 tensor cores, fp32 accumulation.
  const cublasComputeType_t compute = mode == MathMode::kTf32 && !k.bf16
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  RANKD_LT_CHECK(lt.matmul_desc_create(&plan->desc, compute, CUDA_R_32F));
  const int32_t transa = CUBLAS_OP_T;
  const int32_t transb = CUBLAS_OP_N;
  RANKD_LT_CHECK(lt.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                              sizeof(transa)));
  RANKD_LT_CHECK(lt.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                              sizeof(transb)));
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (k.has_bias) {
    epilogue = k.act == Activation::kRelu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  } else if (k.act == Activation::kRelu) {
    epilogue = CUBLASLT_EPILOGUE_RELU;
  }
  RANKD_LT_CHECK(lt.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)));
  if (k.has_bias) {
    // The heuristic reads this pointer's value for its alignment.
    const void* bias_ptr = bias;
    RANKD_LT_CHECK(lt.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &bias_ptr, sizeof(bias_ptr)));
  }
  const cudaDataType_t in_type = k.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  RANKD_LT_CHECK(lt.matrix_layout_create(&plan->a, in_type, k.in, k.out, k.in));
  RANKD_LT_CHECK(lt.matrix_layout_create(&plan->b, in_type, k.in, k.rows, k.in_ld));
  RANKD_LT_CHECK(lt.matrix_layout_create(&plan->d, CUDA_R_32F, k.out, k.rows, k.out_ld));

  RANKD_LT_CHECK(lt.preference_create(&plan->pref));
  const uint64_t max_ws = workspace_bytes;
  RANKD_LT_CHECK(lt.preference_set_attribute(plan->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &max_ws, sizeof(max_ws)));
  RANKD_LT_CHECK(lt.preference_set_attribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &align.a, sizeof(align.a)));
  RANKD_LT_CHECK(lt.preference_set_attribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &align.b, sizeof(align.b)));
  RANKD_LT_CHECK(lt.preference_set_attribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &align.d, sizeof(align.d)));
  RANKD_LT_CHECK(lt.preference_set_attribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &align.d, sizeof(align.d)));

  constexpr int kRequested = 4;
  cublasLtMatmulHeuristicResult_t results[kRequested] = {};
  int returned = 0;
  // C = D: same layout.
  RANKD_LT_CHECK(lt.algo_get_heuristic(handle, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                       plan->pref, kRequested, results, &returned));
#undef RANKD_LT_CHECK
  const cublasLtMatmulHeuristicResult_t* chosen = nullptr;
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspace_bytes) {
      chosen = &results[i];
      break;
    }
  }
  if (chosen == nullptr) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt: no algorithm for linear ",
                                                 Describe(k, mode), " (workspace ", workspace_bytes,
                                                 " bytes; alignments A=", align.a, " B=", align.b,
                                                 " D=", align.d, " bias=", align.bias, ")"));
  }
  plan->algo = chosen->algo;
  plan->algo_workspace_bytes = chosen->workspaceSize;
  std::vector<std::unique_ptr<Plan>>& list = plans[k];
  list.push_back(std::move(plan));
  return list.back().get();
}

LinearRunner::LinearRunner(MathMode mode) : mode_(mode), impl_(std::make_unique<Impl>()) {}

LinearRunner::~LinearRunner() = default;

absl::StatusOr<std::unique_ptr<LinearRunner>> LinearRunner::Create(MathMode mode,
                                                                   size_t workspace_bytes) {
  if (mode != MathMode::kFp32 && mode != MathMode::kTf32) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearRunner: unknown MathMode ", static_cast<int>(mode)));
  }
  absl::StatusOr<const CublasLtApi*> api = LoadApi();
  if (!api.ok()) return api.status();

  int device = -1;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it: it is reported here
    return absl::FailedPreconditionError(
        absl::StrCat("LinearRunner: no usable CUDA device (cudaGetDevice: ", CudaErrorText(err),
                     ")"));
  }

  std::unique_ptr<LinearRunner> runner(new LinearRunner(mode));
  Impl& impl = *runner->impl_;
  impl.api = *api;
  const cublasStatus_t s = impl.api->create(&impl.handle);
  if (s != CUBLAS_STATUS_SUCCESS) {
    impl.handle = nullptr;
    return absl::InternalError(absl::StrCat("LinearRunner: cublasLtCreate failed on device ",
                                            device, ": ", StatusText(*impl.api, s)));
  }
  if (workspace_bytes > 0) {
    err = cudaMalloc(&impl.workspace, workspace_bytes);
    if (err != cudaSuccess) {
      impl.workspace = nullptr;
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("LinearRunner: cudaMalloc of a ", workspace_bytes,
                       "-byte cuBLASLt workspace on device ", device, ": ", CudaErrorText(err)));
    }
  }
  impl.workspace_bytes = workspace_bytes;
  return runner;
}

// One GEMM's operands, fp32 or bf16 (the element size tells the overlap check
// where the input ends).
struct LinearRunner::Operands {
  ShapeKey key;
  const void* weight = nullptr;
  const float* bias = nullptr;
  const void* in = nullptr;
  size_t in_elem_bytes = 4;
  float* out = nullptr;
};

absl::Status LinearRunner::Run(const DeviceLinear& layer, const float* in, int64_t in_ld,
                               int64_t rows, Activation act, float* out, int64_t out_ld,
                               cudaStream_t stream) {
  Operands op;
  op.key = {layer.in, layer.out, in_ld, out_ld, rows, act, layer.bias != nullptr, false};
  op.weight = layer.weight;
  op.bias = layer.bias;
  op.in = in;
  op.out = out;
  return RunOperands(op, stream);
}

absl::Status LinearRunner::RunBf16(const DeviceLinearBf16& layer, const uint16_t* in,
                                   int64_t in_ld, int64_t rows, Activation act, float* out,
                                   int64_t out_ld, cudaStream_t stream) {
  Operands op;
  op.key = {layer.in, layer.out, in_ld, out_ld, rows, act, layer.bias != nullptr, true};
  op.weight = layer.weight;
  op.bias = layer.bias;
  op.in = in;
  op.in_elem_bytes = 2;
  op.out = out;
  return RunOperands(op, stream);
}

absl::Status LinearRunner::RunOperands(const Operands& op, cudaStream_t stream) {
  const ShapeKey& key = op.key;
  const int64_t rows = key.rows;
  if (key.in <= 0 || key.out <= 0 || rows < 0 || key.in_ld < key.in || key.out_ld < key.out) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearRunner::Run: bad shape ", Describe(key, mode_),
                     " (need in, out >= 1, rows >= 0, in_ld >= in, out_ld >= out)"));
  }
  if (key.act != Activation::kNone && key.act != Activation::kRelu) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearRunner::Run: activation ", ActName(key.act),
                     " not supported (kNone or kRelu; the "
                     "final sigmoid layer is LaunchFinalLogitSigmoid) for ",
                     Describe(key, mode_)));
  }
  if (rows == 0) return absl::OkStatus();
  if (op.weight == nullptr || op.in == nullptr || op.out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearRunner::Run: null weight, input or output pointer for ", Describe(key, mode_)));
  }
  // out may not overlap in (cuBLASLt does not compute in place).
  const auto* in_begin = static_cast<const char*>(op.in);
  const auto* in_end = in_begin + op.in_elem_bytes * ((rows - 1) * key.in_ld + key.in);
  const auto* out_begin = reinterpret_cast<const char*>(op.out);
  const auto* out_end = reinterpret_cast<const char*>(op.out + (rows - 1) * key.out_ld + key.out);
  if (in_begin < out_end && out_begin < in_end) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearRunner::Run: output overlaps input for ", Describe(key, mode_)));
  }

  Impl& impl = *impl_;
  const CublasLtApi& lt = *impl.api;
  const Alignments align{Alignment(op.weight), Alignment(op.in), Alignment(op.out),
                         Alignment(op.bias)};
  Plan* plan = nullptr;
  auto it = impl.plans.find(key);
  if (it != impl.plans.end()) {
    for (const std::unique_ptr<Plan>& p : it->second) {
      if (p->align.NoStricterThan(align)) {
        plan = p.get();
        break;
      }
    }
  }
  if (plan == nullptr) {
    // Plans are made outside stream capture only (heuristic queries are not
    // meant to be captured, and the first matmul of an algorithm may load its
    // kernel module): callers run each shape once before capturing.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(stream, &capture);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::InternalError(absl::StrCat("LinearRunner::Run: cudaStreamIsCapturing for ",
                                              Describe(key, mode_), ": ", CudaErrorText(err)));
    }
    if (capture != cudaStreamCaptureStatusNone) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LinearRunner::Run: no plan for ", Describe(key, mode_), " with pointer alignments W=",
          align.a, " in=", align.b, " out=", align.d, " bias=", align.bias,
          " while the stream is capturing; run this shape once before capturing"));
    }
    absl::StatusOr<Plan*> made = impl.MakePlan(key, mode_, align, op.bias);
    if (!made.ok()) return made.status();
    plan = *made;
  }

  if (op.bias != nullptr) {
    const void* bias_ptr = op.bias;
    const cublasStatus_t s = lt.matmul_desc_set_attribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    if (s != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cuBLASLt: setting the bias pointer failed for ",
                                              Describe(key, mode_), ": ", StatusText(lt, s)));
    }
  }
  // Host scalars: read when the call is made (or captured), so they can be
  // locals.
  const float alpha = 1.0f;
  const float beta = 0.0f;  // C is not read when beta == 0
  const cublasStatus_t s =
      lt.matmul(impl.handle, plan->desc, &alpha, op.weight, plan->a, op.in, plan->b, &beta, op.out,
                plan->d, op.out, plan->d, &plan->algo, impl.workspace, impl.workspace_bytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuBLASLt: cublasLtMatmul failed for linear ",
                                            Describe(key, mode_), ": ", StatusText(lt, s)));
  }
  return absl::OkStatus();
}

}  // namespace rankd::kernels::cuda
