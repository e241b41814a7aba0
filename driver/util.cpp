#include "driver/util.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

namespace ptopt::driver {

std::string formatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) { bytes /= 1024; ++u; }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

bool sameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

namespace {
// The first token of a small sysfs or cgroup file, "" when unreadable.
std::string firstToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  in >> token;
  return token;
}
}  // namespace

int availablePhysicalCores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int cpus = 0;
  std::set<std::pair<std::string, std::string>> cores;  // (package, core)
  bool topologyKnown = ::sched_getaffinity(0, sizeof(mask), &mask) == 0;
  if (topologyKnown) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &mask)) continue;
      ++cpus;
      const std::string dir = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
      const std::string package = firstToken(dir + "physical_package_id"), core = firstToken(dir + "core_id");
      if (package.empty() || core.empty()) topologyKnown = false;
      cores.emplace(package, core);
    }
  }
  int n = topologyKnown && !cores.empty() ? static_cast<int>(cores.size())
          : cpus > 0                     ? cpus
                                         : static_cast<int>(std::thread::hardware_concurrency());
  // cgroup v2: "QUOTA PERIOD" (microseconds per period), or "max PERIOD".
  std::ifstream quotaFile("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (quotaFile >> quota >> period && quota != "max" && period > 0) {
    try {
      n = std::min(n, static_cast<int>(std::ceil(std::stod(quota) / period)));
    } catch (const std::exception&) {  // unreadable: no quota
    }
  }
  return std::max(1, n);
}

int untimedWorkThreads() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
  };
  return set("OMP_NUM_THREADS") || set("MKL_NUM_THREADS") ? 0 : availablePhysicalCores();
}

}  // namespace ptopt::driver
