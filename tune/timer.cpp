#include "tune/timer.h"

#include "ir/torch_compat.h"

#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <ctime>

namespace ptopt::tune {

SteadyTimer::SteadyTimer(c10::Device device) : device_(device), start_(std::chrono::steady_clock::now()) {}

void SteadyTimer::sync() const {
  if (device_.is_cuda()) compat::cudaSynchronize();
}

namespace {

// CPU time of the calling thread, in milliseconds.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

double SteadyTimer::timeMs(const Candidate& c, int calls) {
  c10::InferenceMode guard;  // no autograd bookkeeping, as in deployment
  // With one intra-op thread on a CPU every kernel runs on this thread, and
  // its CPU time is the latency without the time other processes took the
  // core: on a shared machine decisions then follow the candidates, not the
  // neighbours. With more threads (or a GPU) wall time is the latency.
  const bool cpuTime = device_.is_cpu() && at::get_num_threads() == 1;
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpuTime ? threadCpuMs() : 0;
  for (int i = 0; i < calls; ++i) c.run();
  sync();
  const double c1 = cpuTime ? threadCpuMs() : 0;
  const auto t1 = std::chrono::steady_clock::now();
  const double ms = cpuTime ? c1 - c0 : std::chrono::duration<double, std::milli>(t1 - t0).count();
  return ms / std::max(1, calls);
}

double SteadyTimer::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace ptopt::tune
