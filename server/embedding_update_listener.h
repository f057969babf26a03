// What the server's observers (metrics) see of applied embedding updates.
#ifndef RANKD_SERVER_EMBEDDING_UPDATE_LISTENER_H_
#define RANKD_SERVER_EMBEDDING_UPDATE_LISTENER_H_

#include <cstdint>
#include <string>

#include "engine/updates/table_delta.h"

namespace rankd::server {

// What the metrics observe of applied updates. No-op defaults.
class EmbeddingUpdateListener {
 public:
  virtual ~EmbeddingUpdateListener() = default;
  // One message applied to one version's table. `lag_seconds` < 0: the
  // producer sent no timestamp.
  virtual void OnUpdateApplied(const std::string& model, const std::string& table,
                               const engine::DeltaResult& result, double lag_seconds) {}
  // A dynamic table's key count after an update.
  virtual void OnDynamicTableKeys(const std::string& model, const std::string& table,
                                  int64_t keys, int64_t max_keys) {}
};

}  // namespace rankd::server

#endif  // RANKD_SERVER_EMBEDDING_UPDATE_LISTENER_H_
