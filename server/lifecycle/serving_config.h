// serving.pbtxt: a model's version policy and labels (rankd.v1.
// ModelServingConfig, protos/rankd/v1/model_serving.proto), and the choice of
// versions a policy makes among those available.
#ifndef RANKD_SERVER_LIFECYCLE_SERVING_CONFIG_H_
#define RANKD_SERVER_LIFECYCLE_SERVING_CONFIG_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rankd/v1/model_serving.pb.h"

namespace rankd::server {

// The file's largest accepted size: a policy and a few labels fit in far less.
inline constexpr int64_t kMaxServingConfigBytes = 1 << 20;

// Parses text-format `text` (read from `path`, named in errors) and checks
// it: versions and label values > 0, label names non-empty of [A-Za-z0-9_.-]
// (at most 64 characters), specific lists non-empty. INVALID_ARGUMENT as
// "<path>:<line>:<col>: ..." for syntax, "<path>: <field>: <reason>" else.
absl::StatusOr<rankd::v1::ModelServingConfig> ParseServingConfig(absl::string_view text,
                                                                 const std::string& path);

// Reads and parses `path`. NOT_FOUND when it does not exist (no file = the
// default config), other errors as ParseServingConfig or naming the read
// failure.
absl::StatusOr<rankd::v1::ModelServingConfig> ReadServingConfig(const std::string& path);

// The versions of `available` that `policy` serves: the N newest (latest),
// all of them (all), or those listed that are available (specific).
std::set<int64_t> SelectVersions(const rankd::v1::VersionPolicy& policy,
                                 const std::set<int64_t>& available);

// "latest 1", "latest 3", "all", "specific 3,4": for ListModels and logs.
std::string PolicyString(const rankd::v1::VersionPolicy& policy);

// Checks a label name (as ParseServingConfig does); errors name `field`.
absl::Status CheckLabelName(absl::string_view label, absl::string_view field);

}  // namespace rankd::server

#endif  // RANKD_SERVER_LIFECYCLE_SERVING_CONFIG_H_
