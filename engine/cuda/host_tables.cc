#include "engine/cuda/host_tables.h"

#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_util.h"

namespace rankd::engine::cuda {
namespace {

constexpr unsigned kRegisterFlags = cudaHostRegisterMapped | cudaHostRegisterPortable;

int64_t PageSize() { return static_cast<int64_t>(sysconf(_SC_PAGESIZE)); }

// memcpy over all cores (a single thread moves ~10 GB/s; tables are tens of GB).
void ParallelCopy(void* dst, const void* src, int64_t bytes) {
  const int threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const int64_t chunk = (bytes + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    const int64_t begin = i * chunk;
    const int64_t n = std::min(bytes - begin, chunk);
    if (n <= 0) break;
    pool.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, n);
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace

int64_t HostAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

absl::StatusOr<std::shared_ptr<HostTables>> HostTables::Create(
    std::shared_ptr<const Model> model, const PlacementPlan& plan) {
  std::shared_ptr<HostTables> h(new HostTables());
  h->model_ = model;
  h->entries_.resize(model->tables.size());
  if (plan.tables.size() != model->tables.size()) {
    return absl::InternalError("placement plan does not match the model's tables");
  }
  // What must be copied, checked against the host's memory before any copy.
  int64_t to_copy = 0;
  const int64_t page = PageSize();
  auto in_place = [&](const EmbeddingTable& t) {
    return t.rows.size > 0 && t.rows.pinnable &&
           reinterpret_cast<uintptr_t>(t.rows.data) % page == 0;
  };
  for (size_t i = 0; i < model->tables.size(); ++i) {
    if (plan.tables[i].tier != Tier::kHost) continue;
    const EmbeddingTable& t = model->tables[i];
    if (!in_place(t)) to_copy += t.rows.size;
  }
  const int64_t available = HostAvailableBytes();
  if (to_copy > 0 && available >= 0 && to_copy > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "model \"%s\": the HOST tables need %s of pinned host memory (copied from the weights "
        "file) but the host has %s available: give the process more memory, or use init: RANDOM "
        "/ fewer HOST tables",
        model->name, FormatBytes(to_copy), FormatBytes(available)));
  }
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < model->tables.size(); ++i) {
    if (plan.tables[i].tier != Tier::kHost) continue;
    const EmbeddingTable& t = model->tables[i];
    Entry& e = h->entries_[i];
    e.bytes = t.rows.size;
    if (e.bytes == 0) continue;
    const std::string what = absl::StrCat("rows of HOST table ", t.name, " (",
                                          FormatBytes(e.bytes), ")");
    if (in_place(t)) {
      const cudaError_t err = cudaHostRegister(const_cast<uint8_t*>(t.rows.data), e.bytes,
                                               kRegisterFlags);
      if (err == cudaSuccess) {
        e.host = const_cast<uint8_t*>(t.rows.data);
        e.registered = true;
        h->pinned_bytes_ += e.bytes;
        continue;
      }
      cudaGetLastError();  // fall back to a copy
    }
    const int64_t mapped = (e.bytes + page - 1) / page * page;
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate host memory for ", what,
                                                       ": ", std::strerror(errno)));
    }
    madvise(m, mapped, MADV_HUGEPAGE);  // advice only: fine if THP is off
    e.mapping = m;
    e.mapping_bytes = mapped;
    ParallelCopy(m, t.rows.data, e.bytes);
    RANKD_RETURN_IF_CUDA_ERROR(cudaHostRegister(m, mapped, kRegisterFlags),
                               absl::StrCat("cudaHostRegister ", what));
    e.host = m;
    e.registered = true;
    h->pinned_bytes_ += e.bytes;
    h->copied_bytes_ += e.bytes;
  }
  h->copy_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return h;
}

HostTables::~HostTables() {
  for (Entry& e : entries_) {
    if (e.registered) cudaHostUnregister(e.host);
    if (e.mapping != nullptr) munmap(e.mapping, e.mapping_bytes);
  }
}

absl::StatusOr<const void*> HostTables::DevicePointer(int table) const {
  const Entry& e = entries_[table];
  if (e.host == nullptr) return nullptr;
  void* d = nullptr;
  RANKD_RETURN_IF_CUDA_ERROR(cudaHostGetDevicePointer(&d, e.host, 0),
                             absl::StrCat("device alias of HOST table ",
                                          model_->tables[table].name));
  return static_cast<const void*>(d);
}

}  // namespace rankd::engine::cuda
