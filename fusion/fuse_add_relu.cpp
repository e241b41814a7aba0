#include "fusion/fuse_add_relu.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string FuseAddReluPass::contract() const {
  return "relu(add.Tensor(a, b, alpha)) (or relu_ of it) becomes aten::_add_relu.Tensor(a, b, alpha), and "
         "relu_(add_.Tensor(a, b, alpha)) (ResNet's out += identity; relu(out)) becomes "
         "aten::_add_relu_.Tensor(a, b, alpha), which mutates a exactly as the pair did. One pass over "
         "memory instead of two, identical arithmetic. Fires only when the op exists in the running "
         "LibTorch, the add's result has no other user, and both nodes are in the same block.";
}

PassResult FuseAddReluPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  std::vector<ir::Node*> relus;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::relu") || n->is("aten::relu_")) relus.push_back(n);
  });
  for (ir::Node* relu : relus) {
    ir::Value* sum = relu->argValue(0);
    ir::Node* add = sum ? sum->node() : nullptr;
    if (!add || !(add->is("aten::add") || add->is("aten::add_")) || add->overload() != "Tensor") continue;
    const bool inplaceAdd = add->target() == "aten::add_";
    if (inplaceAdd && relu->target() != "aten::relu_") {
      ctx.decline(name(), relu, "an in-place add followed by an out-of-place relu leaves the add's result in its input");
      r.count("declined");
      continue;
    }
    if (sum->uses().size() != 1) {
      ctx.decline(name(), relu, "the add's result has another user");
      r.count("declined");
      continue;
    }
    if (add->owningBlock() != relu->owningBlock()) continue;
    const std::string fused = inplaceAdd ? "aten::_add_relu_.Tensor" : "aten::_add_relu.Tensor";
    if (!ir::findSchema(inplaceAdd ? "aten::_add_relu_" : "aten::_add_relu", "Tensor")) {
      ctx.decline(name(), relu, fused + " is not available in this LibTorch");
      r.count("declined");
      continue;
    }
    std::vector<ir::Arg> args = add->args();
    ir::Node* node = ir::Builder(relu).callNode(fused, args, {c10::TensorType::get()});
    node->setScope(relu->scope());
    node->output()->meta() = relu->output()->meta();  // what shape-prop knew stays known
    node->setProvenance("fuse(" + add->target().substr(6) + ", " + relu->target().substr(6) + ")");  // drop "aten::"
    relu->output()->replaceAllUsesWith(node->output());
    relu->destroy();
    add->destroy();
    r.count("fused");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
