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

}  // namespace ptopt::driver
