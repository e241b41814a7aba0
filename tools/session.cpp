#include "tools/session.h"

#include "tune/cache.h"
#include "tune/tune_model.h"

#include "tools/op_table.h"
#include "tools/report.h"

#include "ir/model.h"
#include "ir/text.h"
#include "quant/precision_check.h"
#include "rewriters/rules.h"
#include "rewriters/shape_prop.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace ptopt {

namespace {

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

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

// ---- optimizeModule: the stages of tools/cmd_optimize.cpp, without output.

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
  r.outcome = "passed";
  r.device = verification ? verification->device : "";
  r.quantize = quantize;
  r.tuning = tuning;
  return tools::toJson(r);
}

OptimizeResult optimizeModule(Optimizer opt, const OptimizeRequest& req) {
  OptimizeResult out;
  // plan
  TemporaryRuleFiles ruleTextFiles;
  rewriters::Pipeline pipeline = planPipeline(req.pipeline, req.ruleFiles, req.ruleTexts, ruleTextFiles);
  out.pipeline = rewriters::printPipeline(pipeline);
  const c10::Device device = verify::resolveDevice(req.device);  // std::invalid_argument

  // load (done by the caller): counts, training mode
  out.opsBefore = tools::countOps(opt.model().forward());
  out.parameterBytesBefore = tools::parameterBytes(opt.model());
  out.nodesBefore = opt.model().forward().numNodes();
  const ir::TrainingMode& mode = opt.trainingMode();
  if (mode.inTraining() && req.keepTraining)
    throw ir::InputError(fmt::format(
        "the model is in training mode ({}), and keep_training refuses to optimize it for inference; call "
        ".eval() first (or trace it in eval mode)",
        mode.scriptedInTraining ? "scripted with training=True" : "traced in training mode"));

  // reference
  const Optimizer::Reference reference = opt.reference(pipeline, device);
  for (const std::string& note : mode.notes(reference.specializesTracedFlags)) out.notes.push_back(note);
  rewriters::PassContext ctx;
  ctx.targetDevice = req.target != "auto" ? req.target : device.is_cuda() ? "cuda" : "cpu";
  ctx.preferBf16 = req.preferBf16;
  const c10::ScalarType precision = quant::lowestPrecisionIntroduced(pipeline, ctx).value_or(c10::ScalarType::Float);
  verify::ToleranceSet tolerances{verify::Tolerance::forPrecision(precision), req.rtolFor, req.atolFor, {}};
  if (req.rtol) tolerances.base.rtol = *req.rtol;
  if (req.atol) tolerances.base.atol = *req.atol;

  const verify::InputPlan inputs = verify::planInputs(req.inputs, opt.model().forward());
  out.inputsInferred = inputs.inferred;
  std::optional<verify::ReferenceRunner> runner;
  if (!inputs.source) {
    if (req.verify)
      throw std::invalid_argument(inputs.message + " (Python: pass example_inputs=..., or verify=False)");
    out.verificationSkipped = inputs.message;
  } else if (req.verify) {
    if (inputs.inferred) out.notes.push_back(inputs.message);
    try {
      auto start = std::chrono::steady_clock::now();
      runner.emplace(opt.referenceRunner(reference, *inputs.source, tolerances, device));
      out.stageMs["reference"] = msSince(start);
    } catch (const verify::ReferenceError& e) {
      if (!inputs.inferred) throw InputsDoNotFit(e.what());
      throw InputsDoNotFit(std::string(e.what()) + "\n(the input shape was assumed: " + inputs.message +
                           "; give the inputs to verify with)");
    }
  }
  if (inputs.source && !inputs.inferred) {
    if (!req.verify) {
      verify::InputSource once = *inputs.source;
      once.iterations = 1;
      try {
        opt.referenceRunner(reference, once, tolerances, device);
      } catch (const verify::ReferenceError& e) {
        throw InputsDoNotFit(e.what());
      }
    }
    ctx.exampleInputs = inputs.source->inputsFor(0);
  }
  if (!req.verify) out.verificationSkipped = "verify=False";

  // tune: the pipeline's machine-dependent passes get their options from
  // measurements (as the CLI's tune stage); the tolerances follow.
  if (req.tune) {
    if (!ctx.exampleInputs)
      throw std::invalid_argument("tune=True times the model on its real input shapes: pass example_inputs=... or "
                                  "input_shapes=...");
    tune::TuneOptions t;
    t.budgetSeconds = req.tuneBudgetSeconds > 0 ? req.tuneBudgetSeconds : tune::kDefaultBudgetSeconds;
    t.cachePath = req.tuningCache.empty() ? tune::TuningCache::defaultPath() : req.tuningCache;
    t.device = device;
    auto start = std::chrono::steady_clock::now();
    tune::TuneResult tuned = tune::tunePipeline(opt.model(), pipeline, defaultRegistry(), ctx, t);
    out.stageMs["tune"] = msSince(start);
    pipeline = tuned.pipeline;
    out.pipeline = rewriters::printPipeline(pipeline);
    out.tuning = tuned.toJson();
    out.notes.push_back(tuned.summary());
    const c10::ScalarType tunedPrecision =
        quant::lowestPrecisionIntroduced(pipeline, ctx).value_or(c10::ScalarType::Float);
    tolerances.base = verify::Tolerance::forPrecision(tunedPrecision);
    if (req.rtol) tolerances.base.rtol = *req.rtol;
    if (req.atol) tolerances.base.atol = *req.atol;
    if (runner) runner->setTolerances(tolerances);
  }

  // run
  auto start = std::chrono::steady_clock::now();
  quant::resetQuantizeReport();  // a quantize pass of an earlier call must not be reported
  out.passes = opt.run(pipeline, &ctx);
  out.stageMs["passes"] = msSince(start);
  if (quant::lastQuantizeReport().ran) {
    out.quantize = quant::lastQuantizeReport();
    out.notes.push_back(out.quantize->summary());
  }
  const auto lowp = quant::lowPrecisionRun(pipeline, ctx, out.passes);
  if (lowp && lowp->signatureChanged) out.notes.push_back(lowp->signatureNote());
  if (runner && lowp && lowp->signatureChanged)
    runner->inputAdapter = [l = *lowp](std::vector<c10::IValue> in) { return l.adaptInputs(std::move(in)); };

  // export
  try {
    out.serialized = opt.serialize();
  } catch (const std::exception& e) {
    throw std::runtime_error("the optimized model does not serialize and load back: " + ir::torchErrorMessage(e) +
                             "\n(a ptopt bug: please report it with the model; an empty pipeline shows whether a "
                             "pass is the cause)");
  }
  out.stageMs["export"] = out.serialized.exportMs;
  out.opsAfter = tools::countOps(opt.model().forward());
  out.parameterBytesAfter = tools::parameterBytes(opt.model());
  out.nodesAfter = opt.model().forward().numNodes();

  // verify
  if (runner) {
    start = std::chrono::steady_clock::now();
    verify::VerifyReport v;
    if (auto standIn = opt.cpuStandIn(pipeline, ctx, out.passes, device)) {
      for (const std::string& note : standIn->notes) runner->notes.push_back(note);
      v = runner->check(standIn->module);
    } else {
      v = runner->check(out.serialized.module);
    }
    out.stageMs["verify"] = msSince(start);
    for (const auto& note : v.notes) out.notes.push_back(note);
    if (!v.passed) throw VerificationFailed(std::move(v));
    out.verification = std::move(v);
  }
  return out;
}

// ---- compareModules: `ptopt verify A B`.

verify::VerifyReport compareModules(const torch::jit::Module& a, const torch::jit::Module& b,
                                    const verify::InputRequest& inputs, const verify::ToleranceSet& tolerances,
                                    const std::string& deviceName) {
  ir::Model imported = ir::importModule(a);
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
  ir::Model model = ir::importModule(module, options);
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
  return ir::importModule(m, options);
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
