#include "fusion/fold_linear_bn.h"

#include "fusion/bn_math.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

namespace {

// Whether `v` (a linear's output) is known to be 2-D.
bool isKnown2d(const ir::Value* v, int depth = 0) {
  if (v->meta().shape) return v->meta().shape->size() == 2;
  ir::Node* n = v->node();
  if (!n || depth > 8) return false;
  if (auto linear = ir::LinearOp::match(n)) {
    const ir::Value* in = linear->input();
    return in && isKnown2d(in, depth + 1);
  }
  if (auto flatten = ir::LayoutOp::match(n); flatten && n->is("aten::flatten") && n->numArgs() == 3)
    return flatten->startDim() == int64_t{1} && flatten->endDim() == int64_t{-1};
  // A graph input or any op that keeps rank (relu etc.) is unknown without metadata.
  return false;
}

}  // namespace

PassResult FoldLinearBnPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  for (ir::Node* node : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), node, why)) r.count("declined");
    };
    auto bn = ir::BatchNormOp::match(node);
    ir::Value* input = bn->input();
    auto linear = input && input->node() ? ir::LinearOp::match(input->node()) : std::nullopt;
    // Every argument written out (input, weight, bias).
    if (!linear || linear->node()->numArgs() != 3) continue;
    if (valueUses(input) != 1) { decline("the linear's output has another user"); continue; }
    if (linear->node()->owningBlock() != node->owningBlock()) { decline("linear and BatchNorm are in different blocks"); continue; }
    if (!isKnown2d(input)) {
      decline("the linear's output is not known to be 2-D (give --input-shape so shape-prop can tell)");
      continue;
    }
    std::string why;
    auto params = BatchNormParams::read(node, why);
    if (!params) { decline(why); continue; }
    auto weight = constantTensor(linear->weight());
    if (!weight || isWrittenAnywhere(linear->weight())) { decline("the linear weight is not a constant"); continue; }
    std::optional<at::Tensor> bias;
    if (!linear->isNone("bias")) {
      bias = constantTensor(linear->bias());
      if (!bias) { decline("the linear bias is not a constant"); continue; }
    }
    if (weight->dim() != 2 || weight->size(0) != params->channels() || !at::isFloatingType(weight->scalar_type())) {
      decline("the BatchNorm's channels do not match the linear's output features");
      continue;
    }
    foldBatchNormInto(rw, *linear, *bn, *params, *weight, bias);
    r.count("folded");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
