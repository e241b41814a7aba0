// fuse-gelu: GELU written out in elementwise ops becomes ATen's one gelu kernel.
// The contract is kContract below (`ptopt passes fuse-gelu` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FuseGeluPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "GELU spelled out in elementwise ops, as model code writes it, becomes one `aten::gelu`: "
      "the tanh form `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))` (GPT-2's `NewGELU`, "
      "`gelu_new`, `gelu_pytorch_tanh`) becomes `gelu(x, approximate='tanh')`, and the erf form "
      "`0.5 * x * (1 + erf(x / sqrt(2)))` (or `x * (1/sqrt(2))`) becomes `gelu(x)`. The product of x, 0.5 and "
      "the `1 + ...` factor may associate either way and every add and mul may have its operands in either "
      "order; the constants may be number literals or 0-dim constant tensors (what tracing makes of them), "
      "equal to these values within 1e-6 relative (float32 roundings of them pass), and each add's alpha is 1. "
      "ATen evaluates the same formula in one vectorized pass, in float32 for bf16 and fp16 inputs, instead of "
      "seven or eight passes over memory: results differ by float rounding only (verification's tolerance). "
      "Fires only when every intermediate value has no user outside the pattern and shape-prop knows x to be a "
      "floating-point tensor of rank 1 or more (a 0-dim x could be widened by a 0-dim float64 constant; an "
      "integer x is not GELU's domain); otherwise the pattern is declined with the reason. "
      "GPT-2 small's 12 tanh GELUs took 16% of its bf16 -O3 forward as 48 muls, 24 adds, 12 pows, 12 tanhs and "
      "the casts between them.";

  std::string name() const override { return "fuse-gelu"; }
  std::string description() const override { return "GELU written as tanh or erf arithmetic -> aten::gelu"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
