#include "fusion/drop_zero_bias.h"

#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

namespace {
// The conv or linear view of `n`.
std::optional<ir::OpView> convOrLinear(ir::Node* n) {
  if (auto conv = ir::ConvOp::match(n)) return ir::OpView(*conv);
  if (auto linear = ir::LinearOp::match(n)) return ir::OpView(*linear);
  return std::nullopt;
}
}  // namespace

PassResult DropZeroBiasPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  std::vector<ir::OpView> candidates;
  graph.walk([&](ir::Node* n) {
    if (auto view = convOrLinear(n)) candidates.push_back(*view);
  });
  for (const ir::OpView& view : candidates) {
    ir::Value* old = view.value("bias");
    auto bias = constantTensor(old);
    if (!bias || isWrittenAnywhere(old)) continue;
    if (bias->numel() == 0 || bias->count_nonzero().item<int64_t>() != 0) continue;
    rw.setArg(view.node(), view.index("bias"), ir::Literal(ir::NoneLiteral{}));
    rw.eraseConstantIfUnused(old);
    r.count("dropped");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
