// remove-dropout: inference has no dropout.
//
// Contract. Every dropout form (aten::dropout, feature_dropout,
// alpha_dropout, feature_alpha_dropout and their in-place `_` variants) is
// replaced by its input, whatever its `train` argument says: a model traced in
// training mode bakes `train=True` in as a literal, and inference must not
// drop activations. The in-place variants return their (unchanged in eval)
// input, so their users read the input directly. Does not fire when the graph
// has no dropout. Note: removing a training-mode dropout changes the model's
// outputs (that is the point); verification of such models compares against
// eval-mode semantics.
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class RemoveDropoutPass : public Pass {
 public:
  std::string name() const override { return "remove-dropout"; }
  std::string description() const override { return "replace every dropout by its input (inference)"; }
  std::string contract() const override;
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
};

bool isDropout(const ir::Node* n);

}  // namespace ptopt::rewriters
