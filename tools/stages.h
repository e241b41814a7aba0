// The stages of an optimization after the model is loaded, shared by
// `ptopt IN OUT` (tools/cmd_optimize.cpp) and the library's optimizeModule
// (tools/session.h, which the Python package calls), so that both run one
// sequence:
//   reference  referenceStage: the module the result is compared with, the
//              passes' context, the tolerances of the pipeline's precision;
//              referenceOutputs: the reference outputs on the planned inputs
//              (the front end plans them: flags or an InputRequest);
//   calibrate  calibrationStage (--calibration / calibration=): the data
//              checked and handed to the passes, a batch held out to verify on;
//   tune       tuneStage (--tune / tune=True): measured options for the
//              machine-dependent passes; the tolerances follow;
//   run        runStage: the pipeline (the front end gives the instruments),
//              what a lower precision means for verification;
//   export     exportStage: the result exported and handed to the front
//              end's `write` hook, which keeps the bytes (the CLI streams
//              them into OUT's temporary file, ir::AtomicModuleFile; Python
//              keeps them in memory) and returns the module loaded back from
//              exactly those bytes: what is verified is what is written;
//   verify     verifyStage: that module (or a CPU stand-in) against the
//              reference outputs;
//   measure    measureStage: OUT timed against IN (tools/measure.h); when it
//              is measurably slower, the first verified candidate that is
//              not (the fp32 structure, then IN) replaces it, unless force.
//              With tune, a verdict an earlier run measured for the same IN
//              and OUT bytes is taken from the tuning cache
//              (tools/measure_cache.h).
// The front ends keep what differs: how options arrive, loading, planning
// the inputs, where the bytes go, what is printed (the `say` and `note`
// hooks) and how failure is reported (exit codes; exceptions).
#pragma once

#include "tools/api.h"
#include "tools/measure.h"
#include "tools/report.h"

#include "quant/precision_check.h"
#include "tune/tune_model.h"
#include "verify/input_plan.h"

#include <c10/core/Device.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ptopt {

struct StageSettings {
  c10::Device device = c10::kCPU;  // where verification and timing run
  std::string target = "auto";     // the device the result is for (auto: `device`)
  bool preferBf16 = false;
  bool verify = true;              // false: --no-verify / verify=False
  bool describeTarget = false;     // say the target's capabilities (--explain, -v)
  std::ostream* explain = nullptr; // the passes' --explain output
  // The tolerances for a precision's defaults, with the caller's overrides.
  std::function<verify::ToleranceSet(const verify::Tolerance& base)> tolerances;
  ir::ImportOptions importOptions;  // how IN was imported (the fp32-structure candidate is imported the same way)
  // --tune
  bool tune = false;
  double tuneBudgetSeconds = 0;  // <= 0: tune::kDefaultBudgetSeconds
  std::string tuningCache;       // "": tune::TuningCache::defaultPath()
  std::ostream* tuneProgress = nullptr;
  // measure
  bool measure = true;            // false: skipped (noMeasureReason says why: "--no-measure", "measure=False")
  std::string noMeasureReason = "--no-measure";
  bool force = false;             // keep OUT even when it is measurably slower
  MeasureOptions measureOptions;
  std::string tuningCachePath() const;
};

struct StageHooks {
  // A line of the run's account ("speed: ...", "pipeline: ..."); with its
  // newline. The CLI prints it (not with -q); Python drops it.
  std::function<void(const std::string&)> say;
  // A note the user should see (no "note: " prefix, no newline): the CLI
  // prints "note: ..." (not with -q), Python warns.
  std::function<void(const std::string&)> note;
  // Always shown (the CLI prints it even with -q; Python warns).
  std::function<void(const std::string&)> notice;
  // A pass's warning ("quantize: no --calibration data; ..."): the CLI
  // prints "ptopt: WARNING: ..." on stderr (even with -q); Python warns.
  std::function<void(const std::string&)> warning;
  // export: keeps the bytes of `exported` and returns the module loaded back
  // from them. Throws std::system_error for a failed write.
  std::function<torch::jit::Module(const torch::jit::Module& exported)> write;
  // measure with tune: digests of IN's bytes and of what `write` kept.
  std::function<std::string()> inputDigest, outputDigest;
  // measure: IN itself as what to write unchanged.
  std::function<Optimizer::Serialized()> inputAsOutput;
};

// One run's state, filled as the stages go.
struct Stages {
  StageSettings settings;
  StageHooks hooks;
  rewriters::Pipeline pipeline;          // the planned one; tuneStage replaces it
  std::optional<Optimizer> opt;          // the front end loads it
  rewriters::PassContext ctx;            // referenceStage
  verify::ToleranceSet tolerances;       // referenceStage, tuneStage
  std::optional<verify::ReferenceRunner> runner;  // referenceOutputs: nullopt when nothing is verified
  std::optional<tune::TuneResult> tuned; // tuneStage
  rewriters::RunReport report;           // runStage
  std::optional<quant::LowPrecisionRun> lowp;  // runStage: set when the pipeline lowered precision
  torch::jit::Module result;             // exportStage: loaded back from what `write` kept
  std::optional<Optimizer::StandIn> standIn;  // exportStage: what a CPU checks instead
  size_t nodesBefore = 0, nodesAfter = 0;
  std::optional<Optimizer::Serialized> replacement;  // measureStage: written in place of OUT
  std::string written;                   // measureStage: what replaces OUT ("" = OUT)
  tools::RunRecord record;               // the --report record (stage times, sections, counts)

  bool verifying() const { return runner && settings.verify; }
  void say(const std::string& s) const;
  void note(const std::string& s) const;
  void notice(const std::string& s) const;
  void warning(const std::string& s) const;
};

// The counts before (record.opsBefore, parameter bytes, nodesBefore) of the
// loaded model.
void countBefore(Stages& r);

// reference: Optimizer::reference for the pipeline, the mode notes, the
// passes' context, the target section of the record, the tolerances.
Optimizer::Reference referenceStage(Stages& r);
// The reference outputs on `inputs` (a planned source): r.runner when
// verifying (timed as "reference"); given inputs are run once without it.
// The passes get given inputs as example inputs. Throws verify::ReferenceError
// when the reference fails on them.
void referenceOutputs(Stages& r, const Optimizer::Reference& reference, const verify::InputPlan& inputs);

// calibration (--calibration FILE / calibration=[...]): `values` split into
// batches and checked against the model's inputs (and the given example
// shapes), then handed to the passes (r.ctx.inputs). With planned inputs
// that are not fixed values and two batches or more, verification runs on
// the last batch, which the quantize pass holds out from calibration (int8
// judged on random inputs far from the data it was calibrated on says
// nothing). `what` names the data in messages ("--calibration",
// "calibration"). Throws ir::InputError for bad data.
void calibrationStage(Stages& r, const std::vector<c10::IValue>& values, const std::string& source,
                      const std::string& what, verify::InputPlan& inputs);

// tune: throws std::invalid_argument without example inputs.
void tuneStage(Stages& r);

// run: the pipeline with `inst`; throws what a pass or an instrument throws.
void runStage(Stages& r, const rewriters::Instrumentation& inst = {});

// export: throws std::system_error (write failed) or std::runtime_error (the
// model does not serialize or load back: a ptopt bug).
void exportStage(Stages& r);

// verify: whether it passed (true when nothing is verified); the report is
// r.record.verification.
bool verifyStage(Stages& r);

// Why the measure stage will not time OUT against IN; nullopt when it will.
std::optional<std::string> whyNotMeasured(const Stages& r);
// measure: sets r.record.sections["measurement"], and r.replacement /
// r.written when something faster than OUT is written instead.
void measureStage(Stages& r, bool ok);

}  // namespace ptopt
