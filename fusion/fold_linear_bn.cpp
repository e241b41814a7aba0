#include "fusion/fold_linear_bn.h"

#include "fusion/bn_math.h"
#include "ir/mutation.h"
#include "rewriters/constants.h"

#include <optional>
#include <vector>

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

// The rank of `v` (a linear's output) when known: its metadata, or its
// input's (a linear keeps the rank).
std::optional<size_t> knownRank(const ir::Value* v) {
  if (v->meta().shape) return v->meta().shape->size();
  auto linear = v->node() ? ir::LinearOp::match(v->node()) : std::nullopt;
  if (linear && linear->input() && linear->input()->meta().shape) return linear->input()->meta().shape->size();
  return std::nullopt;
}

// A use that reads only the shape, dtype or device of the value: the
// `other` of reshape_as / view_as / expand_as / type_as, or size / dim.
bool readsOnlyMetadata(const ir::Use& u) {
  const ir::Node* n = u.user;
  if (n->is("aten::size") || n->is("aten::dim")) return true;
  return u.argIndex == 1 &&
         (n->is("aten::reshape_as") || n->is("aten::view_as") || n->is("aten::expand_as") || n->is("aten::type_as"));
}

// timm's LinearNorm (LeViT): BatchNorm1d over a linear's [B, N, C] result
// flattened to [B*N, C], `bn(y.flatten(0, 1)).reshape_as(y)`: it normalizes
// the linear's features too. The flatten when `bnInput` is one, over a
// linear's output of known rank 3 (flatten(0, 1) or flatten(0, -2)); `why`
// says why not when it is close.
ir::Node* flattenOfLinear(ir::Value* bnInput, std::string& why) {
  ir::Node* flatten = bnInput ? bnInput->node() : nullptr;
  if (!flatten || !flatten->is("aten::flatten") || flatten->numArgs() != 3) return nullptr;
  auto view = ir::LayoutOp::match(flatten);
  ir::Value* y = view ? view->value("self") : nullptr;
  if (!y || !y->node() || !ir::LinearOp::match(y->node())) return nullptr;
  const std::optional<size_t> rank = knownRank(y);
  if (!rank) {
    why = "the linear's output is not known to be 3-D (give --input-shape so shape-prop can tell)";
    return nullptr;
  }
  if (*rank != 3 || view->startDim() != int64_t{0} || !(view->endDim() == int64_t{1} || view->endDim() == int64_t{-2})) {
    why = "the flatten before the BatchNorm does not make the linear's features its dimension 1";
    return nullptr;
  }
  if (valueUses(bnInput) != 1) {
    why = "the flattened output has another user";
    return nullptr;
  }
  // The fold rewrites the linear in place: every other reader of y may only
  // read its shape (LeViT's reshape_as), which the fold keeps.
  for (const ir::Use& u : y->uses())
    if (u.user != flatten && !readsOnlyMetadata(u)) {
      why = "the linear's output has another user";
      return nullptr;
    }
  return flatten;
}

// After a LinearNorm fold the BatchNorm's readers read flatten(y). LeViT's
// `reshape_as(flatten(y), y)` (or view_as) is then y itself: a linear's
// output is contiguous, so the view back to its own shape has its storage,
// sizes and strides. Each such reader is replaced by y, and the flatten
// erased once nothing reads it, so that what follows (LeViT's hardswish)
// reads the linear directly and can fuse with it. Not where either may be
// written or compared by identity. Returns how many were replaced.
size_t dropViewBack(ir::Rewriter& rw, ir::Node* flatten, ir::Value* y, const ir::MutationAnalysis& mutation) {
  if (mutation.mayBeMutated(y)) return 0;
  std::vector<ir::Node*> backs;
  for (const ir::Use& u : flatten->output()->uses()) {
    ir::Node* n = u.user;
    if (u.argIndex == 0 && (n->is("aten::reshape_as") || n->is("aten::view_as")) && n->numOutputs() == 1 &&
        n->owningBlock() == flatten->owningBlock() && ir::OpView::of(n).value("other") == y &&
        !mutation.mayBeMutated(n->output()))
      backs.push_back(n);
  }
  for (ir::Node* n : backs) rw.replace(n, y);
  if (flatten->output()->uses().empty()) rw.erase(flatten);
  return backs.size();
}

}  // namespace

PassResult FoldLinearBnPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  std::optional<ir::MutationAnalysis> mutation;  // built at the first LinearNorm fold
  for (ir::Node* node : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), node, why)) r.count("declined");
    };
    auto bn = ir::BatchNormOp::match(node);
    ir::Value* input = bn->input();
    std::string flattenWhy;
    ir::Node* flatten = flattenOfLinear(input, flattenWhy);
    if (!flattenWhy.empty()) { decline(flattenWhy); continue; }
    ir::Value* linearOut = flatten ? ir::OpView::of(flatten).value("self") : input;
    auto linear = linearOut && linearOut->node() ? ir::LinearOp::match(linearOut->node()) : std::nullopt;
    // Every argument written out (input, weight, bias).
    if (!linear || linear->node()->numArgs() != 3) continue;
    if (!flatten && valueUses(input) != 1) { decline("the linear's output has another user"); continue; }
    if (linear->node()->owningBlock() != node->owningBlock() ||
        (flatten && flatten->owningBlock() != node->owningBlock())) {
      decline("linear and BatchNorm are in different blocks");
      continue;
    }
    if (!flatten && !isKnown2d(input)) {
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
    // Flattened, the BatchNorm's readers read the flatten of the folded linear.
    foldBatchNormInto(rw, *linear, *bn, *params, *weight, bias, flatten ? flatten->output() : nullptr);
    r.count(flatten ? "folded-flattened" : "folded");
    if (flatten) {
      if (!mutation) mutation.emplace(graph);  // the folds add no in-place writes
      if (const size_t dropped = dropViewBack(rw, flatten, linearOut, *mutation))
        r.count("view-back-dropped", static_cast<int64_t>(dropped));
    }
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
