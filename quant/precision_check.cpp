#include "quant/precision_check.h"

#include "quant/cast.h"

#include "ir/literal.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace ptopt::quant {

namespace {

// Lower is less precise: fp16 (10 mantissa bits) < bf16 (7 bits, but fp32's
// range) is not a total order in both respects; for tolerances the one with
// the larger rtol counts as lower, which is bf16.
int precisionRank(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::BFloat16: return 0;
    case c10::ScalarType::Half: return 1;
    default: return 2;
  }
}

std::optional<c10::ScalarType> lower(std::optional<c10::ScalarType> a, c10::ScalarType b) {
  if (precisionRank(b) >= 2) return a;
  if (!a || precisionRank(b) < precisionRank(*a)) return b;
  return a;
}

void scan(const std::vector<rewriters::PipelineElement>& elements, const rewriters::PassContext& ctx,
          std::optional<c10::ScalarType>& lowest) {
  for (const auto& e : elements) {
    scan(e.children, ctx, lowest);
    if (e.name != "cast") continue;
    std::string dtype = "auto";
    bool preferBf16 = ctx.preferBf16;
    for (const auto& [k, v] : e.options) {
      if (k == "dtype") dtype = v;
      if (k == "prefer-bf16") preferBf16 = preferBf16 || v == "true";
    }
    lowest = lower(lowest, resolveCastDtype(dtype, ctx.targetDevice, preferBf16));
  }
}

}  // namespace

std::optional<c10::ScalarType> lowestPrecisionIntroduced(const rewriters::Pipeline& pipeline,
                                                         const rewriters::PassContext& ctx) {
  std::optional<c10::ScalarType> lowest;
  scan(pipeline.elements, ctx, lowest);
  return lowest;
}

namespace {
void emulate(std::vector<rewriters::PipelineElement>& elements) {
  for (auto& e : elements) {
    emulate(e.children);
    if (e.name != "cast") continue;
    bool set = false;
    for (auto& [k, v] : e.options)
      if (k == "emulate") v = "true", set = true;
    if (!set) e.options.emplace_back("emulate", "true");
  }
}
}  // namespace

rewriters::Pipeline withEmulatedCasts(rewriters::Pipeline pipeline) {
  emulate(pipeline.elements);
  return pipeline;
}

std::optional<c10::ScalarType> lowestPrecisionIn(const ir::Model& model) {
  std::optional<c10::ScalarType> lowest;
  for (const auto& [name, value] : model.constants->entries())
    if (value.isTensor()) lowest = lower(lowest, value.toTensor().scalar_type());
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](ir::Node* n) {
      for (const auto& a : n->args())
        if (a.isLiteral() && a.literal().is<c10::ScalarType>()) lowest = lower(lowest, a.literal().as<c10::ScalarType>());
    });
  return lowest;
}

PrecisionTolerance toleranceFor(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::BFloat16: return {5e-2, 1e-2, 0.99, false};
    case c10::ScalarType::Half: return {1e-2, 1e-3, 0.99, false};
    default: return {};
  }
}

namespace {

void compareLeaf(const c10::IValue& a, const c10::IValue& b, const std::string& path, const PrecisionTolerance& tol,
                 PrecisionCheck& out) {
  auto fail = [&](const std::string& why) {
    out.passed = false;
    out.summary += path + ": " + why + "\n";
  };
  if (a.isTensor() && b.isTensor()) {
    at::Tensor x = a.toTensor(), y = b.toTensor();
    if (x.sizes() != y.sizes()) return fail("shape differs");
    if (!y.is_floating_point() || !x.is_floating_point()) {
      if (x.scalar_type() != y.scalar_type()) return fail("dtype " + std::string(c10::toString(x.scalar_type())) + " vs " + c10::toString(y.scalar_type()));
      if (!at::equal(x, y)) return fail("non-float values differ");
      out.summary += path + ": equal\n";
      return;
    }
    at::Tensor xd = x.to(at::kDouble).flatten(), yd = y.to(at::kDouble).flatten();
    const double maxAbs = xd.numel() ? (xd - yd).abs().max().item<double>() : 0.0;
    const double maxRef = yd.numel() ? yd.abs().max().item<double>() : 0.0;
    const double allowed = tol.atol + tol.rtol * maxRef;
    const double nx = xd.norm().item<double>(), ny = yd.norm().item<double>();
    const double cosine = (nx == 0 || ny == 0) ? (nx == ny ? 1.0 : 0.0) : xd.dot(yd).item<double>() / (nx * ny);
    const double mismatch = xd.numel() ? ((xd - yd).abs() > (tol.atol + tol.rtol * yd.abs())).sum().item<double>() / static_cast<double>(xd.numel()) : 0.0;
    const bool ok = std::isfinite(maxAbs) && maxAbs <= allowed && cosine >= tol.minCosine;
    out.summary += fmt::format("{}: {} cosine {:.6f} (min {}), max|a-b| {:.3g} (allowed {:.3g}), mismatch {:.2f}%\n", path,
                               ok ? "ok" : "FAILED", cosine, tol.minCosine, maxAbs, allowed, 100 * mismatch);
    if (!ok) out.passed = false;
    return;
  }
  const auto listOf = [](const c10::IValue& v) -> std::optional<std::vector<c10::IValue>> {
    std::vector<c10::IValue> out;
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) out.push_back(e);
      return out;
    }
    if (v.isList()) {
      for (const auto& e : v.toListRef()) out.push_back(e);
      return out;
    }
    return std::nullopt;
  };
  auto la = listOf(a), lb = listOf(b);
  if (la && lb) {
    if (la->size() != lb->size()) return fail("length differs");
    for (size_t i = 0; i < la->size(); ++i) compareLeaf((*la)[i], (*lb)[i], path + "[" + std::to_string(i) + "]", tol, out);
    return;
  }
  if (a.tagKind() != b.tagKind()) return fail("type " + a.tagKind() + " vs " + b.tagKind());
  if (!(a == b)) return fail("values differ");
}

}  // namespace

PrecisionCheck checkLowPrecision(const c10::IValue& actual, const c10::IValue& expected,
                                 const PrecisionTolerance& tol) {
  PrecisionCheck out;
  compareLeaf(actual, expected, "out", tol, out);
  return out;
}

std::vector<c10::IValue> LowPrecisionRun::adaptInputs(std::vector<c10::IValue> inputs) const {
  if (!signatureChanged) return inputs;
  for (auto& v : inputs)
    if (v.isTensor() && v.toTensor().scalar_type() == c10::ScalarType::Float) v = v.toTensor().to(dtype);
  return inputs;
}

std::string LowPrecisionRun::criterion() const {
  return fmt::format("{} criterion: cosine >= {:g}, max|a-b| <= {:g} + {:g}*max|b|", ir::dtypeName(dtype),
                     tolerance.minCosine, tolerance.atol, tolerance.rtol);
}

std::string LowPrecisionRun::signatureNote() const {
  return "cast{keep-io=false} changed the model's signature: its float32 inputs and outputs are now " +
         ir::dtypeName(dtype) + " (verification passes converted inputs)";
}

std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline, const rewriters::PassContext& ctx,
                                               const rewriters::RunReport& report) {
  auto dtype = lowestPrecisionIntroduced(pipeline, ctx);
  if (!dtype) return std::nullopt;
  LowPrecisionRun run{*dtype, toleranceFor(*dtype)};
  for (const auto& e : report.executions)
    if (e.pass == "cast" && e.result.counter("io-changed") > 0) run.signatureChanged = true;
  return run;
}

}  // namespace ptopt::quant
