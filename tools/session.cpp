#include "tools/session.h"
#include "api/api.h"

#include "driver/op_table.h"
#include "driver/measure_cache.h"
#include "driver/report.h"

#include "ir/model.h"
#include "ir/text.h"
#include "verify/precision.h"
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
