// fold-linear-bn: fold a BatchNorm1d into the Linear before it.
// The contract is kContract below (`ptopt passes fold-linear-bn` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FoldLinearBnPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Matches `aten::batch_norm(aten::linear(x, W, b), ...)` in inference mode, with constant W, constant or "
      "absent b and constant BatchNorm statistics, when the linear's output is known to be 2-D ([N, features], "
      "so BatchNorm1d normalizes the features): from shape metadata (shape-prop with --input-shape), or because "
      "the linear's input is `flatten(_, 1, -1)` or another 2-D linear. The result is "
      "`linear(x, W * s[:, None], (b - mean) * s + beta)` with s = gamma / sqrt(var + eps), computed in float64 "
      "and cast back, stored as new constants (fc.weight.bnfold, fc.bias.bnfold); nothing is mutated. Does not "
      "fire (and says why) when the output rank is unknown or not 2 (BatchNorm1d on [N, C, L] normalizes dim 1, "
      "not the linear's features), when the linear's output has another user, when linear and BatchNorm sit in "
      "different blocks, when the channels do not match the output features, or when anything is not constant. "
      "Also timm's LinearNorm (LeViT): `batch_norm(aten::flatten(linear(x, W, b), 0, 1))` (or flatten(_, 0, "
      "-2)) over a linear output known to be 3-D ([B, N, C] flattened to [B*N, C]: BatchNorm1d normalizes the "
      "features again) folds the same way, the BatchNorm's readers then reading the flatten of the folded "
      "linear [counter folded-flattened]; the linear's other readers may only read its shape (LeViT's "
      "`reshape_as(z, y)`), since the fold rewrites the linear in place. A reader `reshape_as(flatten(y), y)` "
      "(or view_as) of the folded result is then y itself (a linear's output is contiguous: the same storage, "
      "sizes and strides) and is replaced by y, the flatten erased once unread, so that an activation after it "
      "reads the linear directly [counter view-back-dropped]; not where y or that reader may be written or "
      "compared by identity.";

  std::string name() const override { return "fold-linear-bn"; }
  std::string description() const override { return "fold BatchNorm1d into the preceding Linear on 2-D input"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
