#include "quant/fuse_int8_activations_tuning.h"

#include "quant/fuse_int8_activations.h"
#include "quant/quantize.h"

namespace ptopt::quant {

namespace {

bool hasChains(const ir::Graph& g) {
  for (const ir::Node* n : *g.block())
    if (int8ActivationChain(*n)) return true;
  return false;
}

void offerFuseInt8Activations(tune::TuningSession& s) {
  if (!hasChains(s.model().forward())) return;  // nothing the pass would fuse
  if (const std::string why = fuseInt8ActivationsMissing(s.context()); !why.empty()) {
    s.say("fuse-int8-activations: not timed (" + why + ")");
    return;
  }
  const rewriters::PipelineElement e{FuseInt8ActivationsPass().name(), {}, {}};
  if (s.preferOpByOp("int8-activations", std::nullopt, e, "fused")) s.keep(e);
}

}  // namespace

tune::Tunable fuseInt8ActivationsTunable() {
  tune::Tunable t;
  t.kind = "int8-activations";
  t.applies = [](tune::TuningSession& s) { return s.pipelineUses(QuantizePass().name()) && s.device().is_cpu(); };
  t.offeredBefore = {"fuse-cudnn"};
  t.offer = offerFuseInt8Activations;
  t.expectedDecisions = [](const ir::Graph&) { return size_t{1}; };
  return t;
}

}  // namespace ptopt::quant
