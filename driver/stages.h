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
//   measure    measureStage: OUT timed against IN (driver/measure.h); when it
//              is measurably slower, the first verified candidate that is
//              not (the fp32 structure, then IN) replaces it, unless force.
//              With tune, a verdict an earlier run measured for the same IN
//              and OUT bytes is taken from the tuning cache
//              (driver/measure_cache.h).
// The driver plans the inputs and the pipeline, loads, and saves; the
// stages read the request (r.req) and report through r.hooks.
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

// One run's state, filled as the stages go.
struct Stages {
  const driver::Request* req = nullptr;  // what was asked
  c10::Device device = c10::kCPU;        // where verification and timing run (req->device resolved)
  MeasureOptions measureOptions;         // the never-slower stage's, from req
  std::ostream* explain = nullptr;       // the passes' --explain output (with req->explain)
  std::ostream* tuneProgress = nullptr;  // --tune's progress lines
  std::string noMeasureName = "--no-measure";  // how the front end names measure = false
  StageHooks hooks;
  rewriters::Pipeline pipeline;          // the planned one; tuneStage replaces it
  ir::ModelFormat outputFormat = ir::ModelFormat::TorchScript;  // OUT's (req->to, OUT's extension, IN's format)
  std::vector<c10::IValue> exampleInputs;  // one planned input set: a .pt2's metadata run (empty: the recorded shapes)
  std::optional<Optimizer> opt;          // the front end loads it
  rewriters::PassContext ctx;            // referenceStage
  verify::ToleranceSet tolerances;       // referenceStage, tuneStage
  std::optional<verify::ReferenceRunner> runner;  // referenceOutputs: nullopt when nothing is verified
  std::optional<tune::TuneResult> tuned; // tuneStage
  rewriters::RunReport report;           // runStage
  std::optional<verify::LowPrecisionRun> lowp;  // runStage: set when the pipeline lowered precision
  torch::jit::Module result;             // exportStage: loaded back from what `write` kept
  int resultPackedThreads = 0;           // the intra-op count its load-time values were computed at
  std::optional<Optimizer::StandIn> standIn;  // exportStage: what a CPU checks instead
  size_t nodesBefore = 0, nodesAfter = 0;
  std::optional<Optimizer::Serialized> replacement;  // measureStage: written in place of OUT
  std::string written;                   // measureStage: what replaces OUT ("" = OUT)
  driver::RunRecord record;               // the --report record (stage times, sections, counts)

  bool verifying() const { return runner && req->verifying(); }
  std::string tuningCachePath() const;
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
