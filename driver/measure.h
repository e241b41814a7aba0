// Never slower: time the optimized model against its input, interleaved and
// bounded, and pick what to write when the optimized one is measurably
// slower (DESIGN.md: no preset may hand back a model slower than its input
// on the machine that ran it).
//
// The timing is the measuring library's (measure/): its sampler runs IN,
// OUT, IN, OUT ... so that drift of the machine hits both, after a warm-up
// (TorchScript's profiling executor specializes a graph over its first
// runs), and the median ratio OUT/IN gets a bootstrap 95% confidence
// interval, judged by its one verdict rule: OUT is measurably slower when
// the interval's lower bound is above 1 + margin (default 2%): noise alone
// does not reject a model, and a model that is slower only within noise is
// kept.
//
// The decision is made by pickNotSlower over candidates in order of
// preference (OUT, then e.g. the same pipeline without its precision and
// layout passes, then the input itself): the first one not measurably
// slower than IN is written; the last is taken without timing. Runs are
// measure::Subjects timed on a measure::Clock, so tests drive the logic with
// a fake clock.
// `ptopt IN OUT` runs this as its `measure` stage (tools/cmd_optimize.cpp);
// the Python package can call measureModules / pickNotSlower as well.
#pragma once

#include "api/api.h"
#include "measure/clock.h"
#include "measure/stats.h"
#include "measure/verdict.h"

#include "rewriters/pipeline.h"

#include <c10/core/Device.h>
#include <torch/script.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptopt {

// How far apart every one of too few pairs must be for a verdict (25%).
constexpr double kClearDifference = 0.25;

struct MeasureOptions {
  double budgetSeconds = 2.0;  // warm-up and timed pairs together (--measure-budget); pickNotSlower: for all its candidates
  int threads = 1;             // intra-op threads while timing (0: leave LibTorch's setting)
  // The fewest timed pairs the interval's verdict is drawn from. With
  // hardBudget the budget holds and fewer may fit (a slow model): then the
  // verdict is drawn only when every pair, two at least, differs by more
  // than kClearDifference the same way, else there is none (no clear
  // difference, OUT kept), and the measurement says so; without it,
  // minPairs are timed even past the budget.
  size_t minPairs = 5;
  bool hardBudget = true;
  size_t maxPairs = 100;       // enough for a tight interval; fast models stop here
  int warmupRuns = 3;          // untimed runs of each model first
  double margin = 0.02;        // slower only when the CI's lower bound exceeds 1 + margin
  // Stop before the budget once the answer to "is B slower?" is clear: at
  // minPairs and every 5 pairs after, when the CI lies wholly above 1 +
  // margin (slower) or its high end below 1 + margin (not slower, whether or
  // not it is faster: measure::slowerSettled), or, with hardBudget, when the
  // pairs that still fit could not make it slower even if each of them were
  // (measure::slowerReachable); and, with hardBudget, on a model so slow that
  // fewer than minPairs pairs fit, as soon as a pair differs by less than
  // kClearDifference (or the pairs disagree in direction): no verdict can come.
  bool earlyStop = true;
  // Run both through LibTorch's profiling executor with its graph optimizer
  // on, as deployment does. Off by default (as verification runs them): the
  // optimizer's first runs cost time superlinear in the graph (seconds for
  // a few thousand nodes), which would break the budget, and on a CPU the
  // steady state of a conv net differs little.
  bool optimizingExecutor = false;
};

// The one verdict rule (measure/verdict.h).
using SpeedVerdict = measure::Verdict;
using measure::verdictName;

// OUT (b) against IN (a).
struct SpeedMeasurement {
  measure::RatioEstimate ratio;  // median(b) / median(a), 95% CI
  measure::TimingStats a, b;
  size_t pairs = 0;
  int threads = 0;
  double seconds = 0;  // wall time of the comparison, warm-up included
  SpeedVerdict verdict = SpeedVerdict::NoClearDifference;
  // Fewer pairs than a verdict needs fitted in the budget (hardBudget): no
  // verdict was drawn.
  bool tooFewPairs = false;
  // Stopped before minPairs because the pairs left in the budget could not
  // make B slower (futility); tooFewPairs is then set too.
  bool futile = false;
  size_t minPairs = 0;    // what a verdict needs
  double budgetSeconds = 0;
  // "0.62x (95% CI 0.60-0.64; 24 interleaved pairs, 1 thread, median 40.1 vs 64.7 ms)", and
  // with too few pairs, how many fitted in the budget.
  std::string line() const;
};

// The timing loop: warm-up runs of each, then pairs a, b on `clock` until
// the budget is spent (warm-up included; at least minPairs) or, with
// earlyStop, the verdict is settled (measure/verdict.h). Threads are not
// touched here (the measure stage does that).
SpeedMeasurement measurePair(const measure::Subject& a, const measure::Subject& b, const MeasureOptions& options,
                             measure::Clock& clock);

// One candidate to write: `build` makes it and returns the subject that runs
// it once; it throws when the candidate cannot be built, verified
// or run (the reason is recorded and the next one tried).
struct Candidate {
  std::string name;         // "output", "fp32 structure", "input"
  std::string description;  // for messages
  std::function<measure::Subject()> build;
};
struct CandidateOutcome {
  std::string name;
  std::optional<SpeedMeasurement> measurement;  // none for the last one (taken untimed) or a failure
  std::string error;                            // why it could not be used
};
struct NeverSlowerResult {
  size_t chosen = 0;  // index into candidates
  std::vector<CandidateOutcome> tried;  // in order, up to and including the chosen one
};
// Tries the candidates in order against IN (`in`): the first that is
// not measurably slower is chosen; the last one is taken without timing
// (it should be the input itself). The budget is the whole choice's: each
// comparison gets what the ones before it (and the builds) left, and at
// least minPairs pairs. Throws std::invalid_argument without candidates.
NeverSlowerResult pickNotSlower(const measure::Subject& in, const std::vector<Candidate>& candidates,
                                const MeasureOptions& options, measure::Clock& clock);

// ---- The candidates `ptopt IN OUT` falls back to

// A subject that runs `module` once on `inputs` on `device` (moved there
// first; time it on a measure::DeviceClock of that device).
measure::Subject moduleSubject(std::string name, torch::jit::Module module, std::vector<c10::IValue> inputs,
                               c10::Device device);

// The pipeline without its precision and layout passes (cast, quantize,
// channels-last): the fp32 structure of a run. nullopt when the pipeline
// has none of them, or nothing else.
struct StructurePipeline {
  rewriters::Pipeline pipeline;
  std::vector<std::string> dropped;  // the passes left out: precision first, then layout (PassEffects)
  std::string description() const;   // "the pipeline without cast, channels-last"
};
std::optional<StructurePipeline> fp32StructurePipeline(const rewriters::Pipeline& pipeline);

// `pipeline` run on a fresh import of `original` (with the target, the
// bf16 preference and the example inputs of `like`), exported and loaded
// back: what would be written.
struct BuiltCandidate {
  Optimizer::Serialized result;
  size_t nodes = 0;
  const ir::Model* model = nullptr;   // valid while the BuiltCandidate lives
  std::shared_ptr<Optimizer> optimizer;
};
BuiltCandidate buildCandidate(const Optimizer& from, const ir::ImportOptions& importOptions,
                              const rewriters::Pipeline& pipeline, const rewriters::PassContext& like,
                              ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs);

// Sets LibTorch's intra-op thread count for a scope (threads <= 0: leaves
// it), restoring the previous count. The load-time values of `repacked`
// (oneDNN's packed weights, whose blocking follows the thread count) are
// recomputed at the new count and again at the restored one, so each is
// timed as a load at that count would run it; also when the count does not
// change but they were computed at another (`packedAt` > 0).
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads, std::vector<torch::jit::Module> repacked = {}, int packedAt = 0);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  void repack();
  int previous_;
  bool changed_ = false;
  std::vector<torch::jit::Module> repacked_;
};

}  // namespace ptopt
