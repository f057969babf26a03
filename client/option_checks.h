// Checks of an Options struct's numeric fields (the clients', the tools'):
// each gives INVALID_ARGUMENT "<field>: must be ..., got <value>" naming the
// field when it fails, so every Validate reads and words its bounds alike.
#ifndef RANKD_CLIENT_OPTION_CHECKS_H_
#define RANKD_CLIENT_OPTION_CHECKS_H_

#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rankd::client {

// The bounds are taken as the checked value's type (not deduced from them).
template <typename T>
using BoundOf = typename std::common_type<T>::type;

// "<field>: must be >= <min>, got <value>" unless value >= min.
template <typename T>
absl::Status CheckAtLeast(absl::string_view field, T value, BoundOf<T> min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be >= ", min, ", got ", value));
}

// "<field>: must be > <bound>, got <value>" unless value > bound; a floating
// point value must be finite too.
template <typename T>
absl::Status CheckAbove(absl::string_view field, T value, BoundOf<T> bound) {
  bool ok = value > bound;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be > ", bound, ", got ", value));
}

// "<field>: must be in [<min>, <max>], got <value>" unless min <= value <= max.
template <typename T>
absl::Status CheckInRange(absl::string_view field, T value, BoundOf<T> min, BoundOf<T> max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be in [", min, ", ", max, "], got ", value));
}

// The first failed of `checks` (in their order), else OK.
inline absl::Status FirstError(std::initializer_list<absl::Status> checks) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rankd::client

#endif  // RANKD_CLIENT_OPTION_CHECKS_H_
