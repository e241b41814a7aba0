#pragma once

#include "rewriters/registry.h"

namespace ptopt::layout {

// channels-last.
void registerLayoutPasses(rewriters::PassRegistry& registry);

}  // namespace ptopt::layout
