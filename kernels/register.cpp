// The table of kernel passes (one line each).
#include "kernels/register.h"

#include "kernels/kernel_tuning.h"
#include "kernels/onednn_fused_convs.h"
#include "kernels/tuned_kernels.h"
#include "kernels/xnnpack_convs.h"

namespace ptopt::kernels {

void registerKernelPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<TunedKernelsPass>(); });
  registry.addRaiseStep({"tuned-kernels", raisePrepackedConvs});
  registry.addRaiseStep({"tuned-kernels", raiseXnnpackConvs});
  registry.addRaiseStep({"tuned-kernels", raiseFusedConvs});
  registry.addRaiseStep({"tuned-kernels", raiseFusedLinears});
  tune::addTunable(registry, convKernelTunable());
  tune::addTunable(registry, prepackTunable());
  tune::addTunable(registry, networkTunable());
}

}  // namespace ptopt::kernels
