#pragma once

#include "rewriters/registry.h"

namespace ptopt::fusion {

// fold-conv-bn, fold-linear-bn, ...
void registerFusionPasses(rewriters::PassRegistry& registry);

}  // namespace ptopt::fusion
