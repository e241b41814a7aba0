#include "tune/timer.h"

#include <torch/script.h>

#include <algorithm>
#ifdef PTOPT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace ptopt::tune {

SteadyTimer::SteadyTimer(c10::Device device) : device_(device), start_(std::chrono::steady_clock::now()) {}

void SteadyTimer::sync() const {
#ifdef PTOPT_WITH_CUDA
  if (device_.is_cuda()) c10::cuda::device_synchronize();
#endif
}

double SteadyTimer::timeMs(const Candidate& c, int calls) {
  c10::InferenceMode guard;  // no autograd bookkeeping, as in deployment
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) c.run();
  sync();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / std::max(1, calls);
}

double SteadyTimer::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace ptopt::tune
