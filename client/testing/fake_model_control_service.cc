#include "client/testing/fake_model_control_service.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace rankd::client::testing {
namespace {

using rankd::v1::VersionStatus;

grpc::Status Error(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }

constexpr int64_t kUserRows = 1000;
constexpr int64_t kDim = 4;
constexpr int64_t kItemMaxKeys = 100;

// A version as a load leaves it: READY with made-up timings and sizes, or
// FAILED for the model "broken".
VersionStatus Loaded(const std::string& name, int64_t version) {
  VersionStatus v;
  v.set_version(version);
  v.set_directory(absl::StrCat("/models/", name, "/", version));
  v.set_state_since_unix_ms(absl::ToUnixMillis(absl::Now()));
  if (name == "broken") {
    v.set_state(rankd::v1::FAILED);
    v.set_reason(FakeModelControlService::kBrokenReason);
    return v;
  }
  v.set_state(rankd::v1::READY);
  v.set_load_seconds(0.25 * static_cast<double>(version));
  v.set_warmup_seconds(0.125);
  v.set_device_bytes(version * (int64_t{64} << 20));
  v.set_host_bytes(int64_t{3} << 20);
  return v;
}

void Unloaded(VersionStatus* v) {
  v->set_state(rankd::v1::UNLOADED);
  v->set_device_bytes(0);
  v->set_host_bytes(0);
  v->set_state_since_unix_ms(absl::ToUnixMillis(absl::Now()));
}

}  // namespace

FakeModelControlService::FakeModelControlService() {
  Model& mini = models_["mini"];
  mini.repository = {1, 2, 3};
  mini.versions[1] = Loaded("mini", 1);
  mini.versions[2] = Loaded("mini", 2);
  mini.labels = {{"stable", 1}, {"canary", 2}};
  mini.has_tables = true;
  Model& broken = models_["broken"];
  broken.repository = {1};
  broken.versions[1] = Loaded("broken", 1);
  models_["slow"].repository = {1};
}

grpc::Status FakeModelControlService::Find(const std::string& name, Model** model) {
  if (name.empty()) return Error(grpc::StatusCode::INVALID_ARGUMENT, "model: must not be empty");
  auto it = models_.find(name);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& entry : models_) names.push_back(entry.first);
    return Error(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("model ", Quoted(name), " is not in the repository (models: ",
                              absl::StrJoin(names, ", "), ")"));
  }
  *model = &it->second;
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::CheckVersions(
    const std::string& name, const Model& model,
    const google::protobuf::RepeatedField<int64_t>& versions) {
  for (int64_t version : versions) {
    if (std::find(model.repository.begin(), model.repository.end(), version) ==
        model.repository.end()) {
      return Error(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("model ", Quoted(name), " has no version ", version,
                                " in the repository (versions: ",
                                absl::StrJoin(model.repository, ", "), ")"));
    }
  }
  return grpc::Status::OK;
}

rankd::v1::ModelStatus FakeModelControlService::Status(const std::string& name,
                                                       const Model& model) {
  rankd::v1::ModelStatus status;
  status.set_name(name);
  status.set_policy("all");
  for (const auto& [number, version] : model.versions) {
    VersionStatus* v = status.add_versions();
    *v = version;
    auto tables = model.tables.find(number);
    const bool live = version.state() == rankd::v1::READY;
    if (live && tables != model.tables.end()) {
      for (const auto& [key, position] : tables->second.positions) {
        rankd::v1::ProducerPosition* p = v->add_update_positions();
        p->set_producer_id(key.first);
        p->set_table(key.second);
        p->set_last_sequence(position.first);
        p->set_last_timestamp_unix_us(position.second);
      }
    }
    if (live && model.has_tables) {
      rankd::v1::DynamicTableStatus* d = v->add_dynamic_tables();
      d->set_table("t_item");
      d->set_max_keys(kItemMaxKeys);
      if (tables != model.tables.end()) {
        d->set_keys(static_cast<int64_t>(tables->second.item_keys.size()));
        d->set_evictions(tables->second.evictions);
      }
    }
    for (const auto& [label, target] : model.labels) {
      if (target == number) v->add_labels(label);
    }
  }
  for (const auto& [label, target] : model.labels) (*status.mutable_labels())[label] = target;
  return status;
}

grpc::Status FakeModelControlService::ListModels(grpc::ServerContext* /*context*/,
                                                 const rankd::v1::ListModelsRequest* request,
                                                 rankd::v1::ListModelsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!request->model().empty()) {
    Model* model = nullptr;
    if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
    *response->add_models() = Status(request->model(), *model);
    return grpc::Status::OK;
  }
  for (const auto& [name, model] : models_) *response->add_models() = Status(name, model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::LoadModel(grpc::ServerContext* context,
                                                const rankd::v1::LoadModelRequest* request,
                                                rankd::v1::LoadModelResponse* response) {
  if (request->model() == "slow") {
    // In small steps, so a cancelled call (and server shutdown) is not held up.
    for (int i = 0; i < 50 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (grpc::Status s = CheckVersions(request->model(), *model, request->versions()); !s.ok()) {
    return s;
  }
  std::vector<int64_t> versions(request->versions().begin(), request->versions().end());
  if (versions.empty()) versions = model->repository;  // policy "all"
  for (int64_t version : versions) {
    model->versions[version] = Loaded(request->model(), version);
    model->tables.erase(version);  // a reload starts from the files
  }
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::UnloadModel(grpc::ServerContext* /*context*/,
                                                  const rankd::v1::UnloadModelRequest* request,
                                                  rankd::v1::UnloadModelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (grpc::Status s = CheckVersions(request->model(), *model, request->versions()); !s.ok()) {
    return s;
  }
  for (auto& [number, version] : model->versions) {
    const auto& asked = request->versions();
    if (asked.empty() || std::find(asked.begin(), asked.end(), number) != asked.end()) {
      Unloaded(&version);
    }
  }
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::SetVersionLabel(
    grpc::ServerContext* /*context*/, const rankd::v1::SetVersionLabelRequest* request,
    rankd::v1::SetVersionLabelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  if (request->label().empty()) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "label: must not be empty");
  }
  if (request->version() < 0) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 absl::StrCat("version: must be >= 0, got ", request->version()));
  }
  if (request->version() == 0) {
    model->labels.erase(request->label());
  } else {
    auto it = model->versions.find(request->version());
    if (it == model->versions.end() || it->second.state() != rankd::v1::READY) {
      std::vector<int64_t> ready;
      for (const auto& [number, version] : model->versions) {
        if (version.state() == rankd::v1::READY) ready.push_back(number);
      }
      const std::string state =
          it == model->versions.end()
              ? "not loaded"
              : absl::StrCat(rankd::v1::VersionState_Name(it->second.state()), ", not READY");
      return Error(grpc::StatusCode::FAILED_PRECONDITION,
                   absl::StrCat("model ", Quoted(request->model()), " version ", request->version(),
                                " is ", state, " (ready: ",
                                ready.empty() ? "none" : absl::StrJoin(ready, ", "), ")"));
    }
    model->labels[request->label()] = request->version();
  }
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

void FakeModelControlService::FailUpdates(int streams, grpc::StatusCode code,
                                          const std::string& message, int after_messages) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_update_ = {streams, code, message, after_messages};
}

void FakeModelControlService::FailNextSnapshot(grpc::StatusCode code, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_snapshot_ = grpc::Status(code, message);
}

std::vector<rankd::v1::EmbeddingUpdate> FakeModelControlService::received_updates() {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

int FakeModelControlService::update_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  return update_streams_;
}

int64_t FakeModelControlService::applied(const std::string& model, int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = models_.find(model);
  if (m == models_.end()) return 0;
  auto t = m->second.tables.find(version);
  return t == m->second.tables.end() ? 0 : t->second.applied;
}

grpc::Status FakeModelControlService::ApplyUpdate(
    const rankd::v1::EmbeddingUpdate& m, Model* model,
    std::map<std::pair<int64_t, std::string>, rankd::v1::TableUpdateSummary>* summary) {
  // Which versions.
  std::vector<int64_t> targets;
  std::vector<int64_t> ready;
  for (const auto& [number, version] : model->versions) {
    if (version.state() == rankd::v1::READY) ready.push_back(number);
  }
  if (m.version() < 0) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 absl::StrCat("version: must be >= 0, got ", m.version()));
  }
  if (m.version() == 0) {
    targets = ready;
  } else if (std::find(ready.begin(), ready.end(), m.version()) != ready.end()) {
    targets = {m.version()};
  }
  if (targets.empty()) {
    return Error(grpc::StatusCode::FAILED_PRECONDITION,
                 absl::StrCat("model ", Quoted(m.model()),
                              m.version() == 0 ? std::string(" has no READY version")
                                               : absl::StrCat(" version ", m.version(),
                                                              " is not READY"),
                              " (ready: ", ready.empty() ? "none" : absl::StrJoin(ready, ", "),
                              ")"));
  }
  const bool is_user = model->has_tables && m.table() == "t_user";
  const bool is_item = model->has_tables && m.table() == "t_item";
  if (!is_user && !is_item) {
    return Error(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("model ", Quoted(m.model()), " has no table ", Quoted(m.table()),
                              model->has_tables ? " (tables: t_item, t_user)" : " (tables: none)"));
  }
  if (m.sequence() > 0 && m.producer_id().empty()) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "producer_id: required with a sequence");
  }
  const int64_t n = m.ids_size();
  const int64_t elem = is_user ? 4 : 2;
  if (n > 0) {
    if ((m.rows_size() > 0) == !m.raw_rows().empty()) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT, "want exactly one of rows and raw_rows");
    }
    if (m.rows_size() > 0 && m.rows_size() != n * kDim) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("rows: ", m.rows_size(), " values for ", n, " ids of dim ", kDim));
    }
    if (!m.raw_rows().empty() && static_cast<int64_t>(m.raw_rows().size()) != n * kDim * elem) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("raw_rows: ", m.raw_rows().size(), " bytes for ", n,
                                " ids of dim ", kDim, " x ", elem, " bytes"));
    }
  } else if (m.rows_size() > 0 || !m.raw_rows().empty()) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "rows without ids");
  }
  std::set<int64_t> ids(m.ids().begin(), m.ids().end());
  if (static_cast<int64_t>(ids.size()) != n) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "ids: not unique");
  }
  if (is_user) {
    if (m.delete_keys_size() > 0) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT,
                   "delete_keys: t_user is a STATIC table (rows are written, never deleted)");
    }
    for (int64_t id : ids) {
      if (id < 0 || id >= kUserRows) {
        return Error(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("id ", id, " is out of range [0, ", kUserRows, ")"));
      }
    }
  }
  for (int64_t key : m.delete_keys()) {
    if (ids.count(key) > 0) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("key ", key, " is both in delete_keys and in ids"));
    }
  }
  for (int64_t number : targets) {
    Tables& tables = model->tables[number];
    rankd::v1::TableUpdateSummary& s = (*summary)[{number, m.table()}];
    s.set_model(m.model());
    s.set_version(number);
    s.set_table(m.table());
    auto& position = tables.positions[{m.producer_id(), m.table()}];
    if (m.sequence() > 0 && m.sequence() <= position.first) {
      s.set_duplicates(s.duplicates() + 1);
      continue;
    }
    if (m.sequence() > 0) position = {m.sequence(), m.timestamp_unix_us()};
    ++tables.applied;
    s.set_messages(s.messages() + 1);
    s.set_rows_applied(s.rows_applied() + n);
    if (is_user) continue;
    for (int64_t key : m.delete_keys()) {
      if (tables.item_keys.erase(key) > 0) {
        s.set_keys_deleted(s.keys_deleted() + 1);
      } else {
        s.set_keys_not_found(s.keys_not_found() + 1);
      }
    }
    for (int64_t key : ids) {
      if (tables.item_keys.insert(key).second) {
        s.set_keys_inserted(s.keys_inserted() + 1);
      } else {
        s.set_keys_updated(s.keys_updated() + 1);
      }
    }
    while (static_cast<int64_t>(tables.item_keys.size()) > kItemMaxKeys) {
      tables.item_keys.erase(tables.item_keys.begin());
      ++tables.evictions;
      s.set_keys_evicted(s.keys_evicted() + 1);
    }
  }
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::UpdateEmbeddings(
    grpc::ServerContext* /*context*/, grpc::ServerReader<rankd::v1::EmbeddingUpdate>* reader,
    rankd::v1::UpdateSummary* response) {
  FailUpdate fail;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++update_streams_;
    if (fail_update_.streams > 0) {
      --fail_update_.streams;
      fail = fail_update_;
    }
  }
  std::map<std::pair<int64_t, std::string>, rankd::v1::TableUpdateSummary> summary;
  int64_t index = 0;
  rankd::v1::EmbeddingUpdate m;
  while (true) {
    if (fail.code != grpc::StatusCode::OK && index == fail.after_messages) {
      return grpc::Status(fail.code, fail.message);
    }
    if (!reader->Read(&m)) break;
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(m);
    Model* model = nullptr;
    grpc::Status s = Find(m.model(), &model);
    if (s.ok()) s = ApplyUpdate(m, model, &summary);
    if (!s.ok()) {
      return grpc::Status(
          s.error_code(),
          absl::StrCat("table ", Quoted(m.table()), ", message ", index, " (sequence ",
                       m.sequence(), "): ", s.error_message(), " (", index,
                       index == 1 ? " message" : " messages", " before it applied)"));
    }
    ++index;
  }
  response->set_messages(index);
  for (auto& [key, table] : summary) *response->add_tables() = std::move(table);
  return grpc::Status::OK;
}

grpc::Status FakeModelControlService::SaveSnapshot(grpc::ServerContext* /*context*/,
                                                   const rankd::v1::SaveSnapshotRequest* request,
                                                   rankd::v1::SaveSnapshotResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fail_snapshot_.ok()) {
    grpc::Status fail = fail_snapshot_;
    fail_snapshot_ = grpc::Status::OK;
    return fail;
  }
  Model* model = nullptr;
  if (grpc::Status s = Find(request->model(), &model); !s.ok()) return s;
  std::vector<int64_t> ready;
  for (const auto& [number, version] : model->versions) {
    if (version.state() == rankd::v1::READY) ready.push_back(number);
  }
  int64_t source = request->version();
  if (source == 0 && !ready.empty()) source = ready.back();
  if (std::find(ready.begin(), ready.end(), source) == ready.end() || source == 0) {
    return Error(grpc::StatusCode::FAILED_PRECONDITION,
                 absl::StrCat("model ", Quoted(request->model()),
                              source == 0 ? std::string(" has no READY version")
                                          : absl::StrCat(" version ", source, " is not READY"),
                              " (ready: ", ready.empty() ? "none" : absl::StrJoin(ready, ", "),
                              ")"));
  }
  int64_t target = request->new_version();
  if (target < 0) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 absl::StrCat("new_version: must be >= 0, got ", target));
  }
  if (target == 0) target = model->repository.back() + 1;
  if (std::find(model->repository.begin(), model->repository.end(), target) !=
      model->repository.end()) {
    return Error(grpc::StatusCode::ALREADY_EXISTS,
                 absl::StrCat("model ", Quoted(request->model()), " version ", target,
                              " is already in the repository"));
  }
  model->repository.push_back(target);
  std::sort(model->repository.begin(), model->repository.end());
  VersionStatus v = Loaded(request->model(), target);
  v.set_snapshot_of(source);
  v.set_load_seconds(0);
  v.set_warmup_seconds(0);
  model->versions[target] = v;
  model->tables[target] = model->tables[source];
  response->set_version(target);
  response->set_directory(v.directory());
  response->set_bytes(int64_t{48} << 20);
  response->set_seconds(0.5);
  *response->mutable_model() = Status(request->model(), *model);
  return grpc::Status::OK;
}

absl::StatusOr<FakeAdminServer> StartFakeAdminServer(int port, const std::string& host) {
  FakeAdminServer fake;
  fake.host = host;
  fake.service = std::make_unique<FakeModelControlService>();
  grpc::ServerBuilder builder;
  fake.port = port;
  const std::string address = fake.target();
  fake.port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &fake.port);
  builder.RegisterService(fake.service.get());
  fake.server = builder.BuildAndStart();
  if (fake.server == nullptr || fake.port == 0) {
    return absl::UnavailableError("cannot start the fake admin server on " + address);
  }
  return fake;
}

}  // namespace rankd::client::testing
