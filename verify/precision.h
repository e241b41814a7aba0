// What lower precision a pipeline introduces, asked of its passes
// (rewriters::PassEffects::precision, declared next to each pass's options),
// and how verification follows it (DESIGN.md, Verification): the criterion
// is verify::Tolerance::forPrecision of the lowest precision (global cosine +
// max error for bf16, fp16 and int8); this file only says which precision,
// how inputs change, and how a precision the device cannot run is emulated.
// No pass is known by name here: a new pass that lowers precision declares
// it and is verified by its tolerance.
#pragma once

#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pass_manager.h"
#include "rewriters/pipeline.h"

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::verify {

// The lowest precision the pipeline's passes introduce on ctx.targetDevice
// (fp16 and bf16; int8 lowest), or nullopt when none does.
std::optional<c10::ScalarType> lowestPrecisionIntroduced(const rewriters::Pipeline& pipeline,
                                                         const rewriters::PassRegistry& registry,
                                                         const rewriters::PassContext& ctx);
// The lowest precision found in a model after the fact: its constants, the
// dtype literals of its conversions and its quantized ops, PT2E's Q/DQ
// quantization included, decomposed or not (int8 below fp16
// below bf16 below fp32; every quantized dtype counts as int8); nullopt when
// everything is float32 or wider.
std::optional<c10::ScalarType> lowestPrecisionIn(const ir::Model& model);

// Why the pipeline's passes chose their precision by the target, one line
// each joined by "; " ("fp32 kept (...): this CPU has no native bf16"), or
// nullopt when none chose by the target.
std::optional<std::string> precisionNote(const rewriters::Pipeline& pipeline, const rewriters::PassRegistry& registry,
                                         const rewriters::PassContext& ctx);

// The same pipeline with every pass that can emulate its precision set to
// (PassEffects::emulateOption=true): fp16 cannot run on a CPU with LibTorch
// 1.13, so fp16 results are verified on CPU by running this pipeline on a
// copy of the model (fp16 rounding, fp32 compute) and saying so.
rewriters::Pipeline withEmulatedPrecision(rewriters::Pipeline pipeline, const rewriters::PassRegistry& registry);

// Everything verification needs to know about a run that lowered precision.
struct LowPrecisionRun {
  c10::ScalarType dtype;
  bool signatureChanged = false;  // float32 inputs/outputs are now `dtype`
  std::string changedBy;          // the pass that changed the signature
  // The inputs the optimized model takes (float32 tensors converted when
  // the signature changed).
  std::vector<c10::IValue> adaptInputs(std::vector<c10::IValue> inputs) const;
  std::string signatureNote() const;
};
// nullopt when the pipeline introduced no lower precision (use the fp32
// elementwise check).
std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline,
                                               const rewriters::PassRegistry& registry,
                                               const rewriters::PassContext& ctx, const rewriters::RunReport& report);

}  // namespace ptopt::verify
