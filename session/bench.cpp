#include "session/bench.h"

#include "ir/model.h"

#include "measure/sampler.h"

#include <limits>

namespace ptopt::session {

std::string timingMethod(c10::Device device) {
  return measure::DeviceClock(device, {false, false}).method();
}

BenchResult benchModels(torch::jit::Module& a, torch::jit::Module* b, const std::vector<c10::IValue>& inputs,
                        c10::Device device, const BenchSettings& s) {
  auto runA = [&] { a.forward(inputs); };
  auto runB = [&] { b->forward(inputs); };
  try {
    runA();
    if (b) runB();
  } catch (const std::exception& e) {
    throw ir::InputError("the model fails on the given inputs: " + ir::torchErrorMessage(e));
  }
  // Wall time on a CPU (bench reports latency as a caller sees it), CUDA events on a GPU.
  measure::DeviceClock clock(device, {false, false});
  std::vector<measure::Subject> subjects{{"A", runA}};
  if (b) subjects.push_back({"B", runB});
  measure::SamplingPlan plan;
  plan.warmupRounds = 3;  // and at least warmupSeconds
  plan.warmupSeconds = s.warmupSeconds;
  plan.budgetCountsWarmup = false;
  if (s.iters) {
    plan.minRounds = plan.maxRounds = *s.iters;
  } else {
    plan.minRounds = s.minIters;
    plan.maxRounds = std::numeric_limits<int>::max();
    plan.budgetSeconds = s.minSeconds * (b ? 2 : 1);
  }
  const measure::Sampling sampled = measure::sampleInterleaved(clock, subjects, plan);
  BenchResult r;
  r.samplesA = sampled.ms[0];
  if (b) r.samplesB = sampled.ms[1];
  r.a = measure::summarize(r.samplesA);
  r.noisy = r.a.cv > measure::kNoisyCv;
  if (b) {
    r.b = measure::summarize(r.samplesB);
    r.ratio = measure::bootstrapMedianRatio(r.samplesA, r.samplesB);
    r.noisy = r.noisy || r.b->cv > measure::kNoisyCv;
  }
  return r;
}

}  // namespace ptopt::session
