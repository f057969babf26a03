#include "engine/serving/warmup.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace rankd::engine {
namespace {

// One synthetic request of `b` candidates and the storage its views point at.
// Every bag holds one id, or (`other_bags`) no bag does: two ids each, or
// where a feature takes at most one, alternately none and one, the first
// empty. The CUDA worker keys its graphs by whether every bag holds one id
// (CudaWorker: unit bags), so a warm-up runs both.
struct WarmRequest {
  std::vector<float> dense;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<int32_t>> lengths;
  std::vector<float> scores;
  Request request;

  WarmRequest(const Model& m, int32_t b, bool other_bags = false)
      : dense(static_cast<size_t>(b) * m.num_dense, 0.5f),
        ids(m.features.size()),
        lengths(m.features.size()),
        scores(b) {
    for (size_t f = 0; f < m.features.size(); ++f) {
      const SparseFeature& feature = m.features[f];
      const EmbeddingTable& t = m.tables[feature.table];
      // A stored key of a dynamic table (a table without keys pools its
      // default vector for any key).
      const int64_t id = t.dynamic && t.num_rows > 0
                             ? reinterpret_cast<const int64_t*>(t.keys.data)[0]
                             : 0;
      const int bags = feature.request_level ? 1 : b;
      if (!other_bags) {
        lengths[f].assign(bags, 1);
      } else if (feature.max_ids_per_bag == 1) {
        for (int k = 0; k < bags; ++k) lengths[f].push_back(k % 2);
      } else {
        lengths[f].assign(bags, 2);
      }
      int64_t total = 0;
      for (int32_t len : lengths[f]) total += len;
      ids[f].assign(total, id);
    }
    request.num_candidates = b;
    request.dense = dense;
    for (size_t f = 0; f < m.features.size(); ++f) {
      request.features.push_back(FeatureInput{ids[f], lengths[f], {}});
    }
  }
};

absl::Status WarmUpFailed(const Model& m, absl::string_view where, int32_t b,
                          const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("warm-up of model \"", m.name, "\" version ",
                                             m.version, where, " with ", b,
                                             " candidates failed: ", s.message()));
}

}  // namespace

absl::Status WarmUp(ModelInstance& instance, const std::vector<int32_t>& candidate_counts) {
  const Model& m = instance.model();
  for (int32_t b : candidate_counts) {
    if (b <= 0) continue;
    WarmRequest warm(m, b);
    QueuedRequest item;
    item.request = warm.request;
    item.scores = absl::MakeSpan(warm.scores);
    absl::Notification done;
    absl::Status result;
    item.done = [&](absl::Status s, const RequestTiming&) {
      result = s;
      done.Notify();
    };
    absl::Status submitted = instance.Submit(std::move(item));
    if (!submitted.ok()) return submitted;
    done.WaitForNotification();
    if (!result.ok()) return WarmUpFailed(m, "", b, result);
  }
  return absl::OkStatus();
}

absl::Status WarmUpWorkers(const Model& model, absl::Span<const std::unique_ptr<Worker>> workers,
                           const std::vector<int32_t>& candidate_counts) {
  for (const std::unique_ptr<Worker>& worker : workers) {
    for (int32_t b : candidate_counts) {
      if (b <= 0) continue;
      for (bool other_bags : {false, true}) {
        WarmRequest warm(model, b, other_bags);
        const Request* requests[] = {&warm.request};
        const absl::Span<float> scores[] = {absl::MakeSpan(warm.scores)};
        absl::Status s = worker->WarmUp(requests, scores);
        if (!s.ok()) {
          return WarmUpFailed(
              model,
              absl::StrCat(" on worker ", worker->name(),
                           other_bags ? " (bags of other than one id)" : ""),
              b, s);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rankd::engine
