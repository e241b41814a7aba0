// The table of precision passes (one line each).
#include "quant/register.h"

#include "quant/cast.h"

namespace ptopt::quant {

void registerQuantPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<CastPass>(); });
}

}  // namespace ptopt::quant
