#include "tools/bench_run.h"

#include "tools/util.h"

#include "ir/model.h"

#include <torch/cuda.h>
#include "ir/torch_compat.h"

namespace ptopt::tools {

namespace {

class Timer {
 public:
  explicit Timer(c10::Device device) : device_(device) {}
  // Runs `f` once and returns its time in milliseconds.
  template <typename F>
  double time(F&& f) {
    if (!device_.is_cuda()) {
      Stopwatch sw;
      f();
      return sw.ms();
    }
    if (compat::cudaCompiledIn()) return *compat::cudaEventMs(f);
    torch::cuda::synchronize();
    Stopwatch sw;
    f();
    torch::cuda::synchronize();
    return sw.ms();
  }

 private:
  c10::Device device_;
};

}  // namespace

std::string timingMethod(c10::Device device) {
  if (!device.is_cuda()) return "steady_clock";
  return compat::cudaCompiledIn() ? "CUDA events"
                                  : "device synchronize + steady_clock (this ptopt was built without CUDA headers)";
}

BenchResult benchModels(torch::jit::Module& a, torch::jit::Module* b, const std::vector<c10::IValue>& inputs,
                        c10::Device device, const BenchSettings& s) {
  Timer timer(device);
  auto runA = [&] { a.forward(inputs); };
  auto runB = [&] { b->forward(inputs); };
  try {
    runA();
    if (b) runB();
  } catch (const std::exception& e) {
    throw ir::InputError("the model fails on the given inputs: " + ir::torchErrorMessage(e));
  }
  // Warm-up: time-based, at least 3 runs of each.
  Stopwatch warm;
  for (int i = 0; i < 3 || warm.ms() < s.warmupSeconds * 1000; ++i) {
    runA();
    if (b) runB();
  }
  BenchResult r;
  Stopwatch clock;
  const double budgetMs = s.minSeconds * 1000 * (b ? 2 : 1);
  for (size_t i = 0;; ++i) {
    if (s.iters ? i >= static_cast<size_t>(*s.iters)
                : (i >= static_cast<size_t>(s.minIters) && clock.ms() >= budgetMs))
      break;
    r.samplesA.push_back(timer.time(runA));
    if (b) r.samplesB.push_back(timer.time(runB));
  }
  r.a = summarize(r.samplesA);
  r.noisy = r.a.cv > kNoisyCv;
  if (b) {
    r.b = summarize(r.samplesB);
    r.ratio = bootstrapMedianRatio(r.samplesA, r.samplesB);
    r.noisy = r.noisy || r.b->cv > kNoisyCv;
  }
  return r;
}

}  // namespace ptopt::tools
