#include "verify/runner.h"

#include "ir/model.h"
#include "verify/fp64_reference.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <chrono>
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
  if (i >= 1 && static_cast<size_t>(i - 1) < otherSizes.size()) return makeInputs(otherSizes[i - 1], seedFor(i));
  return makeInputs(specs, seedFor(i));
}

void InputSource::addOtherSizes(const std::vector<std::vector<std::vector<int64_t>>>& sizes) {
  for (const auto& shapes : sizes) {
    std::vector<InputSpec> other = specs;
    for (size_t i = 0; i < other.size() && i < shapes.size(); ++i) other[i].shape = shapes[i];
    otherSizes.push_back(std::move(other));
  }
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
  for (int i = 1; i < iterations && static_cast<size_t>(i - 1) < otherSizes.size(); ++i) {
    std::vector<std::string> other;
    for (const auto& spec : otherSizes[i - 1]) other.push_back(spec.str());
    shapes.push_back(fmt::format("| {}", fmt::join(other, " ")));
  }
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

struct ReferenceRunner::Fp64State {
  bool tried = false;
  std::unique_ptr<Fp64Reference> reference, perturbed;  // the original; its weights within half an ulp
  std::string error;
  std::vector<std::optional<c10::IValue>> outputs, perturbedOutputs;  // per input set
  double ms = 0;
};

bool Fp64Check::passed() const {
  return error.empty() && std::all_of(leaves.begin(), leaves.end(), [](const Fp64Leaf& l) { return l.passed; });
}

ReferenceRunner::ReferenceRunner(ReferenceRunner&&) noexcept = default;
ReferenceRunner& ReferenceRunner::operator=(ReferenceRunner&&) noexcept = default;
ReferenceRunner::~ReferenceRunner() = default;

ReferenceRunner::ReferenceRunner(torch::jit::Module reference, InputSource inputs, ToleranceSet tolerances,
                                 c10::Device device, std::vector<std::string> modelInputNames)
    : inputs_(std::move(inputs)), tolerances_(std::move(tolerances)), device_(device),
      fp64_(std::make_unique<Fp64State>()) {
  if (device_.is_cuda()) {
    // The fp32 reference must be fp32: no TF32 in cuBLAS or cuDNN.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
  reference = ir::moduleOnDevice(reference, device_);
  reference.eval();
  reference_ = reference;
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

namespace {

// Structure, shapes and dtypes right, no new NaN or Inf, non-tensor values
// equal: a miss the float64 reference may judge.
bool missesOnNumbersAlone(const Comparison& c) {
  return std::all_of(c.leaves.begin(), c.leaves.end(), [](const LeafComparison& l) {
    return l.structureOk && l.newNan == 0 && l.newInf == 0 && (l.isTensor || l.bitwiseEqual);
  });
}

}  // namespace

Fp64Check ReferenceRunner::judgeAgainstFp64(int iteration, const c10::IValue& actual, const Comparison& fp32,
                                            const torch::jit::Module& candidate, Fp64Summary& summary) const {
  Fp64State& st = *fp64_;
  const auto start = std::chrono::steady_clock::now();
  const size_t at = static_cast<size_t>(iteration);
  const std::vector<c10::IValue> inputs = inputs_.inputsFor(iteration);
  const uint64_t seed = inputs_.seedFor(iteration);
  Fp64Check check;
  // OUT in float64, when an fp32-criterion leaf missed (the global ones
  // are judged against r64 alone).
  const bool judgesRewrite = std::any_of(fp32.leaves.begin(), fp32.leaves.end(), [](const LeafComparison& l) {
    return l.isTensor && !l.passed() && l.tol.criterion == Criterion::Elementwise;
  });
  std::optional<c10::IValue> out64;
  bool outExact = false;
  try {
    if (!st.tried) {
      st.tried = true;
      st.outputs.resize(static_cast<size_t>(inputs_.count()));
      st.perturbedOutputs.resize(static_cast<size_t>(inputs_.count()));
      st.reference = std::make_unique<Fp64Reference>(reference_, device_);
      st.perturbed = std::make_unique<Fp64Reference>(reference_, device_, /*perturbSeed=*/0);
    }
    if (!st.reference) throw std::runtime_error(st.error);
    if (!st.outputs[at]) st.outputs[at] = st.reference->run(inputs, seed);
    if (judgesRewrite) {
      if (!st.perturbedOutputs[at]) st.perturbedOutputs[at] = st.perturbed->run(inputs, seed);
      try {
        Fp64Reference rewritten(candidate, device_);
        std::vector<c10::IValue> in = inputAdapter ? inputAdapter(inputs) : inputs;
        out64 = rewritten.run(in, seed);
        outExact = rewritten.keptFp32().empty();
      } catch (const std::exception&) {
        out64.reset();  // OUT cannot run in float64: judged by its fp32 distance alone
      }
    }
  } catch (const std::exception& e) {
    if (st.error.empty()) st.error = e.what();
    check.error = st.error;
  }
  st.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  summary.ms = st.ms;
  if (st.reference) summary.keptFp32 = st.reference->keptFp32();
  summary.error = st.error;
  if (!check.error.empty()) return check;

  const c10::IValue& r64 = *st.outputs[at];
  const Comparison result = compareOutputs(actual, r64, tolerances_);
  const Comparison original = compareOutputs(referenceOutputs_[at], r64, tolerances_);
  std::optional<Comparison> rewrite, noise;
  if (out64) rewrite = compareOutputs(*out64, r64, tolerances_);
  if (judgesRewrite) noise = compareOutputs(*st.perturbedOutputs[at], r64, tolerances_);
  const size_t n = fp32.leaves.size();
  if (result.leaves.size() != n || original.leaves.size() != n || (rewrite && rewrite->leaves.size() != n) ||
      (noise && noise->leaves.size() != n)) {
    check.error = "the float64 runs' outputs differ in structure from the original's";
    summary.error = check.error;
    return check;
  }
  auto rel = [](const LeafComparison& l) { return l.bitwiseEqual ? 0.0 : l.relativeL2; };
  for (size_t k = 0; k < n; ++k) {
    const LeafComparison &a = result.leaves[k], &o = original.leaves[k];
    if (!fp32.leaves[k].isTensor) continue;
    Fp64Leaf leaf;
    leaf.path = fp32.leaves[k].path;
    leaf.global = fp32.leaves[k].tol.criterion == Criterion::Global;
    leaf.resultRel = rel(a);
    leaf.originalRel = rel(o);
    leaf.resultMaxAbs = a.bitwiseEqual ? 0 : a.maxAbs;
    leaf.originalMaxAbs = o.bitwiseEqual ? 0 : o.maxAbs;
    leaf.resultCosine = a.bitwiseEqual ? 1 : a.cosine;
    leaf.passedFp32 = fp32.leaves[k].passed();
    const double r64Max = o.bitwiseEqual ? a.maxAbsReference : o.maxAbsReference;
    bool byFp64 = false;
    if (leaf.global) {
      byFp64 = a.structureOk && a.newNan == 0 && a.newInf == 0 && leaf.resultCosine >= a.tol.minCosine &&
               leaf.resultMaxAbs <= a.tol.atol + a.tol.rtol * r64Max;
    } else if (rewrite && noise) {
      leaf.exact = outExact;
      leaf.rewriteRel = rel(rewrite->leaves[k]);
      leaf.weightNoiseRel = rel(noise->leaves[k]);
      const bool rewriteRight = leaf.rewriteRel <= kFp64Margin * leaf.weightNoiseRel + kFloat32UnitRoundoff;
      const double fp32Margin = outExact ? kFp32NoiseMargin : kFp64Margin;
      byFp64 = rewriteRight && leaf.resultRel <= fp32Margin * leaf.originalRel + kFloat32UnitRoundoff;
    } else {
      byFp64 = leaf.resultRel <= kFp64Margin * leaf.originalRel + kFloat32UnitRoundoff &&
               leaf.resultMaxAbs <= kFp64Margin * leaf.originalMaxAbs + kFloat32UnitRoundoff * r64Max;
    }
    leaf.passed = leaf.passedFp32 || byFp64;
    summary.originalRel = std::max(summary.originalRel, leaf.originalRel);
    check.leaves.push_back(leaf);
  }
  return check;
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
      if (!r.comparison.withinTolerance() && missesOnNumbersAlone(r.comparison)) {
        if (!report.fp64) report.fp64.emplace();
        r.fp64 = judgeAgainstFp64(i, actual, r.comparison, candidate, *report.fp64);
      }
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

bool VerifyReport::decidedByFp64() const {
  return passed && std::any_of(iterations.begin(), iterations.end(),
                               [](const IterationResult& it) { return it.decidedByFp64(); });
}

namespace {

// The worst leaf the fp32 criterion missed, by its relative L2 distance
// from float64.
const Fp64Leaf* worstFp64(const std::vector<IterationResult>& iterations) {
  const Fp64Leaf* worst = nullptr;
  for (const auto& it : iterations)
    if (it.fp64)
      for (const auto& l : it.fp64->leaves)
        if (!l.passedFp32 && (!worst || l.resultRel >= worst->resultRel)) worst = &l;
  return worst;
}

std::string fp64Clause(const VerifyReport& r) {
  if (!r.fp64) return "";
  const Fp64Summary& f = *r.fp64;
  if (!f.error.empty()) return "; float64 reference unavailable: " + f.error;
  std::string s = fmt::format("; against float64: the fp32 original is {:.3g} off (relative L2; rounding "
                              "amplified ~{:.2g}x)", f.originalRel, f.amplification());
  if (const Fp64Leaf* w = worstFp64(r.iterations))
    s += w->global ? fmt::format(", OUT {:.3g} with cosine {:.5f} (the global criterion, against float64)",
                                 w->resultRel, w->resultCosine)
                   : w->exact ? fmt::format(", OUT {:.3g}; the rewrite in float64 {:.3g} off, weight rounding {:.3g} (at most "
                                            "{:g}x passes)", w->resultRel, w->rewriteRel, w->weightNoiseRel, kFp64Margin)
                              : fmt::format(", OUT {:.3g} (at most {:g}x the original's passes)", w->resultRel, kFp64Margin);
  if (!f.keptFp32.empty()) s += fmt::format("; {} op(s) without a float64 kernel ran in fp32", f.keptFp32.size());
  return s + fmt::format("; float64 runs {:.0f} ms", f.ms);
}

}  // namespace

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
  where += fp64Clause(*this);
  if (!passed) {
    const IterationResult* f = firstFailure();
    return fmt::format("FAILED at seed {} ({})", f ? f->seed : 0, where);
  }
  if (decidedByFp64())
    return fmt::format("passed against the float64 reference: the fp32 criterion was missed on an ill-conditioned "
                       "model ({})", where);
  return fmt::format("{} ({})", bitwiseEqual ? "passed, bitwise equal" : "passed within tolerance", where);
}

std::string VerifyReport::failureReport() const {
  const IterationResult* f = firstFailure();
  if (!f) return "";
  if (!f->runError.empty()) return "  the optimized model failed to run: " + f->runError + "\n";
  std::string out = f->comparison.failureReport();
  if (f->fp64 && f->fp64->error.empty()) {
    out += fmt::format("  against the float64 reference (relative L2 / max abs; the rewrite in float64 within {:g}x "
                       "of weight rounding and OUT within {:g}x of the fp32 original, or the global criterion):\n",
                       kFp64Margin, kFp32NoiseMargin);
    for (const auto& l : f->fp64->leaves)
      out += fmt::format("    {}: {} OUT {:.3g} / {:.3g}, fp32 original {:.3g} / {:.3g}{}\n", l.path,
                         l.passed ? "ok" : "FAIL", l.resultRel, l.resultMaxAbs, l.originalRel, l.originalMaxAbs,
                         l.global  ? fmt::format(" (global criterion: cosine {:.5f})", l.resultCosine)
                         : l.exact ? fmt::format("; the rewrite in float64 {:.3g}, weight rounding {:.3g}",
                                                 l.rewriteRel, l.weightNoiseRel)
                                   : std::string());
  }
  return out;
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
  j["reference"] = decidedByFp64() ? "fp64" : "fp32";
  if (fp64) {
    nlohmann::json f = {{"ms", fp64->ms}, {"kept_fp32", fp64->keptFp32}, {"margin", kFp64Margin},
                        {"fp32_noise_margin", kFp32NoiseMargin},
                        {"original_relative_l2", fp64->originalRel}, {"amplification", fp64->amplification()}};
    if (!fp64->error.empty()) f["error"] = fp64->error;
    nlohmann::json leaves = nlohmann::json::array();
    for (const auto& it : iterations)
      if (it.fp64)
        for (const auto& l : it.fp64->leaves)
          leaves.push_back({{"seed", it.seed}, {"output", l.path}, {"passed", l.passed}, {"passed_fp32", l.passedFp32},
                            {"criterion", l.global ? "global" : "no worse than the fp32 original"},
                            {"result_relative_l2", l.resultRel}, {"original_relative_l2", l.originalRel},
                            {"result_max_abs", l.resultMaxAbs}, {"original_max_abs", l.originalMaxAbs},
                            {"result_cosine", l.resultCosine}, {"rewrite_in_fp64_exact", l.exact},
                            {"rewrite_relative_l2", l.rewriteRel}, {"weight_rounding_relative_l2", l.weightNoiseRel}});
    f["outputs"] = leaves;
    j["fp64_reference"] = f;
  }
  return j;
}

}  // namespace ptopt::verify
