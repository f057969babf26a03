// Default values of model.pbtxt fields (documented in model_config.proto).
#ifndef RANKD_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_
#define RANKD_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_

#include "rankd/v1/model_config.pb.h"

namespace rankd::engine {

inline constexpr int32_t kDefaultMaxBatchCandidates = 4096;
// 0: a free worker takes whatever is queued at once (as Triton's default); under
// load requests queue while workers are busy, so batches still form, and an
// idle server adds no delay. Set a delay to trade latency for bigger batches.
inline constexpr int64_t kDefaultMaxQueueDelayUs = 0;
inline constexpr int32_t kDefaultMaxQueueRequests = 1024;
inline constexpr int64_t kDefaultTimeoutUs = 10'000'000;

// Replaces every "0 = default" value (unspecified enums, zero batching values,
// zero DYNAMIC capacity) by what it stands for, so the config that serves
// states everything explicitly. Leaves invalid values (negative, unknown enum
// numbers) alone for validation to report. Instance counts stay 0
// ("automatic"): they depend on the machine, not the model.
void FillModelConfigDefaults(rankd::v1::ModelConfig* config);

// Smallest power of two >= 2 * num_rows (load factor <= 0.5); 0 when
// num_rows <= 0 or the result would not fit.
int64_t DefaultDynamicCapacity(int64_t num_rows);

}  // namespace rankd::engine

#endif  // RANKD_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_
