#include "kernels/cpu/embedding_pool.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "Eigen/Core"
#include "absl/types/span.h"
#include "kernels/cpu/hash_table.h"
#include "kernels/cpu/types.h"

namespace rankd::kernels {
namespace {

using FloatVec = Eigen::Map<Eigen::ArrayXf>;
using ConstFloatVec = Eigen::Map<const Eigen::ArrayXf>;

// Resolves every id of bags [0, num_bags) to a row index (kMissingRow where
// it does not resolve), indexed like bags.ids. Done up front so dynamic
// tables get the batched, prefetching hash lookup.
std::vector<int64_t> ResolveRows(const PoolTable& table, const PoolBags& bags) {
  const int64_t first = bags.offsets[0];
  const int64_t count = bags.offsets[bags.num_bags] - first;
  std::vector<int64_t> rows(count);
  const int64_t* ids = bags.ids + first;
  if (table.hash != nullptr) {
    HashLookupBatch(*table.hash, absl::MakeConstSpan(ids, count), rows.data());
    for (int64_t& r : rows) {
      // A table whose keys array outgrew its rows would be a loader bug; treat
      // its rows as missing rather than read out of bounds.
      if (r >= table.num_rows) r = kMissingRow;
    }
    if (table.scores != nullptr && table.score_policy != EvictionPolicy::kNone) {
      // The scores are a random access each: prefetch (for writing) a few
      // ids ahead, so the misses overlap (LFU's locked add would otherwise
      // wait for each one in turn).
      constexpr int64_t kPrefetch = 8;
      for (int64_t i = 0; i < count; ++i) {
#if defined(__GNUC__)
        if (i + kPrefetch < count && rows[i + kPrefetch] != kMissingRow) {
          __builtin_prefetch(table.scores + rows[i + kPrefetch], 1);
        }
#endif
        if (rows[i] != kMissingRow) {
          TouchScoreForLookup(table.scores, rows[i], table.score_policy, table.score_now);
        }
      }
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      rows[i] = (ids[i] >= 0 && ids[i] < table.num_rows) ? ids[i] : kMissingRow;
    }
  }
  return rows;
}

// Row `row` of the table as fp32 (converted into `buffer` unless the storage
// already is fp32), or the default vector / zeros when row == kMissingRow.
const float* RowAsFloat(const PoolTable& table, int64_t row, const float* zeros,
                        float* buffer) {
  if (row == kMissingRow) {
    return table.default_vector != nullptr ? table.default_vector : zeros;
  }
  const int64_t dim = table.dim;
  switch (table.row_type) {
    case RowType::kFp32:
      return static_cast<const float*>(table.rows) + row * dim;
    case RowType::kFp16: {
      const auto* src = static_cast<const Eigen::half*>(table.rows) + row * dim;
      FloatVec(buffer, dim) =
          Eigen::Map<const Eigen::Array<Eigen::half, Eigen::Dynamic, 1>>(src,
                                                                         dim)
              .cast<float>();
      return buffer;
    }
    case RowType::kBf16: {
      const auto* src =
          static_cast<const Eigen::bfloat16*>(table.rows) + row * dim;
      FloatVec(buffer, dim) =
          Eigen::Map<const Eigen::Array<Eigen::bfloat16, Eigen::Dynamic, 1>>(
              src, dim)
              .cast<float>();
      return buffer;
    }
  }
  return zeros;  // unreachable: every RowType is handled above
}

}  // namespace

int64_t PoolEmbeddings(const PoolTable& table, const PoolBags& bags, float* out,
                       int64_t out_stride) {
  if (bags.num_bags <= 0) return 0;
  const int dim = table.dim;
  const std::vector<int64_t> rows = ResolveRows(table, bags);
  const int64_t first = bags.offsets[0];
  const std::vector<float> zeros(dim, 0.0f);
  std::vector<float> buffer(dim);

  int64_t unresolved = 0;
  for (int64_t b = 0; b < bags.num_bags; ++b) {
    const int64_t begin = bags.offsets[b];
    const int64_t end = bags.offsets[b + 1];
    FloatVec acc(out + b * out_stride, dim);
    if (end <= begin) {
      acc.setZero();  // torch: an empty bag pools to zeros in every mode
      continue;
    }
    if (table.pooling == Pooling::kMax) {
      acc.setConstant(-std::numeric_limits<float>::infinity());
    } else {
      acc.setZero();
    }
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = rows[i - first];
      if (row == kMissingRow) ++unresolved;
      const float w = bags.weights != nullptr ? bags.weights[i] : 1.0f;
      const ConstFloatVec value(
          RowAsFloat(table, row, zeros.data(), buffer.data()), dim);
      if (table.pooling == Pooling::kMax) {
        acc = acc.max(w * value);
      } else {
        acc += w * value;
      }
    }
    if (table.pooling == Pooling::kMean) {
      acc /= static_cast<float>(end - begin);
    }
  }
  return unresolved;
}

float RowElementToFloat(const void* rows, RowType type, int64_t index) {
  switch (type) {
    case RowType::kFp32:
      return static_cast<const float*>(rows)[index];
    case RowType::kFp16:
      return HalfBitsToFloat(static_cast<const uint16_t*>(rows)[index]);
    case RowType::kBf16:
      return Bf16BitsToFloat(static_cast<const uint16_t*>(rows)[index]);
  }
  return 0.0f;  // unreachable
}

uint16_t FloatToHalfBits(float f) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(f));
}

uint16_t FloatToBf16Bits(float f) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f));
}

float HalfBitsToFloat(uint16_t h) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h));
}

float Bf16BitsToFloat(uint16_t h) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(h));
}

}  // namespace rankd::kernels
