// remove-dropout: inference has no dropout; every dropout becomes its input.
// The contract is kContract below (`ptopt passes remove-dropout` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class RemoveDropoutPass : public Pass {
 public:
  static constexpr const char* kContract =
      "Every dropout form (aten::dropout, feature_dropout, alpha_dropout, feature_alpha_dropout and their "
      "in-place `_` variants; ir::DropoutOp) is replaced by its input, whatever its train argument says: a "
      "model traced in training mode bakes train=True in as a literal, and inference must not drop "
      "activations. The in-place variants return their (in eval unchanged) input, so their users read the "
      "input directly. Does not fire when the graph has no dropout. Removing a training-mode dropout "
      "changes the model's outputs on purpose; verification of such models compares against eval-mode "
      "semantics. Counter: removed.";

  std::string name() const override { return "remove-dropout"; }
  std::string description() const override { return "replace every dropout by its input (inference)"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
  PassEffects effects(const PassContext&) const override {
    PassEffects e;
    e.specializesTraining = true;
    return e;
  }
};

// A dropout of any form whose input is a value.
bool isDropout(const ir::Node* n);

}  // namespace ptopt::rewriters
