#include "loadtest/driver/server_drain.h"

#include <algorithm>

namespace rankd::loadtest {

ServerLoad LoadFromMetrics(const PromSnapshot& metrics) {
  ServerLoad load;
  load.finished = metrics.Sum("rankd_requests_total");
  load.queued = metrics.Sum("rankd_queue_requests");
  return load;
}

DrainResult WaitForIdle(const std::function<absl::StatusOr<ServerLoad>()>& probe,
                        const std::function<absl::Status()>& ping, const DrainOptions& options,
                        const std::function<void(absl::Duration)>& sleep) {
  DrainResult result;
  ServerLoad first, last;
  if (probe) {
    absl::StatusOr<ServerLoad> now = probe();
    if (!now.ok()) {
      result.probe_status = now.status();
      return result;
    }
    first = last = *now;
  }
  while (result.waited < options.max_wait) {
    const absl::Duration step = std::min(options.poll, options.max_wait - result.waited);
    sleep(step);
    result.waited += step;
    bool counters_idle = true;
    if (probe) {
      absl::StatusOr<ServerLoad> now = probe();
      if (!now.ok()) {
        result.probe_status = now.status();
        return result;
      }
      result.finished_while_waiting = now->finished - first.finished;
      counters_idle = now->finished == last.finished && now->queued <= 0;
      last = *now;
    }
    if (!counters_idle) continue;
    if (ping) {
      result.last_ping = ping();
      if (!result.last_ping.ok()) continue;
    }
    result.idle = true;
    return result;
  }
  return result;
}

}  // namespace rankd::loadtest
