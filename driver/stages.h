// The stages of an optimization after the model is loaded, run in this
// order by the driver (driver/driver.h) for every front end:
//   reference  referenceStage: the module the result is compared with, the
//              passes' context, the tolerances of the pipeline's precision;
//              referenceOutputs: the reference outputs on the planned inputs
//              (planned by the driver, by the request's policy);
//   calibrate  calibrationStage (--calibration / calibration=): the data
//              checked and handed to the passes, a batch held out to verify on;
//   tune       tuneStage (--tune / tune=True): measured options for the
//              machine-dependent passes; the tolerances follow;
//   run        runStage: the pipeline (the driver gives the instruments),
//              what a lower precision means for verification;
//   export     exportStage: the result exported and handed to the `write`
//              hook, which keeps the bytes (streamed into OUT's temporary
//              file, ir::AtomicModuleFile, or kept in memory) and returns the
//              module loaded back from exactly those bytes: what is verified
//              is what is written;
//   verify     verifyStage: that module (or a CPU stand-in) against the
//              reference outputs;
//   measure    measureStage (driver/measure_stage.cpp): OUT timed against
//              IN (driver/measure.h); when it is measurably slower, the first
//              verified candidate that is not (the fp32 structure, then IN)
//              replaces it, unless force.
//              With tune, a verdict an earlier run measured for the same IN
//              and OUT bytes is taken from the tuning cache
//              (driver/measure_cache.h).
// The driver plans the inputs and the pipeline, loads, and saves. Each stage
// reads the run's settings (RunSettings: the request, the device, the hooks
// it reports through) and the results of the stages before it, and returns
// its own as a typed value (ReferenceResult, RunResult, ExportResult,
// MeasureOutcome); what goes into the --report record it writes into the
// record it is given.
#pragma once

#include "driver/request.h"
#include "api/api.h"
#include "driver/measure.h"
#include "driver/report.h"

#include "verify/precision.h"
#include "tune/tune_model.h"
#include "verify/input_plan.h"

#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ptopt {

// What the export stage hands the `write` hook: the result in OUT's format,
// a TorchScript module to stream, or a .pt2 archive's bytes.
struct ExportedModel {
  ir::ModelFormat format = ir::ModelFormat::TorchScript;
  torch::jit::Module module;  // TorchScript
  std::string bytes;          // .pt2
};

// What the stages hand to the front end (driver::FrontEnd's hooks) and
// where the driver keeps the bytes.
struct StageHooks {
  // A line of the run's account ("speed: ...", "pipeline: ..."); with its newline.
  std::function<void(const std::string&)> say;
  // A note the user should see (no "note: " prefix, no newline).
  std::function<void(const std::string&)> note;
  // Always shown.
  std::function<void(const std::string&)> notice;
  // A pass's warning ("quantize: no --calibration data; ...").
  std::function<void(const std::string&)> warning;
  // export: keeps the bytes of `exported` (OUT's temporary file, or memory).
  // Throws std::system_error for a failed write.
  std::function<void(const ExportedModel& exported)> write;
  // The module loaded back from the bytes `write` kept (called after the IR
  // and the original are let go, so that the model is not held three times).
  std::function<torch::jit::Module()> loadBack;
  // measure with tune: digests of IN's bytes and of what `write` kept.
  std::function<std::string()> inputDigest, outputDigest;
  // measure: IN itself as what to write unchanged.
  std::function<Optimizer::Serialized()> inputAsOutput;
};

// What every stage reads, fixed by the driver before the stage that needs
// it (the device and settings when the run is planned; OUT's format once IN
// is loaded; the example inputs once they are planned). Stages take it
// const: what they find they return.
struct RunSettings {
  const driver::Request* req = nullptr;  // what was asked
  c10::Device device = c10::kCPU;        // where verification and timing run (req->device resolved)
  MeasureOptions measureOptions;         // the never-slower stage's, from req
  std::ostream* explain = nullptr;       // the passes' --explain output (with req->explain)
  std::ostream* tuneProgress = nullptr;  // --tune's progress lines
  std::string noMeasureName = "--no-measure";  // how the front end names measure = false
  StageHooks hooks;
  ir::ModelFormat outputFormat = ir::ModelFormat::TorchScript;  // OUT's (req->to, OUT's extension, IN's format)
  std::vector<c10::IValue> exampleInputs;  // one planned input set: a .pt2's metadata run (empty: the recorded shapes)

  std::string tuningCachePath() const;
  void say(const std::string& s) const;
  void note(const std::string& s) const;
  void notice(const std::string& s) const;
  void warning(const std::string& s) const;
};

// A model's size: nodes of forward, op counts, parameter bytes (the record's
// before and after).
struct ModelCounts {
  size_t nodes = 0;
  std::map<std::string, size_t> ops;
  size_t parameterBytes = 0;
};
ModelCounts countModel(const ir::Model& model);

// reference: what the result is checked against and how, and the passes'
// context. The tune stage may change the tolerances (its pipeline lowers
// precision differently); the run stage adapts the runner's inputs.
struct ReferenceResult {
  Optimizer::Reference reference;        // the module the outputs come from
  rewriters::PassContext ctx;            // the passes' context (calibration, example inputs, reports)
  verify::ToleranceSet tolerances;       // of the pipeline's lowest precision
  std::optional<verify::ReferenceRunner> runner;  // referenceOutputs: nullopt when nothing is verified

  bool verifying(const driver::Request& req) const { return runner && req.verifying(); }
  // New tolerances, for the runner too.
  void setTolerances(verify::ToleranceSet t);
};

// run: what the pipeline did.
struct RunResult {
  rewriters::RunReport report;
  std::optional<verify::LowPrecisionRun> lowp;  // set when the pipeline lowered precision
};

// export: what was written, as loaded back from its bytes.
struct ExportResult {
  torch::jit::Module module;  // loaded back from what `write` kept
  int packedThreads = 0;      // the intra-op count its load-time values were computed at
  std::optional<Optimizer::StandIn> standIn;  // what a CPU checks instead
  ModelCounts counts;         // of the result
  // Why OUT is not timed against IN although the run measures (an int8
  // .pt2: its speed is what a compiler makes of it); nullopt when it is.
  std::optional<std::string> notTimed;
};

// measure: what is written instead of OUT, when something is.
struct MeasureOutcome {
  std::optional<Optimizer::Serialized> replacement;  // written in place of OUT
  std::string written;                               // what replaces OUT ("" = OUT)
  std::optional<ModelCounts> counts;                 // the replacement's
};

// reference: Optimizer::reference for the pipeline, the mode notes, the
// passes' context, the target section of the record, the tolerances.
ReferenceResult referenceStage(const RunSettings& s, const Optimizer& opt, const rewriters::Pipeline& pipeline,
                               driver::RunRecord& record);
// The reference outputs on `inputs` (a planned source): ref.runner when
// verifying (timed as "reference"); given inputs are run once without it.
// The passes get given inputs as example inputs. Throws verify::ReferenceError
// when the reference fails on them.
void referenceOutputs(const RunSettings& s, const Optimizer& opt, ReferenceResult& ref,
                      const verify::InputPlan& inputs, driver::RunRecord& record);
// The tolerances of what `pipeline` may lower precision to, with the
// request's overrides.
verify::ToleranceSet tolerancesFor(const RunSettings& s, const rewriters::Pipeline& pipeline,
                                   const rewriters::PassContext& ctx);

// calibration (--calibration FILE / calibration=[...]): `values` split into
// batches and checked against the model's inputs (and the given example
// shapes), then handed to the passes (ctx.inputs). With planned inputs
// that are not fixed values and two batches or more, verification runs on
// the last batch, which the quantize pass holds out from calibration (int8
// judged on random inputs far from the data it was calibrated on says
// nothing). `what` names the data in messages ("--calibration",
// "calibration"). Throws ir::InputError for bad data.
void calibrationStage(const RunSettings& s, const Optimizer& opt, rewriters::PassContext& ctx,
                      const std::vector<c10::IValue>& values, const std::string& source, const std::string& what,
                      verify::InputPlan& inputs);

// tune: the measured pipeline (the record's tuning section; the tolerances
// of ref follow it). Throws std::invalid_argument without example inputs.
tune::TuneResult tuneStage(const RunSettings& s, Optimizer& opt, const rewriters::Pipeline& pipeline,
                           ReferenceResult& ref, driver::RunRecord& record);

// run: the pipeline with `inst`; throws what a pass or an instrument throws.
// With a changed signature, ref's runner gets converted inputs.
RunResult runStage(const RunSettings& s, Optimizer& opt, const rewriters::Pipeline& pipeline, ReferenceResult& ref,
                   driver::RunRecord& record, const rewriters::Instrumentation& inst = {});

// export: the result in OUT's format handed to the write hook, and loaded
// back. `opt` is let go (or its IR emptied, when the measure stage still
// needs IN) before the load back. Throws std::system_error (write failed)
// or std::runtime_error (the model does not serialize or load back: a
// ptopt bug).
ExportResult exportStage(const RunSettings& s, std::optional<Optimizer>& opt, const rewriters::Pipeline& pipeline,
                         const ReferenceResult& ref, const RunResult& run, driver::RunRecord& record);

// verify: whether it passed (true when nothing is verified); the report is
// record.verification.
bool verifyStage(const RunSettings& s, ReferenceResult& ref, const ExportResult& out, driver::RunRecord& record);

// Why the measure stage will not time OUT against IN; nullopt when it will.
std::optional<std::string> whyNotMeasured(const RunSettings& s, const ReferenceResult& ref);

// What the measure stage (driver/measure_stage.cpp) reads: the stages'
// results, and IN (the optimizer, whose IR the export stage emptied).
struct MeasureInputs {
  const RunSettings& settings;
  const Optimizer* in;  // nullptr when whyNotMeasured (the export stage let it go)
  const rewriters::Pipeline& pipeline;
  ReferenceResult& ref;
  const RunResult& run;
  const ExportResult& out;
  const ModelCounts& before;
};
// measure: record.sections["measurement"], and what to write instead of
// OUT when OUT is measurably slower and something verified is not.
MeasureOutcome measureStage(const MeasureInputs& m, bool ok, driver::RunRecord& record);

}  // namespace ptopt
