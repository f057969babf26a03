#include "loadtest/server_drain.h"

#include <algorithm>

namespace rankd::loadtest {

ServerLoad LoadFromMetrics(const PromSnapshot& metrics) {
  ServerLoad load;
  load.finished = metrics.Sum("rankd_requests_total");
  load.queued = metrics.Sum("rankd_queue_requests");
  return load;
}

DrainResult WaitForIdle(const std::function<absl::StatusOr<ServerLoad>()>& probe,
                        const DrainOptions& options,
                        const std::function<void(absl::Duration)>& sleep) {
  DrainResult result;
  absl::StatusOr<ServerLoad> first = probe();
  if (!first.ok()) {
    result.probe_status = first.status();
    return result;
  }
  ServerLoad last = *first;
  while (result.waited < options.max_wait) {
    const absl::Duration step = std::min(options.poll, options.max_wait - result.waited);
    sleep(step);
    result.waited += step;
    absl::StatusOr<ServerLoad> now = probe();
    if (!now.ok()) {
      result.probe_status = now.status();
      return result;
    }
    result.finished_while_waiting = now->finished - first->finished;
    if (now->finished == last.finished && now->queued <= 0) {
      result.idle = true;
      return result;
    }
    last = *now;
  }
  return result;
}

}  // namespace rankd::loadtest
