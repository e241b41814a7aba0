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
// optimizeModule runs the stages `ptopt IN OUT` runs (tools/stages.h: one
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
#include "tools/api.h"
#include "verify/input_plan.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt {

// The pipeline of a request: pipeline text or a preset ("-O1",
// "-O1,channels-last"), then rule files and rule texts by the one rule for
// extra passes (rewriters::addExtraPasses: before a closing fuse-cudnn).
// Rule texts are parsed here (RuleFileError naming "rules" or "rules[i]");
// `ruleTextFiles` receives the temporary files that hold them for the
// `rules` pass (the caller keeps them until the run is over).
class TemporaryRuleFiles {
 public:
  TemporaryRuleFiles() = default;
  ~TemporaryRuleFiles();
  TemporaryRuleFiles(const TemporaryRuleFiles&) = delete;
  TemporaryRuleFiles& operator=(const TemporaryRuleFiles&) = delete;
  std::string add(const std::string& text);

 private:
  std::string dir_;
  std::vector<std::string> files_;
};
rewriters::Pipeline planPipeline(const std::string& pipelineOrPreset, const std::vector<std::string>& ruleFiles,
                                 const std::vector<std::string>& ruleTexts, TemporaryRuleFiles& ruleTextFiles);

struct OptimizeRequest {
  std::string pipeline = "-O1";
  std::vector<std::string> ruleFiles;  // --rules FILE
  std::vector<std::string> ruleTexts;  // rule-file syntax, in memory
  verify::InputRequest inputs;         // shapes, a file, or values in memory; none: inferred when safe
  bool verify = true;                  // false: --no-verify (given inputs are still checked once)
  std::optional<double> rtol, atol;    // the base tolerance's terms (default: the pipeline's precision's)
  std::map<std::string, double> rtolFor, atolFor;  // per output (OUTPUT:X)
  std::string device = "auto";         // where verification runs: auto, cpu, cuda
  std::string target = "auto";         // --target
  bool preferBf16 = false;
  bool keepTraining = false;           // refuse a model in training mode
  bool tune = false;                   // --tune: machine-dependent passes decided by measurement (tune/tune_model.h)
  double tuneBudgetSeconds = 0;        // --tune-budget (0: the default)
  std::string tuningCache;             // --tuning-cache ("" : the default file)
  bool measure = true;                 // false: --no-measure
  bool force = false;                  // --force: keep the result even when it is measurably slower
  double measureBudgetSeconds = 2.0;   // --measure-budget
  int measureThreads = 1;              // --measure-threads
  std::string inputPath;               // the file the model was loaded from ("": in memory): IN's bytes
  ir::ImportOptions importOptions;     // how the model was imported (for the fp32-structure candidate)
  // --calibration: the loaded value, a list of batches (a batch is a tensor
  // or a tuple/list of the inputs); empty: none (tools/stages.h calibrationStage).
  std::vector<c10::IValue> calibration;
  std::string calibrationSource = "calibration=";
};

// The reference fails on the inputs: they do not fit the model (shape,
// dtype). The CLI's exit 2, naming the model's inputs.
class InputsDoNotFit : public ir::InputError {
 public:
  using ir::InputError::InputError;
};

// The check failed: nothing is returned. what() is the CLI's verdict and
// per-output failure report.
class VerificationFailed : public std::runtime_error {
 public:
  explicit VerificationFailed(verify::VerifyReport r);
  verify::VerifyReport report;
};

struct OptimizeResult {
  Optimizer::Serialized serialized;  // the module loaded back from exactly `bytes`
  std::string pipeline;              // canonical text
  rewriters::RunReport passes;
  std::optional<verify::VerifyReport> verification;  // nullopt: not verified (verificationSkipped says why)
  std::string verificationSkipped;
  std::vector<std::string> notes;    // what the CLI prints as `note:` lines
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
  // The --report record of this run (no command line, no files).
  nlohmann::json record() const;
};

// Throws rewriters::PipelineError / RuleFileError (bad pipeline or rules),
// verify::InputPlanError (inputs that do not match the model), InputsDoNotFit
// (the reference fails on them), ir::InputError (a model in training mode
// with keepTraining), std::invalid_argument (no inputs to verify with,
// a bad device), VerificationFailed, and whatever a pass throws.
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
