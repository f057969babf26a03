// A loaded model version: validated config plus weights in host memory, in the
// form the backends compute with. Immutable after loading; shared read-only by
// every worker (std::shared_ptr<const Model>).
#ifndef RANKD_ENGINE_MODEL_MODEL_H_
#define RANKD_ENGINE_MODEL_MODEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/embedding_pool.h"
#include "kernels/cpu/dynamic_table.h"
#include "kernels/cpu/hash_table.h"
#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

// Bytes kept alive by `owner`. LoadModel always gives a table's rows and
// keys an allocation of their own (generated, or read from the weights
// file), never a view of a file.
struct ByteBuffer {
  const uint8_t* data = nullptr;
  int64_t size = 0;
  std::shared_ptr<const void> owner;
  // [data, data + size) is a writable, page-aligned allocation of its own
  // (everything LoadModel makes), so the CUDA backend may pin it in place for
  // placement HOST instead of copying it. False for buffers over memory the
  // buffer does not own alone (e.g. models built in memory by tests).
  bool pinnable = false;
  // The bytes are the buffer's alone and may be written: online updates
  // (engine/updates) write a table's rows and keys in place, under the
  // version's scoring gate. True for everything LoadModel makes.
  bool writable = false;
};

// A DYNAMIC table's update state besides its rows, keys (row_keys) and hash
// slots (kernels/cpu/dynamic_table.h): eviction scores, the free-row stack
// and the counters. Written only under the version's scoring gate (updates);
// scores are also touched by lookups (relaxed atomics).
struct DynamicState {
  std::vector<uint64_t> scores;    // [max_keys]
  std::vector<int64_t> free_rows;  // [max_keys]
  kernels::DynamicTableCounters counters;
};

struct EmbeddingTable {
  std::string name;
  bool dynamic = false;
  int64_t num_rows = 0;  // rows (STATIC) or stored keys (DYNAMIC)
  int dim = 0;
  kernels::RowType row_type = kernels::RowType::kFp32;
  kernels::Pooling pooling = kernels::Pooling::kSum;
  rankd::v1::Placement placement = rankd::v1::AUTO;
  // Resolved policy (never ID_POLICY_UNSPECIFIED): ERROR or ZERO.
  rankd::v1::IdPolicy id_policy = rankd::v1::ERROR;
  std::vector<float> default_vector;  // empty (zeros) or dim floats
  ByteBuffer rows;                    // [num_rows, dim] of row_type
  kernels::HashTable hash;            // DYNAMIC only: keys -> rows
  ByteBuffer keys;  // DYNAMIC only: int64 [num_rows]; keys[r] is row r's key
  // DYNAMIC only: most keys the table holds while serving (online updates
  // insert keys; >= num_rows), and which key a full table drops.
  int64_t max_keys = 0;
  rankd::v1::Eviction eviction = rankd::v1::LRU;
  // DYNAMIC tables with host hash slots (the CPU backend; AttachDynamicState):
  // what updates need to insert, erase and evict keys on the host. Null
  // otherwise (the CUDA backend keeps that state on the GPU).
  std::shared_ptr<DynamicState> live;

  kernels::EvictionPolicy eviction_policy() const {
    return eviction == rankd::v1::LFU ? kernels::EvictionPolicy::kLfu
                                      : kernels::EvictionPolicy::kLru;
  }
  // The table as the dynamic-table kernels see it (requires `live`). Its
  // pointers are writable views of this table's own memory: use them only
  // under the version's scoring gate.
  kernels::DynamicTableView dynamic_view() const;

  // Rows allocated: max_keys for a DYNAMIC table, else num_rows.
  int64_t capacity_rows() const { return dynamic ? std::max(max_keys, num_rows) : num_rows; }
  int64_t row_bytes() const {
    return static_cast<int64_t>(dim) * kernels::RowTypeBytes(row_type);
  }
  // Rows stored as fp32 (fp32 values are the rows' bytes as they are).
  bool fp32_rows() const { return row_type == kernels::RowType::kFp32; }
  // The kernel's view; `hash_view` must outlive the returned struct's use.
  // With `live` state, lookups touch the keys' eviction scores at logical
  // time `score_now` (Model::score_clock).
  kernels::PoolTable pool_view(const kernels::HashTableView* hash_view,
                               uint64_t score_now = 0) const;
};

// Gives a DYNAMIC table whose host hash slots are built (`hash`) its update
// state: row_keys beyond num_rows set to kEmptyKey, the free stack (pops give
// num_rows, num_rows + 1, ...), zero scores. The keys and rows buffers must
// hold max_keys entries and be writable. INVALID_ARGUMENT otherwise.
absl::Status AttachDynamicState(EmbeddingTable* table);

// How a table's rows got into host memory at load.
enum class TableSource {
  kFileRead,  // read from the weights file into memory of the model's own
  kRandom,    // generated: `init { kind: RANDOM }`
};
// "file (read)", "random".
const char* TableSourceName(TableSource source);

// What loading one table cost (LoadModel records one per table).
struct TableLoadStats {
  std::string table;
  TableSource source = TableSource::kFileRead;
  int64_t row_bytes = 0;
  // Producing the rows: filling them or reading them from the file.
  double rows_seconds = 0;
  // DYNAMIC tables: keys inserted, and seconds for their hash table (making
  // RANDOM keys included; a FILE table's keys are read from the file here,
  // so this includes their reads).
  int64_t hash_keys = 0;
  double hash_seconds = 0;
};

struct ModelLoadStats {
  int threads = 0;       // for fills, file reads and hash builds
  double seconds = 0;    // the whole load, config parse to ready Model
  std::vector<TableLoadStats> tables;  // config order

  int64_t RowBytes(TableSource source) const;
  double RowSeconds(TableSource source) const;
  int64_t HashKeys() const;
  double HashSeconds() const;
};

struct SparseFeature {
  std::string name;
  int table = 0;  // index into Model::tables
  bool request_level = false;
  int32_t max_ids_per_bag = 0;  // 0 = no model limit
};

struct Linear {
  int in = 0;
  int out = 0;
  std::vector<float> weight;  // [out, in]
  std::vector<float> bias;    // [out]
  kernels::LinearView view() const {
    return kernels::LinearView{weight.data(), bias.data(), in, out};
  }
};

struct CrossLayer {
  int n = 0;
  int rank = 0;
  std::vector<float> v;     // [rank, n]
  std::vector<float> w;     // [n, rank]
  std::vector<float> bias;  // [n]
  kernels::CrossLayerView view() const {
    return kernels::CrossLayerView{v.data(), w.data(), bias.data(), n, rank};
  }
};

struct Model {
  std::string name;
  int64_t version = 0;
  std::string directory;  // where it was loaded from
  // The config as read, with every defaulted field filled in (batching,
  // instances, enums), so what serves is what `rankd inspect` prints.
  rankd::v1::ModelConfig config;

  int num_dense = 0;
  std::vector<EmbeddingTable> tables;
  std::vector<SparseFeature> features;  // config order = interaction order
  std::vector<Linear> bottom;           // ReLU after each
  rankd::v1::InteractionKind interaction = rankd::v1::DOT;
  bool self_interaction = false;
  std::vector<CrossLayer> cross;        // DCN_V2 only
  int interaction_width = 0;            // top MLP input width
  std::vector<Linear> top;              // ReLU after all but last; sigmoid last

  // Width of x (bottom MLP output, or num_dense when there is no bottom MLP).
  int dense_out_width() const {
    return bottom.empty() ? num_dense : bottom.back().out;
  }
  // Host bytes of every table: rows, plus keys and hash arrays of DYNAMIC
  // tables.
  int64_t table_bytes() const;

  // Filled by LoadModel (zeros for models built in memory).
  ModelLoadStats load_stats;

  // Logical time of dynamic tables' LRU scores: each scoring batch and each
  // update takes the next value (fetch_add), so "least recently used" is
  // exact and the same on every run of the same sequence.
  std::shared_ptr<std::atomic<uint64_t>> score_clock =
      std::make_shared<std::atomic<uint64_t>>(1);

};

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_H_
