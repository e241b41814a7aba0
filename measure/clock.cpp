#include "measure/clock.h"

#include "ir/torch_compat.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <ctime>
#include <optional>

namespace ptopt::measure {

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

DeviceClock::DeviceClock(c10::Device device, Options options)
    : device_(device), options_(options), start_(std::chrono::steady_clock::now()) {}

bool DeviceClock::threadCpuNow() const {
  return device_.is_cpu() && options_.threadCpuAtOneThread && at::get_num_threads() == 1;
}

std::string DeviceClock::method() const {
  if (device_.is_cuda())
    return compat::cudaCompiledIn() ? "CUDA events"
                                    : "device synchronize + steady_clock (this ptopt was built without CUDA headers)";
  return threadCpuNow() ? "thread CPU time" : "steady_clock";
}

double DeviceClock::timeMs(const Subject& s, int calls) {
  std::optional<c10::InferenceMode> inference;
  if (options_.inferenceMode) inference.emplace();
  calls = std::max(1, calls);
  auto runAll = [&] {
    for (int i = 0; i < calls; ++i) s.run();
  };
  double ms = 0;
  if (device_.is_cuda()) {
    compat::cudaSynchronize();  // earlier work is not this sample's
    if (std::optional<double> events = compat::cudaEventMs(runAll)) {
      ms = *events;
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      runAll();
      compat::cudaSynchronize();
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  } else if (threadCpuNow()) {
    const double c0 = threadCpuMs();
    runAll();
    ms = threadCpuMs() - c0;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    runAll();
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return ms / calls;
}

double DeviceClock::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace ptopt::measure
