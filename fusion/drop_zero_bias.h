// drop-zero-bias: a bias of zeros is no bias.
// The contract is kContract below (`ptopt passes drop-zero-bias` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class DropZeroBiasPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "A conv (any form ir::ConvOp matches) or aten::linear whose bias is a constant tensor of exact zeros gets "
      "`None` instead, saving the add. The result differs from the original at most in the sign of zero "
      "(x + 0.0 turns -0.0 into +0.0). Does not fire when the bias is not a constant, is empty, has any non-zero "
      "element, or is written in place somewhere.";

  std::string name() const override { return "drop-zero-bias"; }
  std::string description() const override { return "replace an all-zero conv/linear bias by None"; }
  std::string contract() const override { return kContract; }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
