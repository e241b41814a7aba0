// The table of fusion passes (one line each).
#include "fusion/register.h"

#include "fusion/bn_to_affine.h"
#include "fusion/bn_to_affine_tuning.h"
#include "fusion/drop_zero_bias.h"
#include "fusion/fold_conv_affine.h"
#include "fusion/fold_conv_bn.h"
#include "fusion/fold_linear_bn.h"
#include "fusion/fuse_add_relu.h"
#include "fusion/fuse_gelu.h"
#include "fusion/fuse_hardswish.h"
#include "fusion/fuse_cudnn.h"
#include "fusion/fuse_cudnn_tuning.h"

namespace ptopt::fusion {

void registerFusionPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<FoldConvBnPass>(); });
  registry.add([] { return std::make_unique<FoldLinearBnPass>(); });
  registry.add([] { return std::make_unique<FoldConvAffinePass>(); });
  registry.add([] { return std::make_unique<FuseAddReluPass>(); });
  registry.add([] { return std::make_unique<FuseGeluPass>(); });
  registry.add([] { return std::make_unique<FuseHardswishPass>(); });
  registry.add([] { return std::make_unique<DropZeroBiasPass>(); });
  registry.add([] { return std::make_unique<BnToAffinePass>(); });
  registry.add([] { return std::make_unique<FuseCudnnPass>(); });
  tune::addTunable(registry, bnToAffineTunable());
  tune::addTunable(registry, fuseCudnnTunable());
}

}  // namespace ptopt::fusion
