#include "session/session.h"
#include "api/api.h"

#include "driver/op_table.h"
#include "driver/measure_cache.h"
#include "driver/report.h"

#include "ir/model.h"
#include "ir/text.h"
#include "verify/precision.h"
#include "rewriters/pass_manager.h"
#include "rewriters/rules.h"
#include "rewriters/shape_prop.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace ptopt {

// ---- optimizeModule: the driver's run, in memory.

nlohmann::json OptimizeResult::record() const { return driver::toJson(run); }

OptimizeResult optimizeModule(Optimizer opt, const OptimizeRequest& req) {
  OptimizeResult out;
  driver::FrontEnd fe;
  fe.note = [&out](const std::string& note) { out.notes.push_back(note); };
  fe.notice = fe.note;
  fe.warning = fe.note;
  fe.noMeasureName = "measure=False";
  fe.noVerifyName = "verify=False";
  fe.inputsHint = "give example_inputs=... or input_shapes=...";
  fe.verifyRequiredHint = "Python: pass example_inputs=..., or verify=False";
  driver::Outcome o = driver::optimize(std::move(opt), req, fe);
  if (!o.tuneSummary.empty()) out.notes.push_back(o.tuneSummary);
  if (o.record.quantize) out.notes.push_back(o.record.quantize->summary());
  if (!o.saved) throw VerificationFailed(*o.record.verification);
  const driver::RunRecord& r = o.record;
  out.serialized = std::move(o.serialized);
  out.written = o.written;
  out.format = o.format;
  out.pipeline = r.pipeline;
  if (r.passes) out.passes = *r.passes;
  out.verification = r.verification;
  out.verificationSkipped = r.verificationSkipped;
  out.inputsInferred = o.inputsInferred;
  out.opsBefore = r.opsBefore;
  out.opsAfter = r.opsAfter;
  out.nodesBefore = o.nodesBefore;
  out.nodesAfter = o.nodesAfter;
  out.parameterBytesBefore = r.parameterBytesBefore;
  out.parameterBytesAfter = r.parameterBytesAfter;
  out.stageMs = r.stageMs;
  out.quantize = r.quantize;
  out.tuning = r.tuning;
  out.sections = r.sections;
  out.run = std::move(o.record);
  return out;
}

// ---- The inputs a subcommand runs on, and compareModules: `ptopt verify A B`.

PlannedInputs planModelInputs(const torch::jit::Module& reference, const verify::InputRequest& inputs,
                              const std::string& deviceName, const FaceWords& words) {
  ir::Model imported = importModel(reference);
  const verify::InputPlan plan = verify::planInputs(inputs, imported.forward());
  if (!plan.source)
    throw std::invalid_argument(words.inputsHint.empty() ? plan.message : plan.message + " (" + words.inputsHint + ")");
  if (plan.inferred && words.note) words.note(plan.message);
  return {*plan.source, verify::resolveDevice(deviceName), verify::inputNames(imported.forward())};
}

void requireRunnableOn(const torch::jit::Module& m, c10::Device device, const std::string& name,
                       const FaceWords& words) {
  if (!device.is_cuda() && m.hasattr(ir::kRequiresCudaAttribute) && m.attr(ir::kRequiresCudaAttribute).isBool() &&
      m.attr(ir::kRequiresCudaAttribute).toBool())
    throw ir::InputError(name + " is for CUDA (" + ir::kRequiresCudaAttribute +
                         ": it calls cuDNN's fused kernels) and cannot run on " + device.str() +
                         ": verify it on a machine with a CUDA GPU (" + words.cudaHint + ")");
}

verify::ToleranceSet candidateTolerances(const torch::jit::Module& candidate,
                                         const driver::ToleranceOverrides& overrides, const FaceWords& words) {
  const std::optional<c10::ScalarType> lowest = verify::lowestPrecisionIn(importModel(candidate));
  if (!lowest) return overrides.over(verify::Tolerance{});
  const verify::Tolerance base = verify::Tolerance::forPrecision(*lowest);
  if (words.note)
    words.note(words.candidateName + " computes in " +
               (*lowest == c10::ScalarType::QInt8      ? "int8"
                : *lowest == c10::ScalarType::BFloat16 ? "bf16"
                : *lowest == c10::ScalarType::Half     ? "fp16"
                                                       : ir::dtypeName(*lowest)) +
               " (its constants or conversions): judged by that precision's criterion (" + base.str() +
               (overrides.empty() ? "" : ", with the tolerances given") + ")");
  return overrides.over(base);
}

verify::VerifyReport compareModules(const torch::jit::Module& a, const torch::jit::Module& b,
                                    const verify::InputRequest& inputs, const verify::ToleranceSet& tolerances,
                                    const std::string& deviceName, const FaceWords& words) {
  const PlannedInputs planned = planModelInputs(a, inputs, deviceName, words);
  requireRunnableOn(a, planned.device, words.referenceName, words);
  requireRunnableOn(b, planned.device, words.candidateName, words);
  std::optional<verify::ReferenceRunner> runner;
  try {
    runner.emplace(a, planned.source, tolerances, planned.device, planned.names);
  } catch (const verify::ReferenceError& e) {
    throw InputsDoNotFit(words.referenceName + ": " + e.what());
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
    out.push_back({name, ir::printGraph(*graph), driver::countOps(*graph), graph->numNodes(), model.constants->size()});
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

ir::Graph& methodOf(const ir::Model& model, const std::string& method, const std::string& name) {
  ir::Graph* g = model.method(method);
  if (!g) throw std::invalid_argument(name + " has no method '" + method + "'");
  return *g;
}

void propagateShapes(ir::Graph& g, const std::vector<std::string>& shapes, const FaceWords& words) {
  if (shapes.empty()) return;
  std::vector<verify::InputSpec> specs;
  for (const auto& s : shapes) specs.push_back(verify::parseInputSpec(s));
  // Left-out inputs take their defaults.
  specs = verify::completeInputSpecs(specs, g, fmt::format("{} was given {} time(s)", words.shapesName, shapes.size()));
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(specs, 0);
  try {
    rewriters::ShapePropPass().run(g, ctx);
  } catch (const std::exception& e) {
    throw ir::InputError("the model fails on the given " + words.shapesName + ": " + ir::torchErrorMessage(e));
  }
}

}  // namespace

Drawing drawModel(const torch::jit::Module& module, const draw::DotOptions& options, const DrawRequest& request,
                  const FaceWords& words) {
  if (request.other && request.after) throw std::invalid_argument("draw the difference to a model or a pipeline's, not both");
  ir::Model model = importForDrawing(module, request.method);
  ir::Graph& graph = methodOf(model, request.method, words.referenceName);
  propagateShapes(graph, request.inputShapes, words);
  Drawing out;
  out.nodes = graph.numNodes();
  if (!request.other && !request.after) {
    out.dot = draw::writeDot(graph, options);
    return out;
  }
  auto afterModel = [&] {
    if (request.other) return importForDrawing(*request.other, request.method);
    ir::Model changed = model.clone();
    rewriters::PassContext ctx;
    rewriters::PassManager(defaultRegistry(), *request.after).run(changed, ctx);
    return changed;
  };
  ir::Model after = afterModel();
  ir::Graph& afterGraph = methodOf(after, request.method, request.other ? words.candidateName : words.referenceName);
  propagateShapes(afterGraph, request.inputShapes, words);
  out.diff.emplace();
  out.dot = draw::writeDotDiff(graph, afterGraph, options, &*out.diff);
  return out;
}

std::string drawModules(const torch::jit::Module& module, const torch::jit::Module* other,
                        const draw::DotOptions& options, const std::string& method,
                        const std::vector<std::string>& inputShapes, draw::DiffCounts* counts) {
  DrawRequest request;
  request.method = method;
  request.inputShapes = inputShapes;
  request.other = other;
  FaceWords words;
  words.referenceName = "the module";
  words.candidateName = "the other module";
  Drawing d = drawModel(module, options, request, words);
  if (counts && d.diff) *counts = *d.diff;
  return d.dot;
}

}  // namespace ptopt
