#include "tools/api.h"

#include "fusion/register.h"
#include "layout/register.h"
#include "quant/register.h"

#include <fmt/format.h>

namespace ptopt {

void registerAllPasses(rewriters::PassRegistry& registry) {
  rewriters::registerGenericPasses(registry);
  fusion::registerFusionPasses(registry);
  layout::registerLayoutPasses(registry);
  quant::registerQuantPasses(registry);
}

const rewriters::PassRegistry& defaultRegistry() {
  static const rewriters::PassRegistry registry = [] {
    rewriters::PassRegistry r;
    registerAllPasses(r);
    return r;
  }();
  return registry;
}

rewriters::Pipeline parsePipelineOrPreset(const std::string& text) {
  // A preset, alone or followed by more passes: "-O1" or "-O1,channels-last".
  if (text.size() >= 3 && text[0] == '-' && text[1] == 'O' && text[2] >= '0' && text[2] <= '3' &&
      (text.size() == 3 || text[3] == ',')) {
    // More passes run before the preset's closing target passes (fuse-cudnn).
    const int level = text[2] - '0';
    const std::string rest = text.size() > 4 ? text.substr(4) : "";
    std::string expanded = rewriters::presetPipeline(level);
    if (!rest.empty())
      expanded = level == 0 ? rest
                            : rewriters::presetPipelineBody(level) + "," + rest + "," + rewriters::kTargetPasses;
    return rewriters::parsePipeline(expanded, defaultRegistry(), text);
  }
  return rewriters::parsePipeline(text, defaultRegistry());
}

Optimizer Optimizer::load(const std::string& path, const ir::ImportOptions& options) {
  return fromModule(ir::loadTorchScript(path), options);
}

Optimizer Optimizer::fromModule(torch::jit::Module original, const ir::ImportOptions& options) {
  ir::TrainingMode mode;
  mode.scriptedInTraining = ir::readsTrainingFlagInTrainingMode(original);
  original.eval();
  ir::Model model = ir::importModule(original, options);
  ir::findTrainingLiterals(model, mode);
  return Optimizer(std::move(original), std::move(model), mode);
}

rewriters::RunReport Optimizer::run(const std::string& pipeline, rewriters::PassContext* ctx,
                                    const rewriters::Instrumentation& inst) {
  return run(parsePipelineOrPreset(pipeline), ctx, inst);
}

rewriters::RunReport Optimizer::run(const rewriters::Pipeline& pipeline, rewriters::PassContext* ctx,
                                    const rewriters::Instrumentation& inst) {
  rewriters::PassContext local;
  rewriters::PassManager pm(defaultRegistry(), pipeline, inst);
  return pm.run(model_, ctx ? *ctx : local);
}

VerifyResult Optimizer::verify(const std::vector<std::string>& shapes, const verify::Tolerance& tol,
                               int iterations, uint64_t seed) {
  std::vector<verify::InputSpec> specs;
  for (const auto& s : shapes) specs.push_back(verify::parseInputSpec(s));
  return verify(specs, tol, iterations, seed);
}

VerifyResult Optimizer::verify(const std::vector<verify::InputSpec>& specs, const verify::Tolerance& tol,
                               int iterations, uint64_t seed) {
  verify::InputSource source;
  // Inputs left out take their defaults (the import keeps them on the inputs).
  source.specs = verify::completeInputSpecs(specs, model_.forward(),
                                            fmt::format("{} input spec(s) were given", specs.size()));
  source.iterations = iterations;
  source.seed = seed;
  verify::VerifyReport report = verify(source, verify::ToleranceSet{tol, {}, {}}, "cpu");
  VerifyResult result;
  result.passed = report.passed;
  result.bitwiseEqual = report.bitwiseEqual;
  result.summary = report.verdict() + "\n" + report.failureReport();
  if (report.passed && !report.iterations.empty()) result.summary += report.iterations.front().comparison.summary();
  return result;
}

verify::VerifyReport Optimizer::verify(const verify::InputSource& inputs, const verify::ToleranceSet& tol,
                                       const std::string& device) {
  verify::ReferenceRunner runner(original_.clone(), inputs, tol, verify::resolveDevice(device));
  return runner.check(exportModule());
}

torch::jit::Module Optimizer::exportModule() const { return ir::exportModel(model_); }

void Optimizer::save(const std::string& path) const { ir::saveModuleAtomically(exportModule(), path); }

}  // namespace ptopt
