#include "fusion/drop_zero_bias.h"

#include "fusion/conv.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string DropZeroBiasPass::contract() const {
  return "A conv or linear whose bias is a constant tensor of exact zeros gets None instead, saving the "
         "add. Results differ at most in the sign of zero. Does not fire when the bias is not a constant, "
         "has a non-zero element, or is written in place.";
}

PassResult DropZeroBiasPass::run(ir::Graph& graph, PassContext&) {
  PassResult r;
  std::vector<ir::Node*> candidates;
  graph.walk([&](ir::Node* n) {
    if (asConv(n) || n->is("aten::linear")) candidates.push_back(n);
  });
  for (ir::Node* n : candidates) {
    const size_t biasIndex = 2;
    auto bias = constantTensorArg(n, biasIndex);
    if (!bias || isWrittenAnywhere(n->argValue(biasIndex))) continue;
    if (bias->numel() == 0 || bias->count_nonzero().item<int64_t>() != 0) continue;
    ir::Value* old = n->argValue(biasIndex);
    n->setArg(biasIndex, ir::Literal(ir::NoneLiteral{}));
    eraseConstantIfUnused(old);
    r.count("dropped");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
