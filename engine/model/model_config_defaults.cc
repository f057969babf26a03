#include "engine/model/model_config_defaults.h"

#include "engine/model/table_init.h"

namespace rankd::engine {

int64_t DefaultDynamicCapacity(int64_t num_rows) {
  if (num_rows <= 0 || num_rows > (int64_t{1} << 61)) return 0;
  int64_t capacity = 1;
  while (capacity < 2 * num_rows) capacity <<= 1;
  return capacity;
}

namespace {

void FillTableDefaults(rankd::v1::TableConfig* t) {
  if (t->kind() == rankd::v1::TABLE_KIND_UNSPECIFIED) {
    t->set_kind(rankd::v1::STATIC);
  }
  if (t->dtype() == rankd::v1::DATA_TYPE_UNSPECIFIED) {
    t->set_dtype(rankd::v1::FP32);
  }
  if (t->pooling() == rankd::v1::POOLING_MODE_UNSPECIFIED) {
    t->set_pooling(rankd::v1::SUM);
  }
  if (t->placement() == rankd::v1::PLACEMENT_UNSPECIFIED) {
    t->set_placement(rankd::v1::AUTO);
  }
  if (t->id_policy() == rankd::v1::ID_POLICY_UNSPECIFIED) {
    // New keys are the normal case for a DYNAMIC table; an out-of-range id of
    // a STATIC table is a client bug worth failing loudly.
    t->set_id_policy(t->kind() == rankd::v1::DYNAMIC ? rankd::v1::ZERO
                                                     : rankd::v1::ERROR);
  }
  if (t->kind() == rankd::v1::DYNAMIC) {
    // A table that is not given room to grow keeps its loaded key count.
    if (t->max_keys() == 0) t->set_max_keys(t->num_rows());
    if (t->eviction() == rankd::v1::EVICTION_UNSPECIFIED) t->set_eviction(rankd::v1::LRU);
    if (t->capacity() == 0) t->set_capacity(DefaultDynamicCapacity(t->max_keys()));
  }
  rankd::v1::TableInit* init = t->mutable_init();
  if (init->kind() == rankd::v1::TABLE_INIT_KIND_UNSPECIFIED) {
    init->set_kind(rankd::v1::FILE);
  }
  // Filled in so the scale that serves is the one `rankd inspect` shows.
  if (init->kind() == rankd::v1::RANDOM && init->scale() == 0 &&
      t->num_rows() > 0) {
    init->set_scale(DefaultRandomInitScale(t->num_rows()));
  }
}

void FillBatchingDefaults(rankd::v1::BatchingConfig* b) {
  if (b->max_batch_candidates() == 0) {
    b->set_max_batch_candidates(kDefaultMaxBatchCandidates);
  }
  if (b->max_queue_delay_us() == 0) {
    b->set_max_queue_delay_us(kDefaultMaxQueueDelayUs);
  }
  if (b->preferred_batch_candidates() == 0) {
    b->set_preferred_batch_candidates(b->max_batch_candidates());
  }
  if (b->max_queue_requests() == 0) {
    b->set_max_queue_requests(kDefaultMaxQueueRequests);
  }
  if (b->default_timeout_us() == 0) b->set_default_timeout_us(kDefaultTimeoutUs);
}

}  // namespace

void FillModelConfigDefaults(rankd::v1::ModelConfig* config) {
  for (rankd::v1::TableConfig& t : *config->mutable_tables()) {
    FillTableDefaults(&t);
  }
  rankd::v1::InteractionConfig* interaction = config->mutable_interaction();
  if (interaction->kind() == rankd::v1::INTERACTION_KIND_UNSPECIFIED) {
    interaction->set_kind(rankd::v1::DOT);
  }
  FillBatchingDefaults(config->mutable_batching());
  // Present (empty) so printing the config shows the section exists.
  config->mutable_instances();
}

}  // namespace rankd::engine
