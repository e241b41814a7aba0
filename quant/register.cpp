// The table of precision passes (one line each).
#include "quant/register.h"

#include "quant/cast.h"
#include "quant/cast_tuning.h"
#include "quant/fuse_int8_activations.h"
#include "quant/fuse_int8_activations_tuning.h"
#include "quant/quantize.h"

namespace ptopt::quant {

void registerQuantPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<CastPass>(); });
  registry.add([] { return std::make_unique<QuantizePass>(); });
  registry.add([] { return std::make_unique<FuseInt8ActivationsPass>(); });
  tune::addTunable(registry, castTunable());
  tune::addTunable(registry, fuseInt8ActivationsTunable());
}

}  // namespace ptopt::quant
