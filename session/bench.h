// The measurement behind `ptopt bench` (tools/cmd_bench.cpp) and
// ptopt.bench in Python, one implementation for both: a time-based warm-up
// (TorchScript's profiling executor specializes the graph over the first
// runs), then timed runs until
// both a minimum time and a minimum count are reached (or exactly `iters`).
// With a second model the two run interleaved (A B A B ...), so drift of the
// machine hits both, and the median ratio B/A comes with a bootstrap
// confidence interval. The loop, the clock and the statistics are the
// measuring library's (measure/): on a CPU each run is timed by the steady
// clock, on CUDA by CUDA events when built against a CUDA LibTorch,
// otherwise by a device synchronize and the wall clock.
#pragma once

#include "measure/stats.h"

#include <torch/script.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::session {

struct BenchSettings {
  double warmupSeconds = 1.0;
  double minSeconds = 2.0;  // per model
  int minIters = 10;
  std::optional<int> iters;  // exactly this many timed runs
};

struct BenchResult {
  measure::TimingStats a;
  std::optional<measure::TimingStats> b;
  std::optional<measure::RatioEstimate> ratio;  // median(b) / median(a)
  bool noisy = false;                  // a CV above kNoisyCv
  std::vector<double> samplesA, samplesB;
};

// How runs on `device` are timed ("steady_clock", "CUDA events", ...).
std::string timingMethod(c10::Device device);

// Times `a` (and `b`, interleaved) on `inputs` (already on `device`; the
// modules are put in eval mode and moved there by the caller). Throws
// ir::InputError when a model fails on the inputs.
BenchResult benchModels(torch::jit::Module& a, torch::jit::Module* b, const std::vector<c10::IValue>& inputs,
                        c10::Device device, const BenchSettings& settings);

}  // namespace ptopt::session
