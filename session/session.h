// In-memory sessions: what `ptopt IN OUT`, `ptopt verify`, `ptopt show` and
// `ptopt dot` do, as library calls on modules already loaded: the one
// implementation the command line (tools/), the Python package (python/)
// and other embedders call. No printing, no files: results are values,
// failures are exceptions, and what differs between faces is only how they
// are named (FaceWords).
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
#include "rewriters/pipeline.h"
#include "verify/input_plan.h"

#include <nlohmann/json.hpp>

#include <functional>
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
  ir::ModelFormat format = ir::ModelFormat::TorchScript;  // of `bytes`
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

// How a face (the command line, Python) is named in the errors and notes of
// the calls below, which are otherwise the same for every face.
struct FaceWords {
  std::string referenceName = "the reference";  // `ptopt verify`: the file's path
  std::string candidateName = "the candidate";
  std::string inputsHint = "Python: pass example_inputs=...";  // after "no inputs" ("": none)
  std::string cudaHint = "device='cuda'";                       // how to ask for a GPU
  std::string shapesName = "input_shapes";                      // what the input shapes are called
  std::function<void(const std::string&)> note;                 // what was assumed (inferred inputs)
};

// What a subcommand runs a model on: the inputs planned for `reference`'s
// forward (its signature names them) and the device. Throws
// std::invalid_argument when there is nothing to run on (the plan's message
// and the face's hint), verify::InputPlanError, std::invalid_argument for a
// bad device; notes inferred inputs through `words.note`.
struct PlannedInputs {
  verify::InputSource source;
  c10::Device device = c10::kCPU;
  std::vector<std::string> names;  // the forward's input names
};
PlannedInputs planModelInputs(const torch::jit::Module& reference, const verify::InputRequest& inputs,
                              const std::string& device, const FaceWords& words = {});

// ir::InputError naming `name` when `module` is a file for CUDA (it calls
// cuDNN's fused kernels) and `device` is not a GPU.
void requireRunnableOn(const torch::jit::Module& module, c10::Device device, const std::string& name,
                       const FaceWords& words);

// The tolerances `ptopt verify A B` judges B by: the criterion of the
// lowest precision B computes in (verify::lowestPrecisionIn: its constants,
// its conversions, its int8 ops; fp32's when none is lower), with the
// caller's terms over it. Says which through `words.note` when it is not
// fp32's.
verify::ToleranceSet candidateTolerances(const torch::jit::Module& candidate,
                                         const driver::ToleranceOverrides& overrides, const FaceWords& words = {});

// `ptopt verify A B`: B against the reference A on the planned inputs.
// Throws like optimizeModule (InputPlanError, InputsDoNotFit naming the
// reference, ir::InputError for a CUDA-only model on a CPU).
verify::VerifyReport compareModules(const torch::jit::Module& reference, const torch::jit::Module& candidate,
                                    const verify::InputRequest& inputs, const verify::ToleranceSet& tolerances,
                                    const std::string& device = "auto", const FaceWords& words = {});

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
// difference from `module` to `other` (`ptopt dot A --diff B`), or with
// `after` the difference a pipeline makes (`--after -O1`). Modules are
// imported in eval mode; `inputShapes` (one spec per input) label values
// with dtype and shape. Throws std::invalid_argument for a missing method
// (naming `words.referenceName` / `candidateName`) or bad shapes
// (`words.shapesName`), ir::InputError when the model fails on them, and
// what a pass of `after` throws.
struct DrawRequest {
  std::string method = "forward";
  std::vector<std::string> inputShapes;
  const torch::jit::Module* other = nullptr;   // --diff
  const rewriters::Pipeline* after = nullptr;  // --after (the default registry's passes)
};
struct Drawing {
  std::string dot;
  size_t nodes = 0;                      // of the drawn (first) graph
  std::optional<draw::DiffCounts> diff;  // with `other` or `after`
};
Drawing drawModel(const torch::jit::Module& module, const draw::DotOptions& options, const DrawRequest& request,
                  const FaceWords& words = {});

// drawModel for Python's ptopt.draw: the module, or its difference to `other`.
std::string drawModules(const torch::jit::Module& module, const torch::jit::Module* other,
                        const draw::DotOptions& options, const std::string& method = "forward",
                        const std::vector<std::string>& inputShapes = {}, draw::DiffCounts* counts = nullptr);

}  // namespace ptopt
