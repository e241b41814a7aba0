// fold-conv-affine: fold per-channel constant arithmetic into the conv or
// linear before it.
// The contract is kContract below (`ptopt passes fold-conv-affine` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FoldConvAffinePass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Matches `P OP c`, P a conv (ir::ConvOp) or a linear, for OP in add, sub, mul, div (aten::add/sub/mul/div, "
      ".Tensor or .Scalar; also `c + P`, `c - P` and `c * P`), where c is a literal number or a constant tensor "
      "that broadcasts per output channel: one element; for a conv [C, 1, ...] of the output's rank minus one, "
      "or [1, C, 1, ...] when shape metadata shows the conv input is batched; for a linear [C] (its output is "
      "[..., C]), or [1, ..., C] when metadata shows the output has at least that rank. Type promotion must not "
      "change the result: a floating c of another dtype folds when it is 0-dim or narrower than the weight; an "
      "integer or bool c (int8..int64, bool; 0-dim, [1] or per channel) folds when every value is exactly "
      "representable in the weight's dtype, and otherwise declines naming a value that is not. mul/div scale "
      "the weight per output channel (dim 0, or dim 1 per group for transposed convs) and the bias (division "
      "becomes multiplication by 1/c, computed in float64); add/sub shift the bias by alpha * c (a producer "
      "without bias gains one); `c - alpha*P` negates and scales the weight. New constants get derived names "
      "(conv1.weight.affine); nothing is mutated. Chains (conv * s + t) fold in one run. Does not fire when the "
      "producer's output has another user, the weight is not a floating-point constant or is written in place, "
      "c does not broadcast per channel, c would promote the result's dtype or is not exactly representable, a "
      "divisor is zero, for `c / P` (not affine in the weights), or when the nodes sit in different blocks.";

  std::string name() const override { return "fold-conv-affine"; }
  std::string description() const override { return "fold add/sub/mul/div by per-channel constants into the conv or linear"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
