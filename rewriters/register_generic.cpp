// The table of generic passes (one line each).
#include "rewriters/bn_inference.h"
#include "rewriters/canonicalize.h"
#include "rewriters/const_fold.h"
#include "rewriters/cse.h"
#include "rewriters/dce.h"
#include "rewriters/functionalize.h"
#include "rewriters/registry.h"
#include "rewriters/remove_dropout.h"
#include "rewriters/rules.h"
#include "rewriters/shape_prop.h"

namespace ptopt::rewriters {

void registerGenericPasses(PassRegistry& registry) {
  registry.add([] { return std::make_unique<BnInferencePass>(); });
  registry.add([] { return std::make_unique<CanonicalizePass>(); });
  registry.add([] { return std::make_unique<ConstFoldPass>(); });
  registry.add([] { return std::make_unique<CsePass>(); });
  registry.add([] { return std::make_unique<DcePass>(); });
  registry.add([] { return std::make_unique<FunctionalizePass>(); });
  registry.add([] { return std::make_unique<RemoveDropoutPass>(); });
  registry.add([] { return std::make_unique<RulesPass>(); });
  registry.add([] { return std::make_unique<ShapePropPass>(); });
}

}  // namespace ptopt::rewriters
