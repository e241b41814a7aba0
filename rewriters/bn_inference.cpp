#include "rewriters/bn_inference.h"

namespace ptopt::rewriters {

std::string BnInferencePass::contract() const {
  return "batch_norm(x, w, b, mean, var, training=True, ...) with a literal True (a model traced in "
         "training mode) becomes the inference form (training=False): it normalizes with the running "
         "statistics and no longer updates them. A BatchNorm without running statistics "
         "(track_running_stats=False) is reported and left alone. Does not fire when every BatchNorm "
         "is already in inference form.";
}

PassResult BnInferencePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  graph.walk([&](ir::Node* n) {
    if (!n->is("aten::batch_norm") || n->numArgs() < 9) return;
    const ir::Arg& training = n->arg(5);
    if (!training.isLiteral() || !training.literal().is<bool>()) {
      ctx.decline(name(), n, "the training flag is not a literal");
      r.count("declined");
      return;
    }
    if (!training.literal().as<bool>()) return;
    const bool hasStats = n->arg(3).isValue() && n->arg(4).isValue();
    if (!hasStats) {
      ctx.decline(name(), n, "no running statistics (track_running_stats=False): nothing to normalize with");
      r.count("declined");
      return;
    }
    n->setArg(5, false);
    r.count("converted");
    r.changed = true;
  });
  return r;
}

}  // namespace ptopt::rewriters
