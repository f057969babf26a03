#include "engine/model/model.h"

namespace rankd::engine {

kernels::PoolTable EmbeddingTable::pool_view(
    const kernels::HashTableView* hash_view) const {
  kernels::PoolTable t;
  t.rows = rows.data;
  t.row_type = row_type;
  t.num_rows = num_rows;
  t.dim = dim;
  t.pooling = pooling;
  // A STATIC table must never be given a hash view: the kernel would treat
  // its ids as keys.
  t.hash = dynamic ? hash_view : nullptr;
  t.default_vector = default_vector.empty() ? nullptr : default_vector.data();
  return t;
}

int64_t Model::table_bytes() const {
  int64_t bytes = 0;
  for (const EmbeddingTable& t : tables) {
    bytes += t.rows.size;
    if (t.dynamic) bytes += t.keys.size + t.hash.bytes();
  }
  return bytes;
}

const char* TableSourceName(TableSource source) {
  switch (source) {
    case TableSource::kFileRead:
      return "file (read)";
    case TableSource::kRandom:
      return "random";
  }
  return "?";
}

int64_t ModelLoadStats::RowBytes(TableSource source) const {
  int64_t bytes = 0;
  for (const TableLoadStats& t : tables) {
    if (t.source == source) bytes += t.row_bytes;
  }
  return bytes;
}

double ModelLoadStats::RowSeconds(TableSource source) const {
  double seconds = 0;
  for (const TableLoadStats& t : tables) {
    if (t.source == source) seconds += t.rows_seconds;
  }
  return seconds;
}

int64_t ModelLoadStats::HashKeys() const {
  int64_t keys = 0;
  for (const TableLoadStats& t : tables) keys += t.hash_keys;
  return keys;
}

double ModelLoadStats::HashSeconds() const {
  double seconds = 0;
  for (const TableLoadStats& t : tables) seconds += t.hash_seconds;
  return seconds;
}

}  // namespace rankd::engine
