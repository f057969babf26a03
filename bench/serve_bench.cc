// serve_bench: closed-loop latency / throughput of a running rankd server.
// `--concurrency` virtual clients each send their next request as soon as
// the previous one is answered, for `--duration_s` after a warm-up. Prints
// p50/p90/p99/max latency and requests/s. (rankload, in loadtest/, is the full
// open-loop harness; this is the quick number for docs/benchmarks.md.)
//
// --rpc picks what each virtual client sends:
//   score             Score through the client's callback API (default);
//   score_sync        Score through the blocking API, one thread per client;
//   model_info        GetModelInfo through the blocking API: no batcher, no
//                     engine, so with --concurrency 1 it is the gRPC round trip
//                     floor of the same server and client (what score_sync's
//                     latency is compared to);
//   model_info_async  GetModelInfo through the callback API: the floor that
//                     `score` is compared to. The two client APIs differ in
//                     their own cost (which thread picks up the answer), so a
//                     Score's gap to the floor is taken with the same API;
//   health            grpc.health.v1 Check of the server through the blocking
//                     API: a round trip with next to no payload. A large
//                     model's ModelInfo (one entry per feature) is itself
//                     work for both sides, which this floor leaves out.
// In `score` mode each request is serialized once at start and its bytes are
// sent as they are (--serialize_per_call sends the message, serialized on
// every call, as a client that builds each request does): serializing a large
// request is a large share of the client's CPU, which would bring the client's
// limit nearer than the server's.
// --pause_us (blocking modes) sleeps between a client's calls, so the threads
// on both sides go idle as they do at low load, wake-ups included.
//
// The result line ends with the client's own CPU over the measured window
// (`client_cpu N cores`, all its threads): a client near its limit measures
// itself. gRPC's callback API (score, model_info_async without
// --async_threads) runs the client's calls on half the cores' worth of threads
// (2 to 16, gRPC 1.51), so there a warning goes to stderr when the client used
// 90 % of that.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/ranking_client.h"
#include "client/serialized_request.h"
#include "loadtest/driver/process_cpu.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, target, "127.0.0.1:8500", "rankd address");
ABSL_FLAG(std::string, requests, "", "ScoreRequest JSON lines to send round-robin");
ABSL_FLAG(int, concurrency, 1, "requests in flight");
ABSL_FLAG(int, connections, 1, "gRPC connections");
ABSL_FLAG(double, duration_s, 5, "measured seconds");
ABSL_FLAG(double, warmup_s, 1, "seconds before measuring");
ABSL_FLAG(std::string, label, "", "label printed in the result line");
ABSL_FLAG(std::string, rpc, "score",
          "score | score_sync | model_info | model_info_async | health (see the top of the file)");
ABSL_FLAG(int, async_threads, 0,
          "score / model_info_async: each connection's client runs its calls on gRPC's callback "
          "API (0) or on this many completion-queue threads of its own "
          "(RankingClient::Options::async_threads)");
ABSL_FLAG(bool, serialize_per_call, false,
          "score: serialize the request on every call instead of sending bytes serialized once "
          "at start (see the top of the file)");
ABSL_FLAG(int64_t, pause_us, 0,
          "blocking modes (score_sync, model_info, health): sleep between a client's calls");

namespace {

using Clock = std::chrono::steady_clock;

// Threads gRPC 1.51's callback API runs a client's callbacks on
// (CallbackAlternativeCQ: half the cores, clamped to 2-16).
int CallbackApiThreads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 2, 16);
}

struct State {
  std::vector<std::shared_ptr<const rankd::v1::ScoreRequest>> requests;
  // The same requests serialized (empty with --serialize_per_call).
  std::vector<std::shared_ptr<const rankd::client::SerializedScoreRequest>> serialized;
  std::vector<std::unique_ptr<rankd::client::RankingClient>> clients;
  Clock::time_point measure_start, measure_end;
  std::atomic<int64_t> next{0};
  std::atomic<int> active{0};
  absl::Mutex mu;
  std::vector<double> latencies_us;  // measured window only
  int64_t errors = 0;
  absl::Notification all_done;
};

// Records one call that started at `start` (if inside the measured window).
void Record(State* s, Clock::time_point start, bool ok) {
  const Clock::time_point end = Clock::now();
  if (start < s->measure_start) return;
  absl::MutexLock lock(&s->mu);
  if (ok) {
    s->latencies_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  } else {
    ++s->errors;
  }
}

// Callback modes: each answer's callback sends the client's next call.
// `info` (model_info_async) asks GetModelInfo for the requests' model.
void SendNext(State* s, int user, const std::shared_ptr<const rankd::v1::GetModelInfoRequest>& info) {
  const Clock::time_point now = Clock::now();
  if (now >= s->measure_end) {
    if (s->active.fetch_sub(1) == 1) s->all_done.Notify();
    return;
  }
  auto& client = s->clients[user % s->clients.size()];
  if (info != nullptr) {
    client->GetModelInfoAsync(info, [s, user, now, info](absl::StatusOr<rankd::v1::ModelInfo> r) {
      Record(s, now, r.ok());
      SendNext(s, user, info);
    });
    return;
  }
  const int64_t i = s->next.fetch_add(1);
  auto on_answer = [s, user, now](absl::StatusOr<rankd::v1::ScoreResponse> r) {
    Record(s, now, r.ok());
    SendNext(s, user, nullptr);
  };
  if (s->serialized.empty()) {
    client->ScoreAsync(s->requests[i % s->requests.size()], std::move(on_answer));
  } else {
    client->ScoreAsync(s->serialized[i % s->serialized.size()], std::move(on_answer));
  }
}

// Blocking modes: one thread per virtual client, calls back to back (or
// --pause_us apart).
void RunBlocking(State* s, int user, const std::string& rpc, absl::Duration pause) {
  auto& client = s->clients[user % s->clients.size()];
  const std::string model = s->requests[0]->model();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= s->measure_end) break;
    bool ok;
    if (rpc == "model_info") {
      ok = client->GetModelInfo(model).ok();
    } else if (rpc == "health") {
      ok = client->Health().ok();
    } else {
      const int64_t i = s->next.fetch_add(1);
      ok = client->Score(*s->requests[i % s->requests.size()]).ok();
    }
    Record(s, now, ok);
    if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
  }
}

// The numeric flags' bounds: "" when every flag is within them, else what is
// wrong, naming the flag. (Concurrency 0 would wait forever for answers.)
std::string CheckNumericFlags() {
  const double duration = absl::GetFlag(FLAGS_duration_s);
  const double warmup = absl::GetFlag(FLAGS_warmup_s);
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const int connections = absl::GetFlag(FLAGS_connections);
  if (!(duration > 0 && duration <= 86400)) {
    return absl::StrCat("--duration_s: must be in (0, 86400], got ", duration);
  }
  if (!(warmup >= 0 && warmup <= 86400)) {
    return absl::StrCat("--warmup_s: must be in [0, 86400], got ", warmup);
  }
  if (concurrency < 1 || concurrency > 100000) {
    return absl::StrCat("--concurrency: must be in [1, 100000], got ", concurrency);
  }
  if (connections < 1 || connections > 1024) {
    return absl::StrCat("--connections: must be in [1, 1024], got ", connections);
  }
  if (absl::GetFlag(FLAGS_async_threads) < 0) {
    return absl::StrCat("--async_threads: must be >= 0, got ", absl::GetFlag(FLAGS_async_threads));
  }
  if (absl::GetFlag(FLAGS_pause_us) < 0) {
    return absl::StrCat("--pause_us: must be >= 0, got ", absl::GetFlag(FLAGS_pause_us));
  }
  return "";
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string rpc = absl::GetFlag(FLAGS_rpc);
  if (rpc != "score" && rpc != "score_sync" && rpc != "model_info" && rpc != "model_info_async" &&
      rpc != "health") {
    std::cerr << "serve_bench: --rpc: score, score_sync, model_info, model_info_async or "
              << "health, got \"" << rpc << "\"\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_serialize_per_call) && rpc != "score") {
    std::cerr << "serve_bench: --serialize_per_call: only with --rpc score (score_sync always "
              << "serializes on the call; the other modes send no ScoreRequest), got --rpc " << rpc
              << "\n";
    return 2;
  }
  if (const std::string bad = CheckNumericFlags(); !bad.empty()) {
    std::cerr << "serve_bench: " << bad << "\n";
    return 2;
  }
  State s;
  std::ifstream in(absl::GetFlag(FLAGS_requests));
  std::string line;
  while (std::getline(in, line)) {
    auto req = std::make_shared<rankd::v1::ScoreRequest>();
    if (!google::protobuf::util::JsonStringToMessage(line, req.get()).ok()) {
      std::cerr << "serve_bench: --requests: bad line\n";
      return 2;
    }
    s.requests.push_back(std::move(req));
  }
  if (s.requests.empty()) {
    std::cerr << "serve_bench: --requests: no requests read\n";
    return 2;
  }
  if (rpc == "score" && !absl::GetFlag(FLAGS_serialize_per_call)) {
    for (size_t i = 0; i < s.requests.size(); ++i) {
      auto bytes = rankd::client::SerializedScoreRequest::From(*s.requests[i]);
      if (!bytes.ok()) {
        std::cerr << "serve_bench: --requests: line " << i + 1 << ": " << bytes.status() << "\n";
        return 2;
      }
      s.serialized.push_back(
          std::make_shared<const rankd::client::SerializedScoreRequest>(*std::move(bytes)));
    }
  }
  for (int c = 0; c < absl::GetFlag(FLAGS_connections); ++c) {
    rankd::client::RankingClient::Options o;
    o.target = absl::GetFlag(FLAGS_target);
    o.dedicated_connection = true;
    o.deadline_ms = 10000;
    o.async_threads = absl::GetFlag(FLAGS_async_threads);
    auto client = rankd::client::RankingClient::Create(o);
    if (!client.ok()) {
      std::cerr << "serve_bench: " << client.status() << "\n";
      return 1;
    }
    s.clients.push_back(std::move(*client));
  }
  const auto start = Clock::now();
  s.measure_start = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(absl::GetFlag(FLAGS_warmup_s)));
  s.measure_end = s.measure_start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(absl::GetFlag(FLAGS_duration_s)));
  const int users = absl::GetFlag(FLAGS_concurrency);
  // The client's CPU over the measured window, sampled at its two ends.
  double cpu_at_start = 0, cpu_at_end = 0;
  std::thread cpu_sampler([&s, &cpu_at_start, &cpu_at_end] {
    std::this_thread::sleep_until(s.measure_start);
    cpu_at_start = rankd::loadtest::ProcessCpuSeconds();
    std::this_thread::sleep_until(s.measure_end);
    cpu_at_end = rankd::loadtest::ProcessCpuSeconds();
  });
  const bool async_modes = rpc == "score" || rpc == "model_info_async";
  // Those modes run on gRPC's callback threads unless the client has its own.
  const bool callback_api = async_modes && absl::GetFlag(FLAGS_async_threads) == 0;
  if (async_modes) {
    std::shared_ptr<rankd::v1::GetModelInfoRequest> info;
    if (rpc == "model_info_async") {
      info = std::make_shared<rankd::v1::GetModelInfoRequest>();
      info->set_model(s.requests[0]->model());
    }
    s.active = users;
    for (int u = 0; u < users; ++u) SendNext(&s, u, info);
    s.all_done.WaitForNotification();
  } else {
    const absl::Duration pause = absl::Microseconds(absl::GetFlag(FLAGS_pause_us));
    std::vector<std::thread> threads;
    for (int u = 0; u < users; ++u) {
      threads.emplace_back(RunBlocking, &s, u, rpc, pause);
    }
    for (std::thread& t : threads) t.join();
  }
  cpu_sampler.join();
  absl::MutexLock lock(&s.mu);
  const double secs = absl::GetFlag(FLAGS_duration_s);
  const double client_cores = (cpu_at_end - cpu_at_start) / secs;
  const size_t n = s.latencies_us.size();
  const int64_t candidates = s.requests[0]->num_candidates();
  std::printf("%-28s conc %3d  %8.0f req/s  %10.0f cand/s  p50 %8.1f us  p90 %8.1f us  p99 %8.1f us  max %8.1f us  errors %lld  client_cpu %.2f cores\n",
              absl::GetFlag(FLAGS_label).c_str(), users, n / secs, n * candidates / secs,
              Percentile(s.latencies_us, 0.5), Percentile(s.latencies_us, 0.9),
              Percentile(s.latencies_us, 0.99),
              n ? *std::max_element(s.latencies_us.begin(), s.latencies_us.end()) : 0.0,
              static_cast<long long>(s.errors), client_cores);
  if (callback_api && client_cores >= 0.9 * CallbackApiThreads()) {
    std::fprintf(stderr,
                 "serve_bench: the client used %.2f cores, near the %d threads gRPC's callback "
                 "API runs its calls on: the rate may be the client's limit (more --connections "
                 "share the same threads; run the client on other cores, or try --async_threads "
                 "N, threads of the client's own)\n",
                 client_cores, CallbackApiThreads());
  }
  return 0;
}
