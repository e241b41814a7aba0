// Small helpers shared by the subcommands.
#pragma once

#include <chrono>
#include <string>

namespace ptopt::driver {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// "1.5 MiB", "320 KiB".
std::string formatBytes(double bytes);
// True when a and b name the same file (also through links or other paths).
bool sameFile(const std::string& a, const std::string& b);

// The physical cores this process may run on: the CPUs of its affinity
// mask, counted once per core (SMT siblings share one, as sysfs's topology
// says), and no more than its cgroup's CPU quota (cpu.max) allows; at
// least 1. LibTorch 2.x defaults its intra-op threads to the machine's
// physical cores; 1.13 to half of hardware_concurrency() on x86, which on a
// machine without SMT is half its cores, and neither reads a quota.
int availablePhysicalCores();

// The intra-op threads for work that is not timed (loading, the reference's
// runs, the passes, verification): availablePhysicalCores(), or 0 (leave
// LibTorch's count) when OMP_NUM_THREADS or MKL_NUM_THREADS is set, since the
// user then sized the pool.
int untimedWorkThreads();

}  // namespace ptopt::driver
