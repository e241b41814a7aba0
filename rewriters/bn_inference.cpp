#include "rewriters/bn_inference.h"

#include "ir/op_views.h"

namespace ptopt::rewriters {

PassResult BnInferencePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  graph.walk([&](ir::Node* n) {
    auto bn = ir::BatchNormOp::match(n);
    if (!bn || n->numArgs() < 9) return;
    const std::optional<bool> training = bn->training();
    if (!training) {
      ctx.decline(name(), n, "the training flag is not a literal");
      r.count("declined");
      return;
    }
    if (!*training) return;
    if (!bn->runningMean() || !bn->runningVar()) {
      ctx.decline(name(), n, "no running statistics (track_running_stats=False): nothing to normalize with");
      r.count("declined");
      return;
    }
    rw.setArg(n, bn->index("training"), false);
    r.count("converted");
  });
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::rewriters
