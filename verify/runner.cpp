#include "verify/runner.h"

#include "ir/model.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <cmath>

namespace ptopt::verify {

c10::Device resolveDevice(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw std::invalid_argument("--device " + name +
                                  ": CUDA is not available here (this LibTorch has no CUDA, or no GPU is visible); "
                                  "use --device cpu or auto");
    try {
      return c10::Device(name);
    } catch (const std::exception&) {
      throw std::invalid_argument("--device " + name + ": not a device name (use auto, cpu, cuda or cuda:N)");
    }
  }
  throw std::invalid_argument("--device " + name + ": not a device name (use auto, cpu, cuda or cuda:N)");
}

std::string describeDevice(c10::Device device) { return device.str(); }

Executor parseExecutor(const std::string& name) {
  if (name == "plain") return Executor::Plain;
  if (name == "optimizing") return Executor::Optimizing;
  throw std::invalid_argument("--verify-executor " + name + ": use plain or optimizing");
}

std::string executorName(Executor e) { return e == Executor::Plain ? "plain" : "optimizing"; }

std::vector<c10::IValue> InputSource::inputsFor(int i) const {
  if (fixed) return cloneInputs(*fixed);
  return makeInputs(specs, seedFor(i));
}

std::string InputSource::describeInputs() const {
  if (fixed) return fmt::format("{} input(s) from --inputs", fixed->size());
  std::vector<std::string> shapes;
  for (const auto& s : specs) shapes.push_back(s.str());
  return fmt::format("{}", fmt::join(shapes, " "));
}

std::string InputSource::describe() const {
  const std::string how = executor == Executor::Optimizing ? ", JIT optimizing executor" : "";
  if (fixed) return fmt::format("1 run on {} input(s) from --inputs{}", fixed->size(), how);
  std::vector<std::string> shapes;
  for (const auto& s : specs) shapes.push_back(s.str());
  return fmt::format("{} seeded run{} (seed {}) of {}{}", iterations, iterations == 1 ? "" : "s", seed,
                     fmt::join(shapes, " "), how);
}

c10::IValue toDevice(const c10::IValue& v, c10::Device device) {
  if (v.isTensor()) return v.toTensor().to(device, /*non_blocking=*/false, /*copy=*/true);
  if (v.isTuple()) {
    std::vector<c10::IValue> elems;
    for (const auto& e : v.toTupleRef().elements()) elems.push_back(toDevice(e, device));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const auto& e : v.toListRef()) out.push_back(toDevice(e, device));
    return out;
  }
  if (v.isGenericDict()) {
    auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& e : d) out.insert(e.key(), toDevice(e.value(), device));
    return out;
  }
  return v;
}

namespace {

std::vector<c10::IValue> onDevice(const std::vector<c10::IValue>& inputs, c10::Device device) {
  std::vector<c10::IValue> out;
  for (const auto& v : inputs) out.push_back(toDevice(v, device));
  return out;
}

c10::IValue runSeeded(torch::jit::Module& m, std::vector<c10::IValue> inputs, uint64_t seed, Executor executor) {
  torch::NoGradGuard noGrad;
  // Thread-local, restored on return: bench and the caller's own runs keep
  // LibTorch's default.
  torch::jit::GraphOptimizerEnabledGuard optimizer(executor == Executor::Optimizing);
  torch::manual_seed(seed);
  return m.forward(std::move(inputs));
}

}  // namespace

ReferenceRunner::ReferenceRunner(torch::jit::Module reference, InputSource inputs, ToleranceSet tolerances,
                                 c10::Device device, std::vector<std::string> modelInputNames)
    : inputs_(std::move(inputs)), tolerances_(std::move(tolerances)), device_(device) {
  if (device_.is_cuda()) {
    // The fp32 reference must be fp32: no TF32 in cuBLAS or cuDNN.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
  reference = ir::moduleOnDevice(reference, device_);
  reference.eval();
  for (int i = 0; i < inputs_.count(); ++i) {
    try {
      referenceOutputs_.push_back(runSeeded(reference, onDevice(inputs_.inputsFor(i), device_), inputs_.seedFor(i), inputs_.executor));
    } catch (const std::exception& e) {
      std::string given;
      if (!inputs_.fixed)
        for (size_t k = 0; k < inputs_.specs.size(); ++k) {
          InputSpec unnamed = inputs_.specs[k];
          unnamed.name.clear();
          given += fmt::format("{}{}={}", k ? ", " : "",
                               k < modelInputNames.size() ? modelInputNames[k] : "input" + std::to_string(k),
                               unnamed.str());
        }
      throw ReferenceError(fmt::format("the original model fails on the given inputs{}: {}",
                                       given.empty() ? "" : " (" + given + ")", ir::torchErrorMessage(e)));
    }
  }
}

VerifyReport ReferenceRunner::check(torch::jit::Module candidate) const {
  VerifyReport report;
  report.device = describeDevice(device_);
  report.inputs = inputs_.describe();
  report.executor = executorName(inputs_.executor);
  report.notes = notes;
  report.passed = report.bitwiseEqual = true;
  candidate = ir::moduleOnDevice(candidate, device_);
  candidate.eval();
  for (int i = 0; i < inputs_.count(); ++i) {
    IterationResult r;
    r.seed = inputs_.seedFor(i);
    try {
      std::vector<c10::IValue> in = inputs_.inputsFor(i);
      if (inputAdapter) in = inputAdapter(std::move(in));
      c10::IValue actual = runSeeded(candidate, onDevice(in, device_), r.seed, inputs_.executor);
      r.comparison = compareOutputs(actual, referenceOutputs_[static_cast<size_t>(i)], tolerances_);
    } catch (const std::exception& e) {
      r.runError = ir::torchErrorMessage(e);
    }
    report.bitwiseEqual = report.bitwiseEqual && r.runError.empty() && r.comparison.bitwiseEqual();
    report.passed = report.passed && r.passed();
    const bool stop = !r.passed();
    report.iterations.push_back(std::move(r));
    if (stop) break;  // the first failing set is the one reported
  }
  return report;
}

const IterationResult* VerifyReport::firstFailure() const {
  for (const auto& it : iterations)
    if (!it.passed()) return &it;
  return nullptr;
}

double VerifyReport::maxErrorToBound() const {
  double worst = 0;
  for (const auto& it : iterations) worst = std::max(worst, it.comparison.maxErrorToBound());
  return worst;
}

std::string VerifyReport::verdict() const {
  std::string tol;
  if (!iterations.empty() && !iterations.front().comparison.leaves.empty())
    tol = iterations.front().comparison.leaves.front().tol.str();
  std::string where = fmt::format("{} on {}{}", inputs, device, tol.empty() ? "" : ", " + tol);
  if (!bitwiseEqual && !iterations.empty()) {
    const double worst = maxErrorToBound();
    where += std::isfinite(worst) ? fmt::format("; worst error {:.3g}% of its bound", 100 * worst)
                                  : std::string("; an error with no finite bound");
  }
  if (!passed) {
    const IterationResult* f = firstFailure();
    return fmt::format("FAILED at seed {} ({})", f ? f->seed : 0, where);
  }
  return fmt::format("{} ({})", bitwiseEqual ? "passed, bitwise equal" : "passed within tolerance", where);
}

std::string VerifyReport::failureReport() const {
  const IterationResult* f = firstFailure();
  if (!f) return "";
  if (!f->runError.empty()) return "  the optimized model failed to run: " + f->runError + "\n";
  return f->comparison.failureReport();
}

nlohmann::json VerifyReport::toJson() const {
  nlohmann::json j = {{"passed", passed}, {"bitwise_equal", bitwiseEqual}, {"device", device}, {"inputs", inputs},
                      {"executor", executor}, {"notes", notes}};
  if (const double worst = maxErrorToBound(); std::isfinite(worst)) j["max_error_to_bound"] = worst;
  else j["max_error_to_bound"] = nullptr;
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : iterations) {
    nlohmann::json o = {{"seed", it.seed}, {"passed", it.passed()}};
    if (!it.runError.empty()) o["run_error"] = it.runError;
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& l : it.comparison.leaves) outs.push_back(verify::toJson(l));
    o["outputs"] = outs;
    its.push_back(o);
  }
  j["iterations"] = its;
  return j;
}

}  // namespace ptopt::verify
