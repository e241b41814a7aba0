// bn-to-affine: an unfoldable BatchNorm as one multiply-add.
// The contract is kContract below (`ptopt passes bn-to-affine` prints it).
#pragma once

#include "rewriters/pass.h"

namespace ptopt::fusion {

class BnToAffinePass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "An inference `aten::batch_norm` with constant statistics that no conv or linear absorbed (DenseNet's BN "
      "after a concat) can be written as `aten::addcmul(shift, x, scale)` with precomputed per-channel "
      "scale = gamma / sqrt(var + eps) and shift = beta - mean * scale, shaped [C, 1, ...] for the input's rank "
      "(new constants `<bn>.affine_scale`, `<bn>.affine_shift`). On the CPUs we measured (bench/bn_vs_affine.py, "
      "LibTorch 1.13, 1 thread) batch_norm's inference kernel is 3-5x faster than addcmul, and an elementwise "
      "mul + add is slower still, so by default the pass leaves every BatchNorm alone and says why; `force=true` "
      "converts anyway (for runtimes where a multiply-add fuses with its neighbours). Even with force it does "
      "not fire when the BatchNorm is in training mode, the input rank is unknown (run shape-prop with "
      "--input-shape), or the statistics are not constants. `nodes=` (the BatchNorms' result names, ';'-separated; "
      "--tune fills it with those where addcmul measured faster) converts exactly those, as force does, and "
      "leaves the others alone.";

  std::string name() const override { return "bn-to-affine"; }
  std::string description() const override { return "unfoldable BatchNorm -> addcmul (only with force=true: slower on CPU)"; }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override {
    return {{"force", rewriters::OptionKind::Bool, "false", "convert even though batch_norm is faster on CPU", {}, {}, {}},
            {"nodes", rewriters::OptionKind::String, "",
             "convert only these BatchNorms (result names, ';'-separated; set by --tune)", {}, {}, {}}};
  }
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
};

}  // namespace ptopt::fusion
