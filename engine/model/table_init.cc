#include "engine/model/table_init.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/hash_table.h"

namespace rankd::engine {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kMask63 = (uint64_t{1} << 63) - 1;

inline uint64_t Mix(uint64_t x) {
  return kernels::HashKey(static_cast<int64_t>(x));
}

inline uint64_t RowSeed(uint64_t stream, int64_t row) {
  return Mix(stream + (static_cast<uint64_t>(row) + 1) * kGolden);
}

inline float Unit(uint64_t row_seed, int64_t col) {
  const uint64_t u = Mix(row_seed + (static_cast<uint64_t>(col) + 1) * kGolden);
  // 23 bits: (k + 0.5) / 2^22 - 1 is exact in float for every k < 2^23.
  return static_cast<float>(static_cast<double>(u >> 41) * (1.0 / 4194304.0) +
                            (0.5 / 4194304.0) - 1.0);
}

// A bijection of [0, 2^63): xor-shifts and odd multiplications mod 2^63
// (murmur3's fmix64 constants, so it shares nothing with HashKey, which
// places keys in the hash table: keys must not line up with their buckets).
inline uint64_t Permute63(uint64_t x) {
  x &= kMask63;
  x ^= x >> 32;
  x = (x * 0xff51afd7ed558ccdULL) & kMask63;
  x ^= x >> 29;
  x = (x * 0xc4ceb9fe1a85ec53ULL) & kMask63;
  x ^= x >> 32;
  return x;
}

// Writes a row's `dim` values, scale * Unit(seed, c), as T by `convert`
// (float -> T) at `dst`; returns the end of the row.
template <typename T, typename Convert>
uint8_t* FillRow(uint64_t seed, float scale, int dim, Convert convert,
                 uint8_t* dst) {
  T* out = reinterpret_cast<T*>(dst);
  for (int c = 0; c < dim; ++c) out[c] = convert(scale * Unit(seed, c));
  return dst + static_cast<size_t>(dim) * sizeof(T);
}

}  // namespace

uint64_t RandomTableStream(uint64_t seed, absl::string_view table_name) {
  uint64_t h = Mix(seed + kGolden);
  for (char c : table_name) h = Mix(h ^ static_cast<uint8_t>(c));
  return h;
}

float RandomTableUnit(uint64_t stream, int64_t row, int64_t col) {
  return Unit(RowSeed(stream, row), col);
}

int64_t RandomTableKey(uint64_t stream, int64_t row) {
  const uint64_t offset = Mix(stream ^ 0x6b6579ULL) >> 1;
  return static_cast<int64_t>(
      Permute63((static_cast<uint64_t>(row) + offset) & kMask63));
}

float DefaultRandomInitScale(int64_t num_rows) {
  return num_rows > 0
             ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(num_rows)))
             : 0.0f;
}

void FillRandomRows(uint64_t stream, float scale, int dim,
                    kernels::RowType type, int64_t row_begin, int64_t row_end,
                    uint8_t* dst) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint64_t seed = RowSeed(stream, r);
    switch (type) {
      case kernels::RowType::kFp32:
        dst = FillRow<float>(seed, scale, dim, [](float v) { return v; }, dst);
        break;
      case kernels::RowType::kFp16:
        dst = FillRow<uint16_t>(
            seed, scale, dim,
            [](float v) { return kernels::FloatToHalfBits(v); }, dst);
        break;
      case kernels::RowType::kBf16:
        dst = FillRow<uint16_t>(
            seed, scale, dim,
            [](float v) { return kernels::FloatToBf16Bits(v); }, dst);
        break;
    }
  }
}

void FillRandomKeys(uint64_t stream, int64_t row_begin, int64_t row_end,
                    int64_t* dst) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    dst[r - row_begin] = RandomTableKey(stream, r);
  }
}

}  // namespace rankd::engine
