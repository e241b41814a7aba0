#include "fusion/fold_conv_bn.h"

#include "fusion/bn_math.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

PassResult FoldConvBnPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  for (ir::Node* node : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), node, why)) r.count("declined");
    };
    auto bn = ir::BatchNormOp::match(node);
    ir::Value* input = bn->input();
    auto conv = input && input->node() ? ir::ConvOp::match(input->node()) : std::nullopt;
    if (!conv) continue;  // not after a conv: nothing to fold into
    if (valueUses(input) != 1) { decline("the conv's output has another user"); continue; }
    if (conv->node()->owningBlock() != node->owningBlock()) { decline("conv and BatchNorm are in different blocks"); continue; }
    std::string why;
    auto params = BatchNormParams::read(node, why);
    if (!params) { decline(why); continue; }
    auto weight = constantTensor(conv->weight());
    if (!weight) { decline("the conv weight is not a constant"); continue; }
    if (isWrittenAnywhere(conv->weight())) { decline("the conv weight is written in place"); continue; }
    std::optional<at::Tensor> bias;
    if (!conv->isNone("bias")) {
      bias = constantTensor(conv->bias());
      if (!bias) { decline("the conv bias is not a constant"); continue; }
    }
    if (!at::isFloatingType(weight->scalar_type())) { decline("the conv weight is not floating point"); continue; }
    const int64_t groups = conv->groups();
    const int64_t outChannels = conv->transposed() ? weight->size(1) * groups : weight->size(0);
    if (weight->dim() < 3 || outChannels != params->channels() || (conv->transposed() && weight->size(0) % groups)) {
      decline("the BatchNorm has " + std::to_string(params->channels()) + " channels but the conv produces " +
              std::to_string(outChannels));
      continue;
    }
    foldBatchNormInto(rw, *conv, *bn, *params, *weight, bias);
    r.count("folded");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
