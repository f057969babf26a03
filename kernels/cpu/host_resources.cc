#include "kernels/cpu/host_resources.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace rankd::kernels {
namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream s;
  s << f.rdbuf();
  *text = s.str();
  return true;
}

// A cgroup hierarchy this process belongs to: where it is mounted and the
// process's cgroup directory in it.
struct CgroupDir {
  std::string mount_point;  // with the root prefix
  std::string dir;          // mount_point + the process's cgroup path
};

// Whether the comma-separated `list` ("cpu,cpuacct", "rw,memory") names
// `item`.
bool ListHas(absl::string_view list, absl::string_view item) {
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    if (entry == item) return true;
  }
  return false;
}

// The process's cgroup path for a v1 controller ("cpu", "memory"), or for
// the v2 unified hierarchy (controller ""), from /proc/self/cgroup.
bool CgroupPath(const std::string& proc_cgroup, const std::string& controller,
                std::string* path) {
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const bool match = controller.empty()
                           ? f[0] == "0" && f[1].empty()
                           : ListHas(f[1], controller);
    if (match) {
      *path = std::string(f[2]);
      return true;
    }
  }
  return false;
}

// Where the hierarchy of `controller` (v1) or the unified one ("") is
// mounted, from /proc/self/mountinfo: "... root mount_point opts - fstype
// source superopts".
bool CgroupMount(const std::string& mountinfo, const std::string& controller,
                 std::string* mount_root, std::string* mount_point) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::vector<absl::string_view> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2) continue;
    std::vector<absl::string_view> pre = absl::StrSplit(halves[0], ' ');
    std::vector<absl::string_view> post = absl::StrSplit(halves[1], ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const bool match = controller.empty()
                           ? post[0] == "cgroup2"
                           : post[0] == "cgroup" && ListHas(post[2], controller);
    if (match) {
      *mount_root = std::string(pre[3]);
      *mount_point = std::string(pre[4]);
      return true;
    }
  }
  return false;
}

bool FindCgroupDir(const std::string& root, const std::string& controller,
                   CgroupDir* out) {
  std::string proc_cgroup, mountinfo, path, mount_root, mount_point;
  if (!ReadFile(root + "/proc/self/cgroup", &proc_cgroup) ||
      !ReadFile(root + "/proc/self/mountinfo", &mountinfo) ||
      !CgroupPath(proc_cgroup, controller, &path) ||
      !CgroupMount(mountinfo, controller, &mount_root, &mount_point)) {
    return false;
  }
  // Inside a cgroup namespace the mount's root and the process's path are
  // both "/"; on a host the mount root is "/" and the path is absolute.
  absl::string_view relative = path;
  if (mount_root != "/") absl::ConsumePrefix(&relative, mount_root);
  out->mount_point = root + mount_point;
  out->dir = out->mount_point + std::string(absl::StripSuffix(relative, "/"));
  std::ifstream probe(out->dir + "/cgroup.procs");
  if (!probe) out->dir = out->mount_point;  // path not visible here
  return true;
}

// Calls visit(dir) for the process's cgroup directory and each ancestor up
// to the mount point: limits of every ancestor apply.
template <typename F>
void ForEachAncestor(const CgroupDir& c, const F& visit) {
  std::string dir = c.dir;
  for (;;) {
    visit(dir);
    if (dir.size() <= c.mount_point.size()) return;
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash < c.mount_point.size()) {
      dir = c.mount_point;
    } else {
      dir.resize(slash);
    }
  }
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

// Smallest CFS quota (in CPUs) over the v2 and v1 hierarchies; 0 = none.
double ReadQuota(const std::string& root, std::string* source) {
  double best = 0;
  auto take = [&](double cpus, const std::string& file) {
    if (cpus > 0 && (best == 0 || cpus < best)) {
      best = cpus;
      *source = file;
    }
  };
  CgroupDir c;
  if (FindCgroupDir(root, "", &c)) {
    ForEachAncestor(c, [&](const std::string& dir) {
      std::string text;
      double cpus = 0;
      if (ReadFile(dir + "/cpu.max", &text) && ParseCpuMax(text, &cpus)) {
        take(cpus, dir + "/cpu.max");
      }
    });
  }
  if (FindCgroupDir(root, "cpu", &c)) {
    ForEachAncestor(c, [&](const std::string& dir) {
      std::string quota, period;
      int64_t q = 0, p = 0;
      if (ReadFile(dir + "/cpu.cfs_quota_us", &quota) &&
          ReadFile(dir + "/cpu.cfs_period_us", &period) &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(quota), &q) &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(period), &p) && q > 0 &&
          p > 0) {
        take(static_cast<double>(q) / static_cast<double>(p),
             dir + "/cpu.cfs_quota_us");
      }
    });
  }
  return best;
}

// Limits above this are "no limit" (cgroup v1 reports none as ~INT64_MAX
// rounded down to a page).
constexpr int64_t kNoLimitAbove = int64_t{1} << 60;

}  // namespace

int64_t CgroupMemory::available_bytes() const {
  if (limit_bytes < 0) return -1;
  return std::max<int64_t>(0, limit_bytes - std::max<int64_t>(0, working_set_bytes));
}

bool ParseCpuMax(const std::string& text, double* cpus) {
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (f.empty() || f.size() > 2) return false;
  if (f[0] == "max") {
    *cpus = 0;
    return true;
  }
  int64_t quota = 0, period = 100000;  // the kernel's default period
  if (!absl::SimpleAtoi(f[0], &quota) || quota <= 0) return false;
  if (f.size() == 2 && (!absl::SimpleAtoi(f[1], &period) || period <= 0)) {
    return false;
  }
  *cpus = static_cast<double>(quota) / static_cast<double>(period);
  return true;
}

bool ParseLimitBytes(const std::string& text, int64_t* bytes) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "max") {
    *bytes = -1;
    return true;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(t, &v) || v < 0) return false;
  *bytes = v >= kNoLimitAbove ? -1 : v;
  return true;
}

bool ParseStatValue(const std::string& text, const std::string& key,
                    int64_t* value) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() == 2 && f[0] == key) return absl::SimpleAtoi(f[1], value);
  }
  return false;
}

CpuBudget ReadCpuBudget(const std::string& root, int affinity_cpus) {
  CpuBudget b;
  b.online_cpus = std::max(1u, std::thread::hardware_concurrency());
  b.affinity_cpus = affinity_cpus >= 0 ? affinity_cpus : AffinityCpus();
  b.quota_cpus = ReadQuota(root, &b.quota_source);
  int usable = b.affinity_cpus > 0 ? b.affinity_cpus : b.online_cpus;
  if (b.quota_cpus > 0) {
    usable = std::min(usable, static_cast<int>(std::ceil(b.quota_cpus - 1e-9)));
  }
  b.usable_cpus = std::max(1, usable);
  return b;
}

CgroupMemory ReadCgroupMemory(const std::string& root) {
  CgroupMemory best;
  // (hierarchy, limit file, usage file, inactive-file key of memory.stat)
  struct Layout {
    const char* controller;
    const char* limit;
    const char* usage;
    const char* inactive_file;
  };
  const Layout layouts[] = {
      {"", "memory.max", "memory.current", "inactive_file"},
      {"memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
       "total_inactive_file"},
  };
  for (const Layout& l : layouts) {
    CgroupDir c;
    if (!FindCgroupDir(root, l.controller, &c)) continue;
    ForEachAncestor(c, [&](const std::string& dir) {
      std::string text;
      int64_t limit = -1;
      if (!ReadFile(dir + "/" + l.limit, &text) || !ParseLimitBytes(text, &limit) ||
          limit < 0) {
        return;
      }
      int64_t usage = 0, inactive = 0;
      if (ReadFile(dir + "/" + l.usage, &text)) {
        // Unparseable: unknown usage, and the limit alone bounds the memory.
        if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &usage)) usage = 0;
      }
      if (ReadFile(dir + "/memory.stat", &text)) {
        ParseStatValue(text, l.inactive_file, &inactive);
      }
      CgroupMemory m;
      m.limit_bytes = limit;
      m.working_set_bytes = std::max<int64_t>(0, usage - inactive);
      m.limit_source = dir + "/" + l.limit;
      if (best.limit_bytes < 0 || m.available_bytes() < best.available_bytes()) {
        best = m;
      }
    });
  }
  return best;
}

int UsableCpus() {
  static const int cpus = ReadCpuBudget().usable_cpus;
  return cpus;
}

}  // namespace rankd::kernels
