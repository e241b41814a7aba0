#include "fusion/fold_conv_bn.h"

#include "fusion/bn_math.h"
#include "fusion/conv.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string FoldConvBnPass::contract() const {
  return "Matches an inference batch_norm whose input is a conv1d/2d/3d, conv_transpose1d/2d/3d or "
         "_convolution with a constant weight, constant or absent bias and literal groups, and whose "
         "statistics (and affine parameters, if any) are constants. The result is one conv with weight "
         "W * s (s = gamma / sqrt(var + eps) per output channel: weight dim 0, or dim 1 per group for "
         "transposed convs) and bias (b - mean) * s + beta; a conv without bias gains one, so no "
         "BatchNorm and no separate add remain. Computed in float64, cast back to the weight's dtype, "
         "stored as new constants with derived names (conv1.weight -> conv1.weight.bnfold); no existing "
         "tensor is mutated, so a weight shared by two convs gets folded copies. Does not fire when the "
         "conv's output has another user, the BatchNorm is in training mode, its statistics or "
         "parameters are not constants, the weight is not constant or is written in place, channel "
         "counts disagree, or conv and BatchNorm sit in different blocks.";
}

PassResult FoldConvBnPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  for (ir::Node* bn : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), bn, why)) r.count("declined");
    };
    ir::Value* input = bn->argValue(0);
    ir::Node* conv = input ? input->node() : nullptr;
    auto info = conv ? asConv(conv) : std::nullopt;
    if (!info) continue;  // not after a conv: nothing to fold into
    if (valueUses(input) != 1) { decline("the conv's output has another user"); continue; }
    if (conv->owningBlock() != bn->owningBlock()) { decline("conv and BatchNorm are in different blocks"); continue; }
    std::string why;
    auto params = BatchNormParams::read(bn, why);
    if (!params) { decline(why); continue; }
    auto weight = constantTensorArg(conv, ConvInfo::kWeight);
    if (!weight) { decline("the conv weight is not a constant"); continue; }
    if (isWrittenAnywhere(conv->argValue(ConvInfo::kWeight))) { decline("the conv weight is written in place"); continue; }
    std::optional<at::Tensor> bias;
    const ir::Arg& biasArg = conv->arg(ConvInfo::kBias);
    if (!(biasArg.isLiteral() && biasArg.literal().isNone())) {
      bias = constantTensorArg(conv, ConvInfo::kBias);
      if (!bias) { decline("the conv bias is not a constant"); continue; }
    }
    if (!at::isFloatingType(weight->scalar_type())) { decline("the conv weight is not floating point"); continue; }
    const int64_t outChannels = info->transposed ? weight->size(1) * info->groups : weight->size(0);
    if (weight->dim() < 3 || outChannels != params->channels() || (info->transposed && weight->size(0) % info->groups)) {
      decline("the BatchNorm has " + std::to_string(params->channels()) + " channels but the conv produces " +
              std::to_string(outChannels));
      continue;
    }
    const at::Tensor scale = params->scale();
    const at::Tensor newWeight = foldWeight(*weight, scale, info->transposed, info->groups);
    const at::Tensor newBias = foldBias(bias, *params, weight->scalar_type());
    setWeightAndBias(graph, conv, newWeight, newBias, ".bnfold");
    noteFold(conv, bn);
    replaceBatchNorm(bn, input);
    r.count("folded");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
