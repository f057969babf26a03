#include "engine/serving/warmup.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace rankd::engine {

absl::Status WarmUp(ModelInstance& instance, const std::vector<int32_t>& candidate_counts) {
  const Model& m = instance.model();
  for (int32_t b : candidate_counts) {
    if (b <= 0) continue;
    std::vector<float> dense(static_cast<size_t>(b) * m.num_dense, 0.5f);
    std::vector<std::vector<int64_t>> ids(m.features.size());
    std::vector<std::vector<int32_t>> lengths(m.features.size());
    for (size_t f = 0; f < m.features.size(); ++f) {
      const EmbeddingTable& t = m.tables[m.features[f].table];
      const int64_t id = t.dynamic ? reinterpret_cast<const int64_t*>(t.keys.data)[0] : 0;
      const int bags = m.features[f].request_level ? 1 : b;
      ids[f].assign(bags, id);
      lengths[f].assign(bags, 1);
    }
    std::vector<float> scores(b);
    QueuedRequest item;
    item.request.num_candidates = b;
    item.request.dense = dense;
    for (size_t f = 0; f < m.features.size(); ++f) {
      item.request.features.push_back(FeatureInput{ids[f], lengths[f], {}});
    }
    item.scores = absl::MakeSpan(scores);
    absl::Notification done;
    absl::Status result;
    item.done = [&](absl::Status s, const RequestTiming&) {
      result = s;
      done.Notify();
    };
    absl::Status submitted = instance.Submit(std::move(item));
    if (!submitted.ok()) return submitted;
    done.WaitForNotification();
    if (!result.ok()) {
      return absl::Status(result.code(), absl::StrCat("warm-up of model \"", m.name, "\" version ",
                                                      m.version, " with ", b,
                                                      " candidates failed: ", result.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine
