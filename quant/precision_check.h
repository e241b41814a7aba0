// What lower precision a pipeline introduces (DESIGN.md, Verification).
// The criterion its outputs are judged by is verify's
// (verify::Tolerance::forPrecision: global cosine + max-error for bf16 and
// fp16); this file only says which precision and how inputs change.
#pragma once

#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pass_manager.h"
#include "rewriters/pipeline.h"

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>

namespace ptopt::quant {

// The lowest floating-point dtype the pipeline's cast passes introduce on
// ctx.targetDevice (dtype=auto resolved as the pass resolves it), or nullopt
// when it has no cast pass. Emulated casts count as their dtype.
std::optional<c10::ScalarType> lowestPrecisionIntroduced(const rewriters::Pipeline& pipeline,
                                                         const rewriters::PassContext& ctx);
// The lowest floating-point dtype found in a model after the fact: its
// constants and the dtype literals of its conversions (fp16 below bf16
// below fp32); nullopt when everything is float32 or wider.
std::optional<c10::ScalarType> lowestPrecisionIn(const ir::Model& model);

// What cast{dtype=auto} in `pipeline` does on ctx.targetDevice and why, in
// one line for the summary ("fp32 kept: this CPU has no native bf16 (...)"
// or "bf16: this CPU has native bf16 (...)"), from the target's
// capabilities (target/capabilities.h, --assume-isa); nullopt without such
// a pass.
std::optional<std::string> autoPrecisionNote(const rewriters::Pipeline& pipeline, const rewriters::PassContext& ctx);

// The same pipeline with emulate=true on every cast pass: fp16 cannot run
// on a CPU with LibTorch 1.13, so fp16 results are verified on CPU by
// running this pipeline on a copy of the model (fp16 rounding, fp32 compute)
// and saying so.
rewriters::Pipeline withEmulatedCasts(rewriters::Pipeline pipeline);

// Everything verification needs to know about a run that lowered precision.
struct LowPrecisionRun {
  c10::ScalarType dtype;
  bool signatureChanged = false;  // cast{keep-io=false}: float32 inputs/outputs are now `dtype`
  // The inputs the optimized model takes (float32 tensors converted when
  // the signature changed).
  std::vector<c10::IValue> adaptInputs(std::vector<c10::IValue> inputs) const;
  std::string signatureNote() const;
};
// nullopt when the pipeline introduced no lower precision (use the fp32
// elementwise check).
std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline,
                                               const rewriters::PassContext& ctx,
                                               const rewriters::RunReport& report);

}  // namespace ptopt::quant
