#include "driver/measure.h"

#include "ir/load_time.h"
#include "ir/model.h"
#include "measure/sampler.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ptopt {

std::string SpeedMeasurement::line() const {
  if (tooFewPairs && pairs == 0)
    return fmt::format("not timed: one run of each took {:.1f} s, and a pair does not fit in the {:.1f} s budget "
                       "(--measure-budget)", seconds, budgetSeconds);
  if (futile)
    return fmt::format("{:.3f}x from {} pairs (fewer than the {} an interval needs: the pairs left in the {:.1f} s "
                       "budget could not make OUT slower, --measure-budget), {} thread{}, median {:.3f} vs {:.3f} ms",
                       ratio.median, pairs, minPairs, budgetSeconds, threads, threads == 1 ? "" : "s", b.medianMs,
                       a.medianMs);
  if (tooFewPairs)
    // Stopped at the budget, or before it once the pairs left to fit could
    // not reach minPairs nor change the answer: either way fewer than an
    // interval needs fit.
    return fmt::format("{:.3f}x from {} pair{} only (fewer than the {} an interval needs fit in the {:.1f} s budget{}: "
                       "--measure-budget), {} thread{}, median {:.3f} vs {:.3f} ms",
                       ratio.median, pairs, pairs == 1 ? "" : "s", minPairs, budgetSeconds,
                       verdict == SpeedVerdict::NoClearDifference ? "" : "; every pair beyond 25%", threads,
                       threads == 1 ? "" : "s", b.medianMs, a.medianMs);
  return fmt::format("{:.3f}x (95% CI {:.3f}-{:.3f}; {} interleaved pairs, {} thread{}, median {:.3f} vs {:.3f} ms)",
                     ratio.median, ratio.low, ratio.high, pairs, threads, threads == 1 ? "" : "s", b.medianMs,
                     a.medianMs);
}

SpeedMeasurement measurePair(const measure::Subject& a, const measure::Subject& b, const MeasureOptions& o,
                             measure::Clock& clock) {
  measure::SamplingPlan plan;
  plan.warmupRounds = o.warmupRuns;
  plan.minRounds = static_cast<int>(o.minPairs);
  plan.hardBudget = o.hardBudget;
  plan.maxRounds = static_cast<int>(o.maxPairs);
  plan.budgetSeconds = o.budgetSeconds;  // the warm-up counts against it
  // Stop before the budget once the answer is clear (asked after every pair).
  plan.checkFrom = 1;
  plan.checkEvery = 1;
  const double start = clock.elapsedSeconds();
  // A pair's time at the fastest pair's pace so far (a slow first pair must
  // not make the budget look spent), and the pairs that still fit.
  auto pairSeconds = [](const measure::Sampling& s) {
    double pairMs = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < s.ms[0].size(); ++i) pairMs = std::min(pairMs, s.ms[0][i] + s.ms[1][i]);
    return pairMs * s.callsPerSample / 1000.0;
  };
  auto pairsLeft = [&o, &clock, start, pairSeconds](const measure::Sampling& s) {
    const double pair = pairSeconds(s);
    const double left = o.budgetSeconds - (clock.elapsedSeconds() - start);
    return static_cast<size_t>(pair > 0 && left > 0 ? std::floor(left / pair) : 0);
  };
  bool futile = false;
  auto settled = [&o, &futile, pairsLeft, pairSeconds](const measure::Sampling& s) {
    const size_t n = s.ms[0].size();
    if (n < o.minPairs) {
      if (!o.hardBudget) return false;
      const size_t left = pairsLeft(s);
      if (n + left >= o.minPairs) {
        // Futility from the second pair on, where minPairs pairs cost more
        // than half the budget (an interval is cheap elsewhere, and says
        // more): when even the pairs that still fit, each as slow as can
        // be, could not make B Slower, B is kept whatever they show (the 1
        // GB model under the cap timed 5 pairs for it, 0.8 s more than 2).
        if (n < 2 || pairSeconds(s) * static_cast<double>(o.minPairs) <= 0.5 * o.budgetSeconds) return false;
        futile = !measure::slowerReachable(s.ms[0], s.ms[1], left, o.margin);
        return futile;
      }
      // A slow model: when, at that pace, the pairs that fit in a hard
      // budget stay below minPairs, the only verdict left is every pair
      // differing by more than kClearDifference the same way; once one pair
      // does not, there will be none, and the rest of the budget would buy
      // nothing.
      bool slower = true, faster = true;
      for (size_t i = 0; i < n; ++i) {
        const double r = s.ms[1][i] / s.ms[0][i];
        slower = slower && r > 1 + kClearDifference;
        faster = faster && r < 1 - kClearDifference;
      }
      return !slower && !faster;
    }
    // Then at minPairs and every 5 pairs: the question answered, is B
    // slower? (the interval wholly above 1 + margin: yes; its high end below
    // 1 + margin: no, and more pairs could only tell "faster" from "no clear
    // difference", which decides nothing).
    if ((n - o.minPairs) % 5 != 0) return false;
    if (measure::slowerSettled(measure::bootstrapMedianRatio(s.ms[0], s.ms[1], 400), o.margin)) return true;
    // With a hard budget, also once the pairs that still fit could not make
    // B Slower even if every one of them were (futility: B is kept either
    // way, so the rest of the budget would buy nothing).
    return o.hardBudget && !measure::slowerReachable(s.ms[0], s.ms[1], pairsLeft(s), o.margin);
  };
  const measure::Sampling s =
      measure::sampleInterleaved(clock, {a, b}, plan, o.earlyStop ? std::function<bool(const measure::Sampling&)>(settled)
                                                                    : std::function<bool(const measure::Sampling&)>());
  SpeedMeasurement m;
  m.pairs = s.ms[0].size();
  m.seconds = s.seconds;
  m.threads = o.threads;
  m.minPairs = o.minPairs;
  m.budgetSeconds = o.budgetSeconds;
  m.tooFewPairs = m.pairs < o.minPairs;
  m.futile = futile && m.tooFewPairs;
  if (m.pairs == 0) {  // nothing timed: no clear difference
    m.ratio.median = m.ratio.low = m.ratio.high = 1;
    return m;
  }
  m.a = measure::summarize(s.ms[0]);
  m.b = measure::summarize(s.ms[1]);
  m.ratio = measure::bootstrapMedianRatio(s.ms[0], s.ms[1]);
  m.verdict = measure::judge(m.ratio, o.margin);
  if (m.tooFewPairs) {
    // Too few pairs for the interval: a verdict only when every pair (two at
    // least) differs by more than kClearDifference the same way (an fp16
    // model 14x slower on a CPU), else none.
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (size_t i = 0; i < m.pairs; ++i) {
      const double r = s.ms[1][i] / s.ms[0][i];
      lo = std::min(lo, r), hi = std::max(hi, r);
    }
    m.verdict = m.pairs < 2                       ? SpeedVerdict::NoClearDifference
                : lo > 1 + kClearDifference       ? SpeedVerdict::Slower
                : hi < 1 - kClearDifference       ? SpeedVerdict::Faster
                                                  : SpeedVerdict::NoClearDifference;
  }
  return m;
}

// Set even when the count is already LibTorch's: at::set_num_threads also
// sizes the pthreadpool XNNPACK runs on, which OMP_NUM_THREADS does not (it
// starts with one thread per core), and a 1-thread timing reads the calling
// thread's CPU time, so work on other pool threads would go uncounted.
ScopedThreads::ScopedThreads(int threads, std::vector<torch::jit::Module> repacked, int packedAt)
    : previous_(at::get_num_threads()),
      changed_(threads > 0 && (threads != previous_ || (packedAt > 0 && packedAt != threads))),
      repacked_(std::move(repacked)) {
  if (threads > 0) at::set_num_threads(threads);
  repack();
}
ScopedThreads::~ScopedThreads() {
  at::set_num_threads(previous_);
  try {
    repack();
  } catch (const std::exception&) {  // the packs made at the timing's count still compute the same values
  }
}
void ScopedThreads::repack() {
  if (!changed_) return;
  torch::NoGradGuard noGrad;
  for (torch::jit::Module& m : repacked_) ir::repackLoadTimeValues(m);
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

NeverSlowerResult pickNotSlower(const measure::Subject& in, const std::vector<Candidate>& candidates,
                                const MeasureOptions& options, measure::Clock& clock) {
  if (candidates.empty()) throw std::invalid_argument("pickNotSlower: no candidates");
  NeverSlowerResult result;
  // One budget for the whole choice: a fallback gets what the comparisons
  // (and builds) before it left, and at least minPairs pairs (OUT against IN
  // keeps it: options.hardBudget).
  const double start = clock.elapsedSeconds();
  for (size_t i = 0; i < candidates.size(); ++i) {
    CandidateOutcome outcome{candidates[i].name, std::nullopt, ""};
    const bool last = i + 1 == candidates.size();
    try {
      const measure::Subject candidate = candidates[i].build();
      if (last) {
        result.tried.push_back(outcome);
        result.chosen = i;
        return result;
      }
      MeasureOptions left = options;
      left.budgetSeconds = std::max(0.0, options.budgetSeconds - (clock.elapsedSeconds() - start));
      // OUT against IN keeps the budget; once OUT is slower, a fallback is
      // timed for minPairs at least: it is written only when it is not slower.
      if (i > 0) left.hardBudget = false;
      outcome.measurement = measurePair(in, candidate, left, clock);
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

measure::Subject moduleSubject(std::string name, torch::jit::Module module, std::vector<c10::IValue> inputs,
                               c10::Device device) {
  module = ir::moduleOnDevice(module, device);
  module.eval();
  return {std::move(name), [module, inputs = std::move(inputs)]() mutable { module.forward(inputs); }};
}

std::string StructurePipeline::description() const {
  std::string s;
  for (const auto& d : dropped) s += (s.empty() ? "" : ", ") + d;
  return "the pipeline without " + s;
}

std::optional<StructurePipeline> fp32StructurePipeline(const rewriters::Pipeline& pipeline) {
  StructurePipeline s{pipeline, {}};
  // int8 too: the fallback is an fp32 model, verified as one.
  const rewriters::PassRegistry& registry = defaultRegistry();
  s.dropped = rewriters::dropPassesWhere(s.pipeline, registry, [](const rewriters::PassEffects& e) {
    return e.lowersPrecision;
  });
  for (const std::string& name : rewriters::dropPassesWhere(s.pipeline, registry, [](const rewriters::PassEffects& e) {
         return e.changesLayout;
       }))
    s.dropped.push_back(name);
  if (s.dropped.empty() || s.pipeline.elements.empty()) return std::nullopt;
  return s;
}

BuiltCandidate buildCandidate(const Optimizer& from, const ir::ImportOptions& importOptions,
                              const rewriters::Pipeline& pipeline, const rewriters::PassContext& like,
                              ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs) {
  BuiltCandidate b;
  b.optimizer = std::make_shared<Optimizer>(from.freshCopy(importOptions));
  rewriters::PassContext ctx;
  ctx.targetDevice = like.targetDevice;
  ctx.preferBf16 = like.preferBf16;
  ctx.assumedIsa = like.assumedIsa;
  ctx.tensorValuesOnly = like.tensorValuesOnly;
  ctx.exampleInputs = like.exampleInputs;
  b.optimizer->run(pipeline, &ctx);
  b.result = b.optimizer->serialize(format, exampleInputs);
  b.model = &b.optimizer->model();
  b.nodes = b.model->forward().numNodes();
  return b;
}

}  // namespace ptopt
