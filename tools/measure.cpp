#include "tools/measure.h"

#include "ir/model.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <chrono>
#include <ctime>
#include <stdexcept>

namespace ptopt {

std::string verdictName(SpeedVerdict v) {
  switch (v) {
    case SpeedVerdict::Faster: return "faster";
    case SpeedVerdict::Slower: return "slower";
    case SpeedVerdict::NoClearDifference: break;
  }
  return "no clear difference";
}

std::string SpeedMeasurement::line() const {
  return fmt::format("{:.3f}x (95% CI {:.3f}-{:.3f}; {} interleaved pairs, {} thread{}, median {:.3f} vs {:.3f} ms)",
                     ratio.median, ratio.low, ratio.high, pairs, threads, threads == 1 ? "" : "s", b.medianMs,
                     a.medianMs);
}

SpeedVerdict judge(const tools::RatioEstimate& r, double margin) {
  if (r.low > 1 + margin) return SpeedVerdict::Slower;
  if (r.high < 1 - margin) return SpeedVerdict::Faster;
  return SpeedVerdict::NoClearDifference;
}

double steadyNowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

SpeedMeasurement measurePair(const std::function<double()>& timeA, const std::function<double()>& timeB,
                             const MeasureOptions& o, const std::function<double()>& nowMs) {
  const double start = nowMs();
  const double budgetMs = o.budgetSeconds * 1000;
  for (int i = 0; i < o.warmupRuns; ++i) {
    timeA();
    timeB();
  }
  // The warm-up's cost predicts a pair's: stop before a pair would overrun
  // the budget by much (slow models get fewer pairs, at least minPairs).
  std::vector<double> ta, tb;
  while (ta.size() < o.maxPairs) {
    const double elapsed = nowMs() - start;
    if (ta.size() >= o.minPairs && elapsed >= budgetMs) break;
    if (o.earlyStop && ta.size() >= 20 && ta.size() % 10 == 0) {
      const tools::RatioEstimate r = tools::bootstrapMedianRatio(ta, tb, 400);
      const bool clear = r.low > 1 + o.margin || r.high < 1 - o.margin ||
                         (r.low >= 1 - o.margin && r.high <= 1 + o.margin);
      if (clear) break;
    }
    ta.push_back(timeA());
    tb.push_back(timeB());
  }
  SpeedMeasurement m;
  m.pairs = ta.size();
  m.a = tools::summarize(ta);
  m.b = tools::summarize(tb);
  m.ratio = tools::bootstrapMedianRatio(ta, tb);
  m.verdict = judge(m.ratio, o.margin);
  m.seconds = (nowMs() - start) / 1000;
  m.threads = o.threads;
  return m;
}

ScopedThreads::ScopedThreads(int threads) : previous_(at::get_num_threads()) {
  if (threads > 0 && threads != previous_) at::set_num_threads(threads);
}
ScopedThreads::~ScopedThreads() {
  if (at::get_num_threads() != previous_) at::set_num_threads(previous_);
}

SpeedMeasurement measureModules(torch::jit::Module a, torch::jit::Module b, const std::vector<c10::IValue>& inputsA,
                                const std::vector<c10::IValue>& inputsB, c10::Device device,
                                const MeasureOptions& options) {
  ScopedThreads threads(options.threads);
  torch::NoGradGuard noGrad;
  torch::jit::GraphOptimizerEnabledGuard optimizer(options.optimizingExecutor);
  a.eval();
  b.eval();
  const bool cuda = device.is_cuda();
  auto timer = [cuda, &inputsA, &inputsB](torch::jit::Module& m, bool isB) {
    return [&m, cuda, isB, &inputsA, &inputsB] {
      const double t0 = steadyNowMs();
      m.forward(isB ? inputsB : inputsA);
      if (cuda) torch::cuda::synchronize();
      return steadyNowMs() - t0;
    };
  };
  SpeedMeasurement m = measurePair(timer(a, false), timer(b, true), options, steadyNowMs);
  m.threads = at::get_num_threads();
  return m;
}

namespace {
// LibTorch's message without its backtrace; of a TorchScript traceback, the
// last line (the error itself: `RuntimeError: "slow_conv2d_cpu" not
// implemented for 'Half'`).
std::string shortError(const std::exception& e) {
  std::string m = ir::torchErrorMessage(e);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  const size_t nl = m.rfind('\n');
  return nl == std::string::npos ? m : m.substr(nl + 1);
}
}  // namespace

NeverSlowerResult pickNotSlower(const std::function<double()>& timeIn, const std::vector<Candidate>& candidates,
                                const MeasureOptions& options, const std::function<double()>& nowMs) {
  if (candidates.empty()) throw std::invalid_argument("pickNotSlower: no candidates");
  NeverSlowerResult result;
  for (size_t i = 0; i < candidates.size(); ++i) {
    CandidateOutcome outcome{candidates[i].name, std::nullopt, ""};
    const bool last = i + 1 == candidates.size();
    try {
      std::function<double()> timeIt = candidates[i].build();
      if (last) {
        result.tried.push_back(outcome);
        result.chosen = i;
        return result;
      }
      outcome.measurement = measurePair(timeIn, timeIt, options, nowMs);
    } catch (const std::exception& e) {
      outcome.error = shortError(e);
      if (last) throw;  // the input itself must be writable
    }
    const bool ok = outcome.measurement && outcome.measurement->verdict != SpeedVerdict::Slower;
    result.tried.push_back(std::move(outcome));
    if (ok) {
      result.chosen = i;
      return result;
    }
  }
  return result;  // not reached: the last candidate returns or throws
}

namespace {

double threadCpuNowMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

std::function<double()> moduleTimer(torch::jit::Module module, std::vector<c10::IValue> inputs, c10::Device device) {
  module.eval();
  module.to(device);
  return [module, inputs = std::move(inputs), device]() mutable {
    // One intra-op thread on a CPU: every kernel runs on this thread, and
    // its CPU time is the call's latency without the time other processes
    // held the core (as the tuner's timer, tune/timer.h).
    const bool cpuTime = device.is_cpu() && at::get_num_threads() == 1;
    const double t0 = cpuTime ? threadCpuNowMs() : steadyNowMs();
    module.forward(inputs);
    if (device.is_cuda()) torch::cuda::synchronize();
    return (cpuTime ? threadCpuNowMs() : steadyNowMs()) - t0;
  };
}

std::string StructurePipeline::description() const {
  std::string s;
  for (const auto& d : dropped) s += (s.empty() ? "" : ", ") + d;
  return "the pipeline without " + s;
}

std::optional<StructurePipeline> fp32StructurePipeline(const rewriters::Pipeline& pipeline) {
  StructurePipeline s{pipeline, {}};
  // quantize too: the fallback is an fp32 model, verified as one.
  for (const char* pass : {"cast", "quantize", "channels-last"})
    if (rewriters::pipelineUses(s.pipeline, pass)) {
      rewriters::dropPass(s.pipeline, pass);
      s.dropped.push_back(pass);
    }
  if (s.dropped.empty() || s.pipeline.elements.empty()) return std::nullopt;
  return s;
}

BuiltCandidate buildCandidate(const torch::jit::Module& original, const ir::ImportOptions& importOptions,
                              const rewriters::Pipeline& pipeline, const rewriters::PassContext& like) {
  BuiltCandidate b;
  b.optimizer = std::make_shared<Optimizer>(Optimizer::fromModule(original, importOptions));
  rewriters::PassContext ctx;
  ctx.targetDevice = like.targetDevice;
  ctx.preferBf16 = like.preferBf16;
  ctx.exampleInputs = like.exampleInputs;
  b.optimizer->run(pipeline, &ctx);
  b.result = b.optimizer->serialize();
  b.model = &b.optimizer->model();
  b.nodes = b.model->forward().numNodes();
  return b;
}

}  // namespace ptopt
