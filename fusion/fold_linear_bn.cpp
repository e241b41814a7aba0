#include "fusion/fold_linear_bn.h"

#include "fusion/bn_math.h"
#include "fusion/conv.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string FoldLinearBnPass::contract() const {
  return "Matches an inference batch_norm of linear(x, W, b) with constant W, constant or absent b and "
         "constant statistics, when the linear's output is known to be 2-D: from shape metadata "
         "(shape-prop with --input-shape) or because its input is flatten(_, 1, -1) or another 2-D "
         "linear. The result is linear(x, W * s[:, None], (b - mean) * s + beta), s = gamma / "
         "sqrt(var + eps), computed in float64, stored as new constants (fc.weight.bnfold). Does not "
         "fire when the output rank is unknown or not 2 (BatchNorm1d on [N, C, L] normalizes dim 1, "
         "not the features), when the linear's output has another user, or when anything is not "
         "constant.";
}

namespace {

// Whether `v` (a linear's output) is known to be 2-D.
bool isKnown2d(const ir::Value* v, int depth = 0) {
  if (v->meta().shape) return v->meta().shape->size() == 2;
  const ir::Node* n = v->node();
  if (!n || depth > 8) return false;
  if (n->is("aten::linear")) {
    const ir::Value* in = n->argValue(0);
    return in && isKnown2d(in, depth + 1);
  }
  if (n->is("aten::flatten") && n->numArgs() == 3 && n->arg(1).isLiteral() && n->arg(2).isLiteral() &&
      n->arg(1).literal() == ir::Literal(int64_t{1}) && n->arg(2).literal() == ir::Literal(int64_t{-1}))
    return true;
  // A graph input or any op that keeps rank (relu etc.) is unknown without metadata.
  return false;
}

}  // namespace

PassResult FoldLinearBnPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  for (ir::Node* bn : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), bn, why)) r.count("declined");
    };
    ir::Value* input = bn->argValue(0);
    ir::Node* linear = input ? input->node() : nullptr;
    if (!linear || !linear->is("aten::linear") || linear->numArgs() != 3) continue;
    if (valueUses(input) != 1) { decline("the linear's output has another user"); continue; }
    if (linear->owningBlock() != bn->owningBlock()) { decline("linear and BatchNorm are in different blocks"); continue; }
    if (!isKnown2d(input)) {
      decline("the linear's output is not known to be 2-D (give --input-shape so shape-prop can tell)");
      continue;
    }
    std::string why;
    auto params = BatchNormParams::read(bn, why);
    if (!params) { decline(why); continue; }
    auto weight = constantTensorArg(linear, 1);
    if (!weight || isWrittenAnywhere(linear->argValue(1))) { decline("the linear weight is not a constant"); continue; }
    std::optional<at::Tensor> bias;
    if (!(linear->arg(2).isLiteral() && linear->arg(2).literal().isNone())) {
      bias = constantTensorArg(linear, 2);
      if (!bias) { decline("the linear bias is not a constant"); continue; }
    }
    if (weight->dim() != 2 || weight->size(0) != params->channels() || !at::isFloatingType(weight->scalar_type())) {
      decline("the BatchNorm's channels do not match the linear's output features");
      continue;
    }
    // A linear weight is [out, in]: out features on dim 0, like a conv's.
    const at::Tensor newWeight = (weight->to(at::kDouble) * params->scale().unsqueeze(1)).to(weight->scalar_type());
    const at::Tensor newBias = foldBias(bias, *params, weight->scalar_type());
    setWeightAndBias(graph, linear, newWeight, newBias, ".bnfold");
    noteFold(linear, bn);
    replaceBatchNorm(bn, input);
    r.count("folded");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
