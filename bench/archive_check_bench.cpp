// Times the zip pre-check (ir/archive_check.h) on the given files: median
// wall and CPU time of N runs (the file stays in the page cache after the
// first), and the throughput. Run by bench/archive_check.sh.
//   archive_check_bench [--runs N] FILE...
#include "ir/archive_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int runs = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else files.push_back(arg);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: archive_check_bench [--runs N] FILE...\n");
    return 2;
  }
  for (const auto& file : files) {
    std::vector<double> wall, cpu;
    ptopt::ir::ArchiveCheckResult result;
    uint64_t bytes = 0;
    for (int r = 0; r < runs; ++r) {
      auto w0 = std::chrono::steady_clock::now();
      std::clock_t c0 = std::clock();
      result = ptopt::ir::checkZipFile(file);
      cpu.push_back(1000.0 * double(std::clock() - c0) / CLOCKS_PER_SEC);
      wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count());
    }
    for (const auto& e : result.entries) bytes += e.compressedSize;
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    double medianWall = wall[wall.size() / 2], medianCpu = cpu[cpu.size() / 2];
    std::printf("%s: %s, %zu entries, %.1f MB of entry data; median of %d runs: %.1f ms wall, %.1f ms CPU "
                "(%.0f MB/s of CPU time)\n",
                file.c_str(), result.ok() ? "ok" : result.problem.c_str(), result.entries.size(), bytes / 1e6,
                runs, medianWall, medianCpu, medianCpu > 0 ? bytes / 1e3 / medianCpu : 0.0);
  }
}
