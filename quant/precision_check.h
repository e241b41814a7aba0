// What lower precision a pipeline introduces, and the criterion its outputs
// are verified with (DESIGN.md, Verification).
//
// fp32 pipelines are checked elementwise (|a-b| <= atol + rtol*|b|). Lower
// precision accumulates error over a whole network, so a bf16 or fp16
// pipeline passes per floating-point output when
//     cosine(a, b) >= minCosine  and  max|a-b| <= atol + rtol * max|b|
// and reports the elementwise mismatch fraction for information. Non-float
// outputs (integer, bool) must still be equal. The numbers are tuned on the
// test fixtures (tests/quant/cast_test.cpp; README, Precision).
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

// The same pipeline with emulate=true on every cast pass: fp16 cannot run
// on a CPU with LibTorch 1.13, so fp16 results are verified on CPU by
// running this pipeline on a copy of the model (fp16 rounding, fp32 compute)
// and saying so.
rewriters::Pipeline withEmulatedCasts(rewriters::Pipeline pipeline);

struct PrecisionTolerance {
  double rtol = 1e-4, atol = 1e-5;
  double minCosine = 0.0;  // 0: elementwise criterion (fp32)
  bool elementwise = true;
};
// The default criterion for outputs computed in `dtype` (float32: the
// elementwise fp32 defaults).
PrecisionTolerance toleranceFor(c10::ScalarType dtype);

struct PrecisionCheck {
  bool passed = true;
  std::string summary;  // one line per tensor output: cosine, max abs, allowed, mismatch %
};
// Compares `actual` with `expected` (tensors, tuples, lists; other leaves by
// equality) with the low-precision criterion of `tol`.
PrecisionCheck checkLowPrecision(const c10::IValue& actual, const c10::IValue& expected,
                                 const PrecisionTolerance& tol);

// Everything verification needs to know about a run that lowered precision.
struct LowPrecisionRun {
  c10::ScalarType dtype;
  PrecisionTolerance tolerance;
  bool signatureChanged = false;  // cast{keep-io=false}: float32 inputs/outputs are now `dtype`
  // The inputs the optimized model takes (float32 tensors converted when
  // the signature changed).
  std::vector<c10::IValue> adaptInputs(std::vector<c10::IValue> inputs) const;
  // "bf16 criterion: cosine >= 0.99, max|a-b| <= 0.01 + 0.05*max|b|".
  std::string criterion() const;
  std::string signatureNote() const;
};
// nullopt when the pipeline introduced no lower precision (use the fp32
// elementwise check).
std::optional<LowPrecisionRun> lowPrecisionRun(const rewriters::Pipeline& pipeline,
                                               const rewriters::PassContext& ctx,
                                               const rewriters::RunReport& report);

}  // namespace ptopt::quant
