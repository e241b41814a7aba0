// Tunable passes: a pass whose profit depends on the machine declares, next
// to its own code, the decisions --tune makes for it; the tuner
// (tune/tune_model.h) is a driver that knows no pass by name.
//
// Contract. A `Tunable` is registered with its pass (`addTunable`, in the
// folder's register function) and is one of two kinds:
//   - it tunes its pass's element: when the pipeline has an element of
//     `pass`, the tuner hands it to `tuneElement`, which decides the
//     element's options from measurements and keeps what it decided
//     (`TuningSession::keep`: the element as given, with its options filled,
//     or nothing);
//   - it offers a pass the pipeline does not name (the kernel choices): when
//     `applies` holds, `offer` is called once, before the first element of
//     one of the passes in `offeredBefore` (or after the last element); it
//     keeps the elements it decided, or none. Offered tunables declare what
//     their decisions settle and what they build on (TuningAspect), and the
//     tuner offers each after every one that settles what it builds on: the
//     order is resolved from declarations, so two tunables in folders that
//     must not know each other (kernels/, layout/) never name each other.
// A decision point is one call of the session's deciders: per op
// (`decideOp`: the op's signature, tune/signature.h, its candidates built on
// demand, a micro-benchmark each; cached by signature), per whole model
// (`compareModels`: the exported variants on the example inputs), or a
// composite of whole-model A/Bs (`timeModels` + `recordMeasured`, as
// channels-last's regions). The baseline is always candidate 0, "no
// rewrite", kept unless another wins beyond noise (tune/tuner.h). The session
// owns the budget, the cache, the timer, the progress lines and the one
// check of a set of per-op choices on the whole model (`preferOpByOp`).
// `expectedDecisions` says about how many decisions a tunable times on a
// model, for the budget's shares: counted for every offered tunable, and
// for an element's when the pipeline has that pass.
#pragma once

#include "ir/ir.h"
#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pipeline.h"
#include "rewriters/registry.h"
#include "tune/decision.h"
#include "tune/tuner.h"

#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::tune {

// What an offered tunable's decisions settle, or build on.
enum class TuningAspect {
  ConvKernels,    // which kernel each conv runs on (kernels/: conv-kernel)
  ConvLayout,     // the memory layout conv regions run in (layout/: oneDNN's blocked format)
  WeightPacking,  // whether conv weights are packed once at load
};

// Model variants of a whole-model A/B, the baseline first.
using ModelVariants = std::vector<std::pair<std::string, const ir::Model*>>;

class TuningSession {
 public:
  virtual ~TuningSession() = default;

  // ---- what the decisions read
  // The working copy, as the pipeline so far has left it.
  virtual ir::Model& model() = 0;
  // The model given to --tune (what alternative pipelines run on).
  virtual const ir::Model& input() const = 0;
  // The run's target, preferences and example inputs.
  virtual const rewriters::PassContext& context() const = 0;
  // The passes the pipeline runs with: their declared effects and options.
  virtual const rewriters::PassRegistry& registry() const = 0;
  virtual c10::Device device() const = 0;
  // Whether the pipeline being tuned has an element of `pass`.
  virtual bool pipelineUses(const std::string& pass) const = 0;
  // The elements kept so far.
  virtual const rewriters::Pipeline& tunedSoFar() const = 0;
  // A signature for a whole-model decision: a digest of the working copy's
  // graph and `extra`, and the example inputs' dtypes and shapes.
  virtual std::string modelSignature(const std::string& extra = "") const = 0;

  // ---- running passes
  // Runs `e` on the working copy; it is part of the tuned pipeline.
  virtual void keep(const rewriters::PipelineElement& e) = 0;
  // A copy of the working copy with `e` run on it.
  virtual ir::Model variant(const rewriters::PipelineElement& e) = 0;
  // A copy of the input model with `p` run on it (what an alternative
  // pipeline's passes make of it; the names its ops have there).
  virtual ir::Model inputAfter(const rewriters::Pipeline& p) = 0;

  // ---- deciding
  // A per-op decision: by the op's signature (with `context`, what else the
  // timing depends on) from the cache, else timed; the candidates (`names`
  // in order) are built by `make` only then (their inputs cost memory and
  // time). Whether a candidate other than the first was chosen; false
  // (recorded as skipped) when the op has no signature or candidates, or
  // building them threw (a kernel this machine lacks: they are out).
  using CandidateFactory = std::function<std::optional<std::vector<Candidate>>(std::string& why)>;
  virtual bool decideOp(const std::string& kind, const ir::Node& op, const std::vector<std::string>& names,
                        const CandidateFactory& make, const std::string& context = "") = 0;
  // The same, for more than two candidates: the chosen one's name (the
  // first when skipped).
  virtual std::string chooseOp(const std::string& kind, const ir::Node& op, const std::vector<std::string>& names,
                               const CandidateFactory& make, const std::string& context = "") = 0;
  // A whole-model A/B of `variants` (the baseline first), cached under
  // `signature`; skipped when the variants cannot be exported.
  virtual DecisionRecord compareModels(const std::string& kind, const std::string& signature,
                                       const ModelVariants& variants) = 0;
  // Per-op choices do not add up to the model (casts between two lowered
  // ops cancel, caches and layouts carry over), so an element made of them
  // (`opByOp`) is checked as a whole against the preset's (`preset`; none:
  // the element is absent), the preset's the baseline. Whether to keep
  // `opByOp`; `challenger` names its candidate.
  virtual bool preferOpByOp(const std::string& kind, const std::optional<rewriters::PipelineElement>& preset,
                            const std::optional<rewriters::PipelineElement>& opByOp,
                            const std::string& challenger = "op-by-op") = 0;
  // The same for several assignments (named; none: the element is absent)
  // in one whole-model A/B, the preset's the baseline: the index of the one
  // to keep, 0 for the preset, i + 1 for alternatives[i]. An alternative
  // whose model is the preset's, or an earlier alternative's, is not timed
  // again; the first alternative of the chosen model is returned (also of
  // the preset's model: its element spells out what was decided).
  using NamedElement = std::pair<std::string, std::optional<rewriters::PipelineElement>>;
  virtual size_t preferAmong(const std::string& kind, const std::optional<rewriters::PipelineElement>& preset,
                             const std::vector<NamedElement>& alternatives) = 0;
  // A per-op decision as decideOp makes it, with its record (the
  // challenger's ratio and interval tell a clear loss from noise).
  virtual DecisionRecord decideOpRecord(const std::string& kind, const ir::Node& op,
                                        const std::vector<std::string>& names, const CandidateFactory& make,
                                        const std::string& context = "") = 0;
  // The cached decision for `signature` when its choice is one of `names`
  // (recorded), else nullopt.
  virtual std::optional<DecisionRecord> fromCache(const std::string& kind, const std::string& node,
                                                  const std::string& signature,
                                                  const std::vector<std::string>& names) = 0;
  // Records a decision not measured: `baseline` kept, for `why`.
  virtual DecisionRecord skipped(const std::string& kind, const std::string& node, const std::string& baseline,
                                 const std::string& why) = 0;
  virtual DecisionRecord skip(DecisionRecord d, const std::string& why) = 0;

  // ---- composite decisions (several whole-model A/Bs for one choice)
  // Times the variants as one whole-model decision's share of the budget;
  // nullopt with `why` when the budget is spent, they cannot be exported, or
  // the baseline fails.
  virtual std::optional<Choice> timeModels(const ModelVariants& variants, std::string& why) = 0;
  // Records a decision measured by timeModels (and caches it under its
  // signature when `cache`).
  virtual DecisionRecord recordMeasured(DecisionRecord d, bool cache) = 0;
  // Whether any budget is left (when not, it is marked spent).
  virtual bool budgetLeft() = 0;
  // `n` more decisions than expectedDecisions said (the budget's shares).
  virtual void expectMoreDecisions(size_t n) = 0;

  // ---- progress
  virtual void say(const std::string& line) const = 0;
  virtual double elapsedSeconds() const = 0;
};

struct Tunable {
  std::string kind;  // its decisions' kind, also its name among tunables
  // Tunes the elements of `pass`:
  std::string pass;
  std::function<void(TuningSession&, const rewriters::PipelineElement&)> tuneElement;
  // Or offers passes the pipeline does not name:
  std::function<bool(TuningSession&)> applies;
  std::vector<std::string> offeredBefore;  // passes
  std::vector<TuningAspect> settles;       // what its decisions fix
  std::vector<TuningAspect> buildsOn;      // offered after every tunable that settles one of these
  std::function<void(TuningSession&)> offer;
  // Or proposes whole pipelines to run instead of the tuned one, for
  // rewrites that pay only as a whole network (every conv on XNNPACK in
  // fp32 channels-last, where the tuned pipeline chose bf16 per op): when
  // `applies` holds, `alternatives` makes them (named) from the pipeline
  // given to --tune; after the pipeline is tuned, each is run on the input
  // model, and the tuned model and those that differ from it are timed in
  // one whole-model A/B (the tuned one the baseline, kept within noise).
  // The winner's pipeline is the result.
  std::function<std::vector<std::pair<std::string, rewriters::Pipeline>>(TuningSession&, const rewriters::Pipeline&)>
      alternatives;
  // About how many decisions it times on `graph`.
  std::function<size_t(const ir::Graph&)> expectedDecisions;
  // How the summary lists the kinds of its decisions (tune/decision.h), by
  // kind; kinds not named are listed when rewritten.
  std::map<std::string, Listing> listing;

  bool offered() const { return static_cast<bool>(offer); }
  bool proposesPipelines() const { return static_cast<bool>(alternatives); }
  bool tunesElements() const { return !offered() && !proposesPipelines(); }
};

// A tunable of `pass`'s elements whose decisions are of `kind`, listed in
// the summary as `listing` says.
Tunable elementTunable(std::string kind, std::string pass,
                       std::function<void(TuningSession&, const rewriters::PipelineElement&)> tune,
                       Listing listing = Listing::Rewritten);

// Registers `t` next to its pass. Throws std::logic_error when a tunable of
// that kind, or a second one for the same pass's elements, is registered.
void addTunable(rewriters::PassRegistry& registry, Tunable t);
// The registered tunables, in registration order.
std::vector<std::shared_ptr<const Tunable>> tunables(const rewriters::PassRegistry& registry);

// The convs (any conv op) and linears in `graph`: what the per-op kernel and
// precision decisions measure, for expectedDecisions.
size_t convsAndLinears(const ir::Graph& graph);

// A candidate that calls an ATen operator boxed with fixed arguments: the
// same on LibTorch 1.13 and 2.x, whatever the C++ signature.
Candidate boxedCandidate(std::string name, const std::string& op, const std::string& overload,
                         std::vector<c10::IValue> args);

// The first line of an error's message (c10 errors carry a backtrace after it).
inline std::string firstLine(const std::string& what) { return what.substr(0, what.find('\n')); }

// One candidate per (name, model): each exported (ir::exportModel), moved to
// `device` and called on `inputs`. `loadTimeOnce`: as a TorchScript OUT runs
// (load-time values, ir/load_time.h, computed once when it loads); false: as
// a program (.pt2) runs, whose packed weights are computed on every call
// (ir::runnableProgram), so that --tune times what OUT will do.
std::vector<Candidate> wholeModelCandidates(const ModelVariants& models, const std::vector<c10::IValue>& inputs,
                                            c10::Device device, bool loadTimeOnce = true);

}  // namespace ptopt::tune
