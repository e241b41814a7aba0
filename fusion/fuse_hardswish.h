// fuse-hardswish: hardswish and hardsigmoid written out in elementwise ops
// (torch.export's inference IR, hand-written models) become ATen's kernels.
// The contract is kContract below (`ptopt passes fuse-hardswish` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FuseHardswishPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "hardswish and hardsigmoid spelled out in elementwise ops become `aten::hardswish(x)` and "
      "`aten::hardsigmoid(x)`. The core is relu6(x + 3): `aten::add(x, 3)` (alpha 1, operands in either order) "
      "then `aten::clamp(., 0, 6)`, `aten::clamp(., 0)` then `aten::clamp(., None, 6)` (what "
      "`ep.run_decompositions()` writes for both activations), `aten::clamp_min(., 0)` then "
      "`aten::clamp_max(., 6)`, or `aten::hardtanh(., 0, 6)`; then `/ 6` or `* (1/6)` gives hardsigmoid(x), and "
      "`x * core` then `/ 6` or `* (1/6)`, or `x * hardsigmoid(x)` in either order, gives hardswish(x). "
      "The 3 and the 6 (or 1/6) of the add, div and mul may be number literals or 0-dim constant tensors, equal "
      "to these values within 1e-6 relative; the clamp and hardtanh bounds are number literals equal to 0 and 6. "
      "ATen computes the same formula in one vectorized pass: results differ by float rounding only "
      "(verification's tolerance). Fires only when every intermediate value has no user outside the pattern "
      "and shape-prop knows x to be a floating-point tensor of rank 1 or more; otherwise the pattern is "
      "declined with the reason. With the activation one op again, the oneDNN post-op fusions "
      "(tuned-kernels), int8 and the precision passes see it as they see the training IR's: MobileNetV3 "
      "exported with torch.export and decomposed has 4-5 ops per activation instead of one.";

  std::string name() const override { return "fuse-hardswish"; }
  std::string description() const override {
    return "hardswish / hardsigmoid written as x+3, clamps, /6 -> aten::hardswish / aten::hardsigmoid";
  }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
