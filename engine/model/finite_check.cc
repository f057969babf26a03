#include "engine/model/finite_check.h"

#include <cstring>

namespace rankd::engine {
namespace {

// Branch-free scan of blocks (vectorizes), then the exact index in the first
// block that has one: tables are almost always clean, so the common case is
// one pass with no early exit.
template <typename Bits>
int64_t FindExponentAllOnes(const uint8_t* data, int64_t n, Bits mask) {
  constexpr int64_t kBlock = 1024;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = begin + kBlock < n ? begin + kBlock : n;
    uint32_t bad = 0;
    for (int64_t i = begin; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, data + i * sizeof(Bits), sizeof(Bits));
      bad |= static_cast<uint32_t>((bits & mask) == mask);
    }
    if (bad == 0) continue;
    for (int64_t i = begin; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, data + i * sizeof(Bits), sizeof(Bits));
      if ((bits & mask) == mask) return i;
    }
  }
  return -1;
}

}  // namespace

int64_t FindNonFinite(kernels::RowType type, const void* data, int64_t elements) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  switch (type) {
    case kernels::RowType::kFp32:
      return FindExponentAllOnes<uint32_t>(p, elements, 0x7F800000u);
    case kernels::RowType::kFp16:
      return FindExponentAllOnes<uint16_t>(p, elements, uint16_t{0x7C00});
    case kernels::RowType::kBf16:
      return FindExponentAllOnes<uint16_t>(p, elements, uint16_t{0x7F80});
  }
  return -1;
}

}  // namespace rankd::engine
