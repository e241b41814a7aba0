// The table of precision passes (one line each).
#include "quant/register.h"

#include "quant/cast.h"
#include "quant/cast_tuning.h"
#include "quant/quantize.h"

namespace ptopt::quant {

void registerQuantPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<CastPass>(); });
  registry.add([] { return std::make_unique<QuantizePass>(); });
  tune::addTunable(registry, castTunable());
}

}  // namespace ptopt::quant
