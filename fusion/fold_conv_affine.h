// fold-conv-affine: fold per-channel constant arithmetic into the conv before it.
//
// Contract. Matches `conv(...) OP c` for OP in add, sub, mul, div
// (aten::add/sub/mul/div, .Tensor or .Scalar; also `c + conv` and
// `c * conv`), where c is a literal number or a constant tensor that
// broadcasts per output channel: one element, or shape [C, 1, ...] of the
// output's rank minus one, or [1, C, 1, ...] when shape metadata shows the
// conv input is batched; a tensor c must have the weight's dtype (so type
// promotion cannot change the result's dtype). mul/div scale the weight per
// output channel (dim 0, or dim 1 per group for transposed convs) and the
// bias (division becomes multiplication by 1/c, computed in float64); add/sub
// shift the bias by alpha * c (a conv without bias gains one). New constants
// get derived names (`conv1.weight.affine`); nothing is mutated. Chains
// (conv * s + t) fold in one run. Does not fire when the conv's output has
// another user, the weight is not a constant or is written in place, c does
// not broadcast per channel, `c - conv` or `c / conv` (not affine in the
// conv's weights), or the nodes sit in different blocks.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FoldConvAffinePass : public rewriters::Pass {
 public:
  std::string name() const override { return "fold-conv-affine"; }
  std::string description() const override { return "fold add/sub/mul/div by per-channel constants into the conv"; }
  std::string contract() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
