#pragma once

#include "rewriters/registry.h"

namespace ptopt::quant {

// cast (later: int8 passes).
void registerQuantPasses(rewriters::PassRegistry& registry);

}  // namespace ptopt::quant
