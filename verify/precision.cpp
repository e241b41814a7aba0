#include "verify/precision.h"

#include "ir/literal.h"
#include "ir/op_views.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace ptopt::verify {

namespace {

// Lower is less precise: fp16 (10 mantissa bits) < bf16 (7 bits, but fp32's
// range) is not a total order in both respects; for tolerances the one with
// the larger rtol counts as lower, which is bf16. int8 is lowest.
int precisionRank(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::QInt8: return -1;
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

}  // namespace

std::optional<c10::ScalarType> lowestPrecisionIntroduced(const rewriters::Pipeline& pipeline,
                                                         const rewriters::PassRegistry& registry,
                                                         const rewriters::PassContext& ctx) {
  std::optional<c10::ScalarType> lowest;
  for (const auto& fx : rewriters::pipelineEffects(pipeline, registry, &ctx))
    if (fx.precision) lowest = lower(lowest, *fx.precision);
  return lowest;
}

std::optional<std::string> precisionNote(const rewriters::Pipeline& pipeline, const rewriters::PassRegistry& registry,
                                         const rewriters::PassContext& ctx) {
  std::string notes;
  for (const auto& fx : rewriters::pipelineEffects(pipeline, registry, &ctx))
    if (!fx.precisionNote.empty() && notes.find(fx.precisionNote) == std::string::npos)
      notes += (notes.empty() ? "" : "; ") + fx.precisionNote;
  if (notes.empty()) return std::nullopt;
  return notes;
}

rewriters::Pipeline withEmulatedPrecision(rewriters::Pipeline pipeline, const rewriters::PassRegistry& registry) {
  rewriters::forEachExecution(pipeline, registry, [](rewriters::PipelineElement& e, const rewriters::PassEffects& fx) {
    if (!fx.emulateOption.empty()) e.setOption(fx.emulateOption, "true");
  });
  return pipeline;
}

namespace {
// int8 for every quantized dtype (its criterion is int8's).
c10::ScalarType asPrecision(c10::ScalarType t) { return c10::isQIntType(t) ? c10::ScalarType::QInt8 : t; }

// PT2E's Q/DQ form quantizes with plain ops: quantized_decomposed::
// quantize_per_tensor in a program, and, once a program runs as TorchScript
// (ir/qdq_ops.h), to(clamp(round(x * s) + zp, qmin, qmax), uint8|int8): a
// conversion to an 8-bit integer of a value rounded a few ops before.
bool quantizesActivations(const ir::Node* n) {
  if (n->target().rfind("quantized_decomposed::quantize", 0) == 0) return true;
  if (!n->is("aten::to")) return false;
  bool eightBit = false;
  for (const auto& a : n->args())
    if (a.isLiteral() && a.literal().is<c10::ScalarType>()) {
      const c10::ScalarType t = a.literal().as<c10::ScalarType>();
      eightBit = eightBit || t == c10::ScalarType::Byte || t == c10::ScalarType::Char;
    }
  const ir::Node* p = n;
  for (int depth = 0; eightBit && depth < 3; ++depth) {
    const ir::Value* self = p->schema() ? ir::OpView::of(const_cast<ir::Node*>(p)).value("self") : nullptr;
    if (!self || !self->node()) return false;
    p = self->node();
    if (p->is("aten::round")) return true;
  }
  return false;
}
}  // namespace

std::optional<c10::ScalarType> lowestPrecisionIn(const ir::Model& model) {
  std::optional<c10::ScalarType> lowest;
  for (const auto& [name, value] : model.constants->entries())
    if (value.isTensor()) lowest = lower(lowest, asPrecision(value.toTensor().scalar_type()));
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](ir::Node* n) {
      if (n->target().rfind("quantized::", 0) == 0 || quantizesActivations(n))
        lowest = lower(lowest, c10::ScalarType::QInt8);
      for (const auto& a : n->args())
        if (a.isLiteral() && a.literal().is<c10::ScalarType>())
          lowest = lower(lowest, asPrecision(a.literal().as<c10::ScalarType>()));
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
  return changedBy + " changed the model's signature: its float32 inputs and outputs are now " +
         ir::dtypeName(dtype) + " (verification passes converted inputs)";
}

std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline,
                                               const rewriters::PassRegistry& registry,
                                               const rewriters::PassContext& ctx, const rewriters::RunReport& report) {
  auto dtype = lowestPrecisionIntroduced(pipeline, registry, ctx);
  if (!dtype) return std::nullopt;
  LowPrecisionRun run{*dtype};
  for (const auto& e : report.executions)
    if (e.result.counter(rewriters::kSignatureChangedCounter) > 0) {
      run.signatureChanged = true;
      if (run.changedBy.empty()) run.changedBy = e.pass;
    }
  return run;
}

}  // namespace ptopt::verify
