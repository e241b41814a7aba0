// bn-inference: BatchNorm in inference form (training=True becomes False).
// The contract is kContract below (`ptopt passes bn-inference` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::rewriters {

class BnInferencePass : public Pass {
 public:
  static constexpr const char* kContract =
      "`aten::batch_norm(x, w, b, mean, var, training=True, ...)` with a literal True (a model traced in "
      "training mode) becomes the inference form (training=False): it normalizes with the running "
      "statistics instead of the batch's and no longer updates them. A BatchNorm without running statistics "
      "(track_running_stats=False: mean/var are None) is reported and left alone: it has nothing to "
      "normalize with; so is one whose training flag is not a literal. aten::instance_norm is left alone. "
      "Does not fire when every BatchNorm is already in inference form. Like remove-dropout, this changes a "
      "training-mode model's outputs on purpose. Counters: converted, declined.";

  std::string name() const override { return "bn-inference"; }
  std::string description() const override { return "switch training-mode batch_norm to the running statistics"; }
  std::string contract() const override { return kContract; }
  PassResult run(ir::Graph& graph, PassContext& ctx) override;
  PassEffects effects(const PassContext&) const override {
    PassEffects e;
    e.specializesTraining = true;
    return e;
  }
};

}  // namespace ptopt::rewriters
