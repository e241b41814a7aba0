// fuse-add-relu: add then relu as one ATen kernel.
// The contract is kContract below (`ptopt passes fuse-add-relu` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class FuseAddReluPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "`relu(add.Tensor(a, b, alpha))` (or relu_ of it) becomes `aten::_add_relu.Tensor(a, b, alpha)`, and "
      "`relu_(add_.Tensor(a, b, alpha))` (ResNet's `out += identity; relu(out)`) becomes "
      "`aten::_add_relu_.Tensor(a, b, alpha)`, which mutates `a` exactly as the pair did. ATen computes both in "
      "one pass over memory instead of two. Fires only when the op exists in the running LibTorch (it does in "
      "1.13 and 2.x), the add's result has no other user, and both nodes are in the same block; an in-place add "
      "followed by an out-of-place relu is left alone (the add's input keeps the sum). Numerics are identical "
      "(same arithmetic, no reassociation). "
      "Kernels: `_add_relu` has only a CPU kernel (LibTorch 1.13 and 2.x, asked of the dispatcher), so for any other "
      "target the pass declines once and leaves the pair to that target's own fusion (fuse-cudnn on CUDA); and a pair "
      "whose operands shape-prop knows to be of a dtype the CPU kernel rejects (bf16 and fp16 in 1.13, probed once "
      "per dtype with a tiny example) is declined, so re-optimizing a model already cast to bf16 keeps its add and "
      "relu. Operands of unknown dtype are fused (float32 is the common case; without shape-prop nothing says "
      "otherwise).";

  std::string name() const override { return "fuse-add-relu"; }
  std::string description() const override { return "add followed by relu -> aten::_add_relu"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
