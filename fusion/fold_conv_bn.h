// fold-conv-bn: fold an inference BatchNorm into the conv before it.
// The contract is kContract below (`ptopt passes fold-conv-bn` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FoldConvBnPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Matches `bn = aten::batch_norm(conv, gamma, beta, mean, var, False, momentum, eps, cudnn)` where `conv` is "
      "conv1d/2d/3d, conv_transpose1d/2d/3d or _convolution (ir::ConvOp) with a constant weight, a constant or "
      "absent bias and literal groups, and the BatchNorm's statistics (and affine parameters, when it has them) "
      "are constants. The result is one conv with weight W * s (s = gamma / sqrt(var + eps), per output channel: "
      "weight dim 0, or dim 1 per group for transposed convs) and bias (b - mean) * s + beta; a conv without bias "
      "gains one, so no BatchNorm and no separate add remain. The tensors are computed with ATen in float64, cast "
      "back to the weight's dtype, and stored as new constants with derived names (conv1.weight -> "
      "conv1.weight.bnfold, conv1.bias.bnfold): no existing tensor is ever mutated, so a weight shared by two "
      "convs gets folded copies and the other conv keeps the original. Does not fire (and says why) when: the "
      "conv's output has another user; the BatchNorm is in training mode (run bn-inference first); its "
      "statistics or affine parameters are not constants; the weight is not a constant, not floating point, or "
      "is written in place somewhere; channel counts disagree; conv and BatchNorm sit in different blocks.";

  std::string name() const override { return "fold-conv-bn"; }
  std::string description() const override { return "fold BatchNorm into the preceding conv or conv_transpose"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
