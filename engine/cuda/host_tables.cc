#include "engine/cuda/host_tables.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_util.h"
#include "engine/model/host_memory.h"
#include "kernels/cpu/parallel.h"

namespace rankd::engine::cuda {
namespace {

constexpr unsigned kRegisterFlags = cudaHostRegisterMapped | cudaHostRegisterPortable;

int64_t PageSize() { return static_cast<int64_t>(sysconf(_SC_PAGESIZE)); }

// memcpy over all cores (a single thread moves ~10 GB/s; tables are tens of GB).
void ParallelCopy(void* dst, const void* src, int64_t bytes) {
  kernels::ParallelChunks(bytes, int64_t{64} << 20, 0, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                end - begin);
  });
}

// Pins [p, p + bytes) in pieces of kRegisterPiece. Pinning tens of GB in one
// cudaHostRegister (or unpinning it) holds the driver for seconds, and the
// workers of versions already serving on the GPU stall behind it (a new
// version loads while the old one serves); between pieces they get through.
// With unified addressing the GPU alias of registered memory is its host
// address, so the pieces read as one range; where it is not (checked on the
// first piece), the range is registered whole.
constexpr int64_t kRegisterPiece = int64_t{256} << 20;

cudaError_t RegisterInPieces(void* p, int64_t bytes, std::vector<void*>* pieces) {
  char* base = static_cast<char*>(p);
  for (int64_t done = 0; done < bytes; done += kRegisterPiece) {
    const int64_t n = std::min(kRegisterPiece, bytes - done);
    const cudaError_t err = cudaHostRegister(base + done, n, kRegisterFlags);
    if (err != cudaSuccess) {
      for (void* q : *pieces) cudaHostUnregister(q);
      pieces->clear();
      return err;
    }
    pieces->push_back(base + done);
    if (done == 0 && n < bytes) {
      void* alias = nullptr;
      if (cudaHostGetDevicePointer(&alias, base, 0) != cudaSuccess || alias != base) {
        cudaGetLastError();
        cudaHostUnregister(base);
        pieces->clear();
        const cudaError_t whole = cudaHostRegister(base, bytes, kRegisterFlags);
        if (whole == cudaSuccess) pieces->push_back(base);
        return whole;
      }
    }
  }
  return cudaSuccess;
}

}  // namespace

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
  if (to_copy > 0) {
    absl::StatusOr<AvailableHostMemory> available = ReadAvailableHostMemory();
    if (available.ok()) {
      absl::Status s = CheckHostMemory(
          to_copy, available->bytes,
          absl::StrCat("model \"", model->name,
                       "\": pinned copies of its HOST tables (rows not in a pinnable allocation of their own)"),
          available->source);
      if (!s.ok()) return s;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < model->tables.size(); ++i) {
    if (plan.tables[i].tier != Tier::kHost) continue;
    const EmbeddingTable& t = model->tables[i];
    Entry& e = h->entries_[i];
    e.bytes = t.rows.size;
    if (e.bytes == 0) continue;
    const std::string what = absl::StrCat("rows of HOST table ", t.name, " (",
                                          HumanBytes(e.bytes), ")");
    if (in_place(t)) {
      const cudaError_t err =
          RegisterInPieces(const_cast<uint8_t*>(t.rows.data), e.bytes, &e.pieces);
      if (err == cudaSuccess) {
        e.host = const_cast<uint8_t*>(t.rows.data);
        e.registered = true;
        h->pinned_bytes_ += e.bytes;
        continue;
      }
      cudaGetLastError();  // fall back to a copy
    }
    // A huge-page-advised anonymous mapping of our own (host_memory.h).
    absl::StatusOr<HostAllocation> a = AllocateHostBytes(e.bytes, what);
    if (!a.ok()) return a.status();
    e.copy = std::make_unique<HostAllocation>(*std::move(a));
    void* m = e.copy->data();
    ParallelCopy(m, t.rows.data, e.bytes);
    RANKD_RETURN_IF_CUDA_ERROR(RegisterInPieces(m, e.bytes, &e.pieces),
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
    for (void* piece : e.pieces) cudaHostUnregister(piece);
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
