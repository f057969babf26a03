#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "server/tools/commands.h"

namespace rankd::server {

int64_t VersionFromDirectory(const std::string& directory) {
  std::string d = directory;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const size_t slash = d.rfind('/');
  int64_t version = 0;
  if (!absl::SimpleAtoi(slash == std::string::npos ? d : d.substr(slash + 1), &version) ||
      version < 0) {
    return 0;
  }
  return version;
}

}  // namespace rankd::server
