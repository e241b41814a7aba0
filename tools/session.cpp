#include "tools/session.h"
#include "tools/api.h"

#include "tools/op_table.h"
#include "tools/measure_cache.h"
#include "tools/report.h"
#include "tools/stages.h"

#include "ir/model.h"
#include "ir/text.h"
#include "quant/precision_check.h"
#include "rewriters/rules.h"
#include "rewriters/shape_prop.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace ptopt {

// ---- Pipelines with rules in memory.

TemporaryRuleFiles::~TemporaryRuleFiles() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TemporaryRuleFiles::add(const std::string& text) {
  namespace fs = std::filesystem;
  if (dir_.empty()) {
    std::string pattern = (fs::temp_directory_path() / "ptopt-rules-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary folder for rule text");
    dir_ = pattern;
  }
  const std::string path = (fs::path(dir_) / fmt::format("rules{}.txt", files_.size())).string();
  std::ofstream out(path);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write rule text to '" + path + "'");
  files_.push_back(path);
  return path;
}

rewriters::Pipeline planPipeline(const std::string& text, const std::vector<std::string>& ruleFiles,
                                 const std::vector<std::string>& ruleTexts, TemporaryRuleFiles& ruleTextFiles) {
  rewriters::Pipeline p = parsePipelineOrPreset(text);
  std::vector<rewriters::PipelineElement> rules;
  for (const auto& file : ruleFiles) {
    rewriters::loadRuleFile(file);  // errors now, naming the file
    rules.push_back(rewriters::rulesElement(file));
  }
  for (size_t i = 0; i < ruleTexts.size(); ++i) {
    rewriters::parseRules(ruleTexts[i], ruleTexts.size() == 1 ? "rules" : fmt::format("rules[{}]", i));
    rules.push_back(rewriters::rulesElement(ruleTextFiles.add(ruleTexts[i])));
  }
  rewriters::addExtraPasses(p, rules);
  return p;
}

// ---- optimizeModule: the stages of `ptopt IN OUT` (tools/stages.h), in memory.

VerificationFailed::VerificationFailed(verify::VerifyReport r)
    : std::runtime_error(r.verdict() + "\n" + r.failureReport()), report(std::move(r)) {}

nlohmann::json OptimizeResult::record() const {
  tools::RunRecord r;
  r.pipeline = pipeline;
  r.passes = passes;
  r.opsBefore = opsBefore;
  r.opsAfter = opsAfter;
  r.parameterBytesBefore = parameterBytesBefore;
  r.parameterBytesAfter = parameterBytesAfter;
  r.outputFileBytes = serialized.bytes.size();
  r.stageMs = stageMs;
  r.verification = verification;
  r.verificationSkipped = verificationSkipped;
  r.outcome = written.empty() ? "passed" : "passed; wrote " + written + " (the optimized model was slower)";
  r.device = verification ? verification->device : "";
  r.quantize = quantize;
  r.tuning = tuning;
  r.sections = sections;
  return tools::toJson(r);
}

namespace {

StageSettings stageSettings(const OptimizeRequest& req) {
  StageSettings s;
  s.device = verify::resolveDevice(req.device);  // std::invalid_argument
  s.target = req.target;
  s.preferBf16 = req.preferBf16;
  s.verify = req.verify;
  s.tolerances = [&req](const verify::Tolerance& base) {
    verify::ToleranceSet t{base, req.rtolFor, req.atolFor, {}};
    if (req.rtol) t.base.rtol = *req.rtol;
    if (req.atol) t.base.atol = *req.atol;
    return t;
  };
  s.importOptions = req.importOptions;
  s.tune = req.tune;
  s.tuneBudgetSeconds = req.tuneBudgetSeconds;
  s.tuningCache = req.tuningCache;
  s.measure = req.measure;
  s.noMeasureReason = "measure=False";
  s.force = req.force;
  s.measureOptions.budgetSeconds = req.measureBudgetSeconds;
  s.measureOptions.threads = req.measureThreads;
  return s;
}

// In memory: the archive's bytes are kept in `out.serialized` (what the
// CLI would write) and the module is loaded back from them; notes are
// collected, lines of the run's account dropped.
StageHooks stageHooks(Stages& r, OptimizeResult& out, const OptimizeRequest& req) {
  StageHooks h;
  h.note = [&out](const std::string& note) { out.notes.push_back(note); };
  h.notice = h.note;
  h.warning = h.note;
  h.write = [&out](const torch::jit::Module& exported) {
    out.serialized.bytes = ir::serializeModule(exported);
    out.serialized.module = ir::loadSerializedModule(out.serialized.bytes);
    return out.serialized.module;
  };
  h.outputDigest = [&out] { return bytesDigest(out.serialized.bytes); };
  h.inputDigest = [&r, &req] {
    return req.inputPath.empty() ? bytesDigest(ir::serializeModule(r.opt->original())) : fileDigest(req.inputPath);
  };
  h.inputAsOutput = [&r] {
    Optimizer::Serialized s;
    s.bytes = ir::serializeModule(r.opt->original());
    s.module = ir::loadSerializedModule(s.bytes);
    return s;
  };
  return h;
}

// The reference outputs on the request's inputs: required unless
// verify=False (then given inputs are still run once).
void planReference(Stages& r, OptimizeResult& out, const OptimizeRequest& req, const Optimizer::Reference& reference) {
  verify::InputPlan inputs = verify::planInputs(req.inputs, r.opt->model().forward());
  if (!req.calibration.empty()) calibrationStage(r, req.calibration, req.calibrationSource, "calibration", inputs);
  out.inputsInferred = inputs.inferred;
  if (!inputs.source) {
    if (req.verify)
      throw std::invalid_argument(inputs.message + " (Python: pass example_inputs=..., or verify=False)");
    out.verificationSkipped = inputs.message;
  } else if (req.verify && inputs.inferred) {
    out.notes.push_back(inputs.message);
  }
  try {
    referenceOutputs(r, reference, inputs);
  } catch (const verify::ReferenceError& e) {
    if (!inputs.inferred) throw InputsDoNotFit(e.what());
    throw InputsDoNotFit(std::string(e.what()) + "\n(the input shape was assumed: " + inputs.message +
                         "; give the inputs to verify with)");
  }
  if (!req.verify) out.verificationSkipped = "verify=False";
}

}  // namespace

OptimizeResult optimizeModule(Optimizer opt, const OptimizeRequest& req) {
  OptimizeResult out;
  Stages r;
  // plan
  TemporaryRuleFiles ruleTextFiles;
  r.pipeline = planPipeline(req.pipeline, req.ruleFiles, req.ruleTexts, ruleTextFiles);
  r.settings = stageSettings(req);
  r.hooks = stageHooks(r, out, req);

  // load (done by the caller): counts, training mode
  r.opt.emplace(std::move(opt));
  countBefore(r);
  const ir::TrainingMode& mode = r.opt->trainingMode();
  if (mode.inTraining() && req.keepTraining)
    throw ir::InputError(fmt::format(
        "the model is in training mode ({}), and keep_training refuses to optimize it for inference; call "
        ".eval() first (or trace it in eval mode)",
        mode.scriptedInTraining ? "scripted with training=True" : "traced in training mode"));

  const Optimizer::Reference reference = referenceStage(r);
  planReference(r, out, req, reference);
  if (req.tune) {
    tuneStage(r);
    out.notes.push_back(r.tuned->summary());
  }
  runStage(r);
  if (r.record.quantize) out.notes.push_back(r.record.quantize->summary());
  exportStage(r);
  if (!verifyStage(r)) throw VerificationFailed(*r.record.verification);
  measureStage(r, true);

  if (r.replacement) out.serialized = std::move(*r.replacement);
  out.written = r.written;
  out.pipeline = rewriters::printPipeline(r.pipeline);
  out.passes = r.report;
  if (r.verifying()) out.verification = r.record.verification;
  out.opsBefore = r.record.opsBefore;
  out.opsAfter = r.record.opsAfter;
  out.nodesBefore = r.nodesBefore;
  out.nodesAfter = r.nodesAfter;
  out.parameterBytesBefore = r.record.parameterBytesBefore;
  out.parameterBytesAfter = r.record.parameterBytesAfter;
  out.stageMs = r.record.stageMs;
  out.quantize = r.record.quantize;
  out.tuning = r.record.tuning;
  out.sections = r.record.sections;
  return out;
}

// ---- compareModules: `ptopt verify A B`.

verify::VerifyReport compareModules(const torch::jit::Module& a, const torch::jit::Module& b,
                                    const verify::InputRequest& inputs, const verify::ToleranceSet& tolerances,
                                    const std::string& deviceName) {
  ir::Model imported = importModel(a);
  const verify::InputPlan plan = verify::planInputs(inputs, imported.forward());
  if (!plan.source) throw std::invalid_argument(plan.message + " (Python: pass example_inputs=...)");
  const c10::Device device = verify::resolveDevice(deviceName);
  for (const auto* m : {&a, &b})
    if (!device.is_cuda() && m->hasattr(ir::kRequiresCudaAttribute) && m->attr(ir::kRequiresCudaAttribute).isBool() &&
        m->attr(ir::kRequiresCudaAttribute).toBool())
      throw ir::InputError(std::string(m == &a ? "the reference" : "the candidate") + " is for CUDA (" +
                           ir::kRequiresCudaAttribute + ": it calls cuDNN's fused kernels) and cannot run on " +
                           device.str() + ": verify it on a machine with a CUDA GPU (device='cuda')");
  std::optional<verify::ReferenceRunner> runner;
  try {
    runner.emplace(a, *plan.source, tolerances, device, verify::inputNames(imported.forward()));
  } catch (const verify::ReferenceError& e) {
    throw InputsDoNotFit(std::string("the reference: ") + e.what());
  }
  return runner->check(b);
}

// ---- showModule: `ptopt show`.

std::vector<MethodText> showModule(const torch::jit::Module& module, const std::vector<std::string>& preserveMethods) {
  ir::ImportOptions options;
  options.preserveMethods = preserveMethods;
  ir::Model model = importModel(module, options);
  std::vector<MethodText> out;
  for (const auto& [name, graph] : model.methods)
    out.push_back({name, ir::printGraph(*graph), tools::countOps(*graph), graph->numNodes(), model.constants->size()});
  return out;
}

// ---- drawModules: `ptopt dot`.

namespace {

// A module that eval() would change (the caller's), copied first.
torch::jit::Module inEvalMode(const torch::jit::Module& m) {
  bool training = false;
  for (const auto& sub : m.modules()) training = training || sub.is_training();
  torch::jit::Module copy = training ? m.clone() : m;
  copy.eval();
  return copy;
}

ir::Model importForDrawing(const torch::jit::Module& module, const std::string& method) {
  torch::jit::Module m = inEvalMode(module);
  ir::ImportOptions options;
  if (method != "forward") options.preserveMethods.push_back(method);
  return importModel(m, options);
}

ir::Graph& methodOf(const ir::Model& model, const std::string& method) {
  ir::Graph* g = model.method(method);
  if (!g) throw std::invalid_argument("the module has no method '" + method + "'");
  return *g;
}

void propagateShapes(ir::Graph& g, const std::vector<std::string>& shapes) {
  if (shapes.empty()) return;
  std::vector<verify::InputSpec> specs;
  for (const auto& s : shapes) specs.push_back(verify::parseInputSpec(s));
  specs = verify::completeInputSpecs(specs, g, fmt::format("{} input shape(s) were given", shapes.size()));
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(specs, 0);
  try {
    rewriters::ShapePropPass().run(g, ctx);
  } catch (const std::exception& e) {
    throw ir::InputError("the model fails on the given input shapes: " + ir::torchErrorMessage(e));
  }
}

}  // namespace

std::string drawModules(const torch::jit::Module& module, const torch::jit::Module* other,
                        const draw::DotOptions& options, const std::string& method,
                        const std::vector<std::string>& inputShapes, draw::DiffCounts* counts) {
  ir::Model model = importForDrawing(module, method);
  ir::Graph& graph = methodOf(model, method);
  propagateShapes(graph, inputShapes);
  if (!other) return draw::writeDot(graph, options);
  ir::Model after = importForDrawing(*other, method);
  ir::Graph& afterGraph = methodOf(after, method);
  propagateShapes(afterGraph, inputShapes);
  return draw::writeDotDiff(graph, afterGraph, options, counts);
}

}  // namespace ptopt
