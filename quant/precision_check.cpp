#include "quant/precision_check.h"

#include "quant/cast.h"
#include "target/capabilities.h"

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
    case c10::ScalarType::QInt8: return -1;  // quantize{dtype=int8}
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
    if (e.name == "quantize") {
      lowest = lower(lowest, c10::ScalarType::QInt8);
      continue;
    }
    if (e.name != "cast") continue;
    std::string dtype = "auto";
    bool preferBf16 = ctx.preferBf16;
    for (const auto& [k, v] : e.options) {
      if (k == "dtype") dtype = v;
      if (k == "prefer-bf16") preferBf16 = preferBf16 || v == "true";
    }
    if (dtype == "auto") {
      // As the pass decides it (target/capabilities.h): fp32 where the
      // target has no native low precision.
      const target::AutoPrecision choice = target::autoPrecision(ctx.targetDevice, preferBf16);
      if (choice.dtype == target::AutoPrecision::Dtype::Bf16) lowest = lower(lowest, c10::ScalarType::BFloat16);
      if (choice.dtype == target::AutoPrecision::Dtype::Fp16) lowest = lower(lowest, c10::ScalarType::Half);
      continue;
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
bool usesAutoCast(const std::vector<rewriters::PipelineElement>& elements, bool& preferBf16) {
  for (const auto& e : elements) {
    if (usesAutoCast(e.children, preferBf16)) return true;
    if (e.name != "cast") continue;
    std::string dtype = "auto";
    for (const auto& [k, v] : e.options) {
      if (k == "dtype") dtype = v;
      if (k == "prefer-bf16" && v == "true") preferBf16 = true;
    }
    if (dtype == "auto") return true;
  }
  return false;
}
}  // namespace

std::optional<std::string> autoPrecisionNote(const rewriters::Pipeline& pipeline, const rewriters::PassContext& ctx) {
  bool preferBf16 = ctx.preferBf16;
  if (!usesAutoCast(pipeline.elements, preferBf16)) return std::nullopt;
  const target::AutoPrecision choice = target::autoPrecision(ctx.targetDevice, preferBf16);
  using D = target::AutoPrecision::Dtype;
  const std::string what = choice.dtype == D::Fp32   ? "fp32 kept (cast{dtype=auto} lowered nothing)"
                           : choice.dtype == D::Bf16 ? "bf16 (cast{dtype=auto})"
                                                     : "fp16 (cast{dtype=auto})";
  return what + ": " + choice.why;
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

std::vector<c10::IValue> LowPrecisionRun::adaptInputs(std::vector<c10::IValue> inputs) const {
  if (!signatureChanged) return inputs;
  for (auto& v : inputs)
    if (v.isTensor() && v.toTensor().scalar_type() == c10::ScalarType::Float) v = v.toTensor().to(dtype);
  return inputs;
}

std::string LowPrecisionRun::signatureNote() const {
  return "cast{keep-io=false} changed the model's signature: its float32 inputs and outputs are now " +
         ir::dtypeName(dtype) + " (verification passes converted inputs)";
}

std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline, const rewriters::PassContext& ctx,
                                               const rewriters::RunReport& report) {
  auto dtype = lowestPrecisionIntroduced(pipeline, ctx);
  if (!dtype) return std::nullopt;
  LowPrecisionRun run{*dtype};
  for (const auto& e : report.executions)
    if (e.pass == "cast" && e.result.counter("io-changed") > 0) run.signatureChanged = true;
  return run;
}

}  // namespace ptopt::quant
