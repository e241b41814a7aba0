#include "api/api.h"

#include "fusion/register.h"
#include "kernels/register.h"
#include "layout/register.h"
#include "verify/precision.h"
#include "quant/register.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)

#include <chrono>

namespace ptopt {

void registerAllPasses(rewriters::PassRegistry& registry) {
  rewriters::registerGenericPasses(registry);
  fusion::registerFusionPasses(registry);
  layout::registerLayoutPasses(registry);
  quant::registerQuantPasses(registry);
  kernels::registerKernelPasses(registry);
}

const rewriters::PassRegistry& defaultRegistry() {
  static const rewriters::PassRegistry registry = [] {
    rewriters::PassRegistry r;
    registerAllPasses(r);
    return r;
  }();
  return registry;
}

ir::Model importModel(const torch::jit::Module& module, ir::ImportOptions options) {
  if (options.raiseSteps.empty()) options.raiseSteps = defaultRegistry().raiseSteps();
  return ir::importModule(module, options);
}

rewriters::Pipeline parsePipelineOrPreset(const std::string& text) {
  return rewriters::parsePipelineOrPreset(text, defaultRegistry());
}

namespace {
double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Optimizer Optimizer::load(const std::string& path, const ir::ImportOptions& options, LoadTimes* times) {
  auto start = std::chrono::steady_clock::now();
  if (ir::formatOfFile(path) == ir::ModelFormat::Pt2) {
    ir::Pt2ReadResult program = ir::readPt2File(path);
    if (times) times->readMs = msSince(start);
    start = std::chrono::steady_clock::now();
    Optimizer opt = fromPt2(std::move(program));
    if (times) times->importMs = msSince(start);
    return opt;
  }
  torch::jit::Module module = ir::loadTorchScript(path);
  if (times) times->readMs = msSince(start);
  start = std::chrono::steady_clock::now();
  Optimizer opt = fromModule(std::move(module), options);
  if (times) times->importMs = msSince(start);
  return opt;
}

Optimizer Optimizer::fromModule(torch::jit::Module original, const ir::ImportOptions& options) {
  ir::TrainingMode mode;
  mode.scriptedInTraining = ir::readsTrainingFlagInTrainingMode(original);
  original.eval();
  ir::Model model = importModel(original, options);
  ir::findTrainingLiterals(model, mode);
  return Optimizer(std::move(original), std::move(model), mode, options);
}

Optimizer Optimizer::freshCopy(const ir::ImportOptions& options) const {
  Optimizer copy = fromModule(original_, options);
  copy.pt2_ = pt2_;
  return copy;
}

Optimizer Optimizer::fromPt2(ir::Pt2ReadResult program) {
  ir::TrainingMode mode;
  ir::findTrainingLiterals(program.model, mode);
  torch::jit::Module original = ir::runnableProgram(program.model);
  Optimizer opt(std::move(original), std::move(program.model), mode, {});
  opt.pt2_ = std::move(program.program);
  return opt;
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
  // A copy only for another device (the runner moves it there): a model
  // ptopt packed for a CPU holds oneDNN conv objects that LibTorch 1.13
  // cannot clone ("Fusion behavior undefined"), and the CPU needs no copy.
  const c10::Device on = verify::resolveDevice(device);
  verify::ReferenceRunner runner(on.is_cpu() ? original_ : original_.clone(), inputs, tol, on);
  return runner.check(exportModule());
}

torch::jit::Module Optimizer::exportModule() const { return ir::exportModel(model_); }

void Optimizer::save(const std::string& path, const std::vector<c10::IValue>& exampleInputs) const {
  const ir::ModelFormat format = ir::formatForOutput(path, std::nullopt, inputFormat());
  if (format == ir::ModelFormat::TorchScript) return ir::saveModuleAtomically(exportModule(), path);
  ir::writeModuleBytesAtomically(serializedBytes(format, exampleInputs), path, /*reload=*/false);
}

Optimizer::Reference Optimizer::reference(const rewriters::Pipeline& pipeline, c10::Device device) const {
  Reference r;
  const auto specializes = [](const rewriters::PassEffects& e) { return e.specializesTraining; };
  const rewriters::Pipeline specializing = rewriters::passesWhere(pipeline, defaultRegistry(), specializes);
  r.specializesTracedFlags = trainingMode_.tracedInTraining && !specializing.empty();
  r.module = device.is_cuda() ? original_.clone() : original_;
  if (r.specializesTracedFlags) {
    ir::Model evalModel = model_.clone();
    rewriters::PassContext ctx;
    rewriters::PassManager(defaultRegistry(), specializing).run(evalModel, ctx);
    r.module = ir::exportModel(evalModel);
  }
  return r;
}

verify::ReferenceRunner Optimizer::referenceRunner(const Reference& reference, const verify::InputSource& inputs,
                                                   const verify::ToleranceSet& tol, c10::Device device) const {
  return verify::ReferenceRunner(reference.module, inputs, tol, device, verify::inputNames(model_.forward()));
}

std::optional<Optimizer::StandIn> Optimizer::cpuStandIn(const rewriters::Pipeline& pipeline,
                                                        const rewriters::PassContext& ctx,
                                                        const rewriters::RunReport& report, c10::Device device) const {
  const auto lowp = verify::lowPrecisionRun(pipeline, defaultRegistry(), ctx, report);
  const bool emulateFp16 = lowp && lowp->dtype == c10::ScalarType::Half && !device.is_cuda();
  const bool cudaOnCpu = ctx.targetDevice == "cuda" && !device.is_cuda();
  if (!emulateFp16 && !cudaOnCpu) return std::nullopt;
  Optimizer standIn = fromModule(original_, importOptions_);
  rewriters::PassContext standInCtx;
  standInCtx.targetDevice = ctx.targetDevice;
  standInCtx.preferBf16 = ctx.preferBf16;
  standInCtx.assumedIsa = ctx.assumedIsa;
  standInCtx.exampleInputs = ctx.exampleInputs;
  rewriters::Pipeline standInPipeline = verify::withEmulatedPrecision(pipeline, defaultRegistry());
  std::vector<std::string> cudaOnly;
  if (cudaOnCpu)
    cudaOnly = rewriters::dropPassesWhere(standInPipeline, defaultRegistry(),
                                          [](const rewriters::PassEffects& e) { return e.needsDevice == "cuda"; });
  standIn.run(standInPipeline, &standInCtx);
  StandIn result;
  if (emulateFp16)
    result.notes.push_back("fp16 checked by emulation on the CPU (fp16 rounding at every cast, fp32 compute): "
                           "LibTorch cannot run fp16 convolutions on a CPU");
  if (cudaOnCpu && ir::requiresCuda(model_))
    result.notes.push_back(fmt::format("the model is for CUDA: its cuDNN fusions ({}) were left out of the CPU "
                                       "check; run `ptopt verify` on a CUDA machine for the file itself",
                                       fmt::join(cudaOnly, ", ")));
  result.module = standIn.exportModule();
  return result;
}

Optimizer::Serialized Optimizer::serialize() const {
  Serialized s;
  auto start = std::chrono::steady_clock::now();
  torch::jit::Module exported = exportModule();
  s.exportMs = msSince(start);
  start = std::chrono::steady_clock::now();
  s.bytes = ir::serializeModule(exported);
  s.module = ir::loadSerializedModule(s.bytes);
  s.serializeMs = msSince(start);
  return s;
}

std::string Optimizer::serializedBytes(ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs,
                                       std::vector<std::string>* notes) const {
  if (format == ir::ModelFormat::TorchScript) return ir::serializeModule(exportModule());
  const auto inputs = exampleInputs.empty() ? ir::inputsFromMeta(model_.forward()) : exampleInputs;
  return ir::writePt2(model_, inputs, pt2Program(), notes);
}

Optimizer::Serialized Optimizer::serialize(ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs) const {
  if (format == ir::ModelFormat::TorchScript) return serialize();
  Serialized s;
  auto start = std::chrono::steady_clock::now();
  s.bytes = serializedBytes(format, exampleInputs);
  s.exportMs = msSince(start);
  start = std::chrono::steady_clock::now();
  s.module = ir::runnableFromBytes(format, s.bytes, "the optimized program");
  s.serializeMs = msSince(start);
  return s;
}

void Optimizer::save(const Serialized& s, const std::string& path) {
  ir::writeModuleBytesAtomically(s.bytes, path, /*reload=*/false);  // serialize() loaded it back
}

}  // namespace ptopt
