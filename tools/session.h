// In-memory sessions: what `ptopt IN OUT`, `ptopt verify`, `ptopt show` and
// `ptopt dot` do, as library calls on modules already loaded, for the Python
// package (python/) and other embedders. No printing, no files: results are
// values and failures are exceptions.
//
//   ptopt::OptimizeRequest req;
//   req.pipeline = "-O1";
//   req.inputs.shapes = {"1,3,224,224"};
//   ptopt::OptimizeResult r = ptopt::optimizeModule(ptopt::Optimizer::fromModule(m), req);
//   // r.serialized.module: the verified module, loaded back from r.serialized.bytes
//
// optimizeModule runs the stages `ptopt IN OUT` runs (driver/stages.h: one
// implementation for both), with the archive kept in memory instead of
// streamed to a file, so its bytes are the CLI's for the same model,
// pipeline and input shapes. Like the CLI it times the result against the
// input (the never-slower stage) and returns a faster verified candidate
// when the result is measurably slower, unless `force`; `measure = false`
// (or PTOPT_NO_MEASURE=1) skips that. Unlike the CLI's default,
// verification is required unless turned off: without inputs, or when
// inferred inputs do not fit, it throws.
#pragma once

#include "draw/writer.h"
#include "quant/quantize_report.h"
#include "api/api.h"
#include "driver/driver.h"
#include "verify/input_plan.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt {

// The request: the driver's one request struct (driver/request.h), whose
// policy is the CLI's too; the library's default is verification Required.
struct OptimizeRequest : driver::Request {
  OptimizeRequest() { verification = driver::Verification::Required; }
};

using driver::InputsDoNotFit;
using driver::VerificationFailed;

struct OptimizeResult {
  Optimizer::Serialized serialized;  // the module loaded back from exactly `bytes`
  std::string pipeline;              // canonical text
  rewriters::RunReport passes;
  std::optional<verify::VerifyReport> verification;  // nullopt: not verified (verificationSkipped says why)
  std::string verificationSkipped;
  std::vector<std::string> notes;    // what the CLI prints as `note:` lines, and the warnings
  bool inputsInferred = false;
  std::map<std::string, size_t> opsBefore, opsAfter;
  size_t nodesBefore = 0, nodesAfter = 0;
  size_t parameterBytesBefore = 0, parameterBytesAfter = 0;
  std::map<std::string, double> stageMs;  // reference, tune, passes, export, save, verify, measure
  std::optional<quant::QuantizeReport> quantize;  // what a quantize pass measured (per-op SQNR, cosine)
  std::optional<nlohmann::json> tuning;           // --tune: every decision (tune::TuneResult::toJson)
  // More sections of the record: "target", "measurement" (the never-slower
  // verdict: speedup, ci95, verdict, written, ...), "precision".
  std::map<std::string, nlohmann::json> sections;
  std::string written;  // what was returned instead of the result, when it was measurably slower ("" : the result)
  driver::RunRecord run;  // the driver's record of the run
  // The --report record of this run (no command line, no files).
  nlohmann::json record() const;
};

// driver::optimize on a loaded model, with the bytes kept in memory. Throws
// rewriters::PipelineError / RuleFileError (bad pipeline or rules),
// verify::InputPlanError (inputs that do not match the model), InputsDoNotFit
// (the reference fails on them), ir::InputError (a model in training mode
// with keepTraining), std::invalid_argument (no inputs to verify with,
// a bad device), VerificationFailed (unless force), and whatever a pass throws.
OptimizeResult optimizeModule(Optimizer opt, const OptimizeRequest& request);

// `ptopt verify A B`: B against the reference A on the planned inputs.
// Throws like optimizeModule (InputPlanError, InputsDoNotFit, ir::InputError
// for a CUDA-only model on a CPU).
verify::VerifyReport compareModules(const torch::jit::Module& reference, const torch::jit::Module& candidate,
                                    const verify::InputRequest& inputs, const verify::ToleranceSet& tolerances,
                                    const std::string& device = "auto");

// `ptopt show`: the IR text and op counts of each method.
struct MethodText {
  std::string name;
  std::string text;
  std::map<std::string, size_t> opCounts;
  size_t nodes = 0;
  size_t constants = 0;  // in the model's constant table (shared by its methods)
};
std::vector<MethodText> showModule(const torch::jit::Module& module,
                                   const std::vector<std::string>& preserveMethods = {});

// `ptopt dot`: the DOT text of `module`'s method, or with `other` the
// difference from `module` to `other` (`ptopt dot A --diff B`). Both are
// imported in eval mode; `inputShapes` (one spec per input) label values
// with dtype and shape. Throws std::invalid_argument for a missing method
// or bad shapes, ir::InputError when the model fails on them.
std::string drawModules(const torch::jit::Module& module, const torch::jit::Module* other,
                        const draw::DotOptions& options, const std::string& method = "forward",
                        const std::vector<std::string>& inputShapes = {}, draw::DiffCounts* counts = nullptr);

}  // namespace ptopt
