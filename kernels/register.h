#pragma once

#include "rewriters/registry.h"

namespace ptopt::kernels {

// tuned-kernels, its raise step, and the kernel choices --tune offers.
void registerKernelPasses(rewriters::PassRegistry& registry);

}  // namespace ptopt::kernels
