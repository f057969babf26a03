#include "engine/cuda/pack_loops.h"

#include <cstdint>

namespace rankd::engine::cuda {
namespace {

// Blocks of a fixed length: GCC's -O2 cost model vectorizes only loops with
// no scalar remainder, so each block's loop is one; the tail is scalar.
constexpr int64_t kBlock = 64;

inline int32_t NarrowId(int64_t id) {
  // id in [0, 2^31) <=> none of its upper 33 bits is set.
  return (static_cast<uint64_t>(id) >> 31) == 0 ? static_cast<int32_t>(id) : -1;
}

// The loops, inlined into a baseline and an AVX2 build of each (GCC inlines
// a function of the default target into one of a wider target).
__attribute__((always_inline)) inline void NarrowLoop(const int64_t* from, int64_t n,
                                                      int32_t* to) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (int64_t j = 0; j < kBlock; ++j) to[i + j] = NarrowId(from[i + j]);
  }
  for (; i < n; ++i) to[i] = NarrowId(from[i]);
}

__attribute__((always_inline)) inline bool AllOnesLoop(const int32_t* lengths, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t other = 0;
    for (int64_t j = 0; j < kBlock; ++j) other |= static_cast<uint32_t>(lengths[i + j]) ^ 1u;
    if (other != 0) return false;
  }
  for (; i < n; ++i) {
    if (lengths[i] != 1) return false;
  }
  return true;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void NarrowAvx2(const int64_t* from, int64_t n, int32_t* to) {
  NarrowLoop(from, n, to);
}
__attribute__((target("avx2"))) bool AllOnesAvx2(const int32_t* lengths, int64_t n) {
  return AllOnesLoop(lengths, n);
}
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

void NarrowIdsToInt32(const int64_t* from, int64_t n, int32_t* to) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2()) return NarrowAvx2(from, n, to);
#endif
  NarrowIdsToInt32Baseline(from, n, to);
}

bool AllLengthsOne(const int32_t* lengths, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2()) return AllOnesAvx2(lengths, n);
#endif
  return AllLengthsOneBaseline(lengths, n);
}

void NarrowIdsToInt32Baseline(const int64_t* from, int64_t n, int32_t* to) {
  NarrowLoop(from, n, to);
}

bool AllLengthsOneBaseline(const int32_t* lengths, int64_t n) { return AllOnesLoop(lengths, n); }

void NarrowIdsToInt32Reference(const int64_t* from, int64_t n, int32_t* to) {
  for (int64_t i = 0; i < n; ++i) {
    to[i] = from[i] >= 0 && from[i] <= INT32_MAX ? static_cast<int32_t>(from[i]) : -1;
  }
}

bool AllLengthsOneReference(const int32_t* lengths, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (lengths[i] != 1) return false;
  }
  return true;
}

}  // namespace rankd::engine::cuda
