// fold-linear-bn: fold a BatchNorm1d into the Linear before it.
//
// Contract. Matches `aten::batch_norm(aten::linear(x, W, b), ...)` in
// inference mode, with constant W, constant or absent b and constant
// BatchNorm statistics, when the linear's output is known to be 2-D
// ([N, features], so BatchNorm1d normalizes the features): from shape
// metadata (shape-prop with --input-shape), or from the linear's input being
// `flatten(_, 1, -1)` or another 2-D linear. The result is
// `linear(x, W * s[:, None], (b - mean) * s + beta)` with s = gamma /
// sqrt(var + eps), computed in float64 and cast back, stored as new
// constants (`fc.weight.bnfold`). Does not fire (and says why) when the
// output rank is unknown or not 2 (BatchNorm1d on [N, C, L] normalizes dim
// 1, not the linear's features), when the linear's output has another user,
// or when anything is not constant.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FoldLinearBnPass : public rewriters::Pass {
 public:
  std::string name() const override { return "fold-linear-bn"; }
  std::string description() const override { return "fold BatchNorm1d into the preceding Linear on 2-D input"; }
  std::string contract() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
