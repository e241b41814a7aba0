#include "fusion/fuse_add_relu.h"

#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "target/kernel_probes.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <map>

namespace ptopt::fusion {

using namespace rewriters;

namespace {

// Whether `_add_relu` has a kernel for `device` ("cpu", "cuda"), as the
// dispatcher registers them.
bool hasAddReluKernel(const std::string& device) {
  auto op = c10::Dispatcher::singleton().findOp({"aten::_add_relu", "Tensor"});
  if (!op) return false;
  const c10::DispatchKey key = device == "cpu" ? c10::DispatchKey::CPU
                               : device == "cuda" ? c10::DispatchKey::CUDA
                                                  : c10::DispatchKey::Undefined;
  return key != c10::DispatchKey::Undefined && op->hasKernelForDispatchKey(key);
}

// The first operand dtype the CPU kernel rejects, if shape-prop knows one.
std::optional<c10::ScalarType> rejectedDtype(const ir::Node* add) {
  for (size_t i = 0; i < 2 && i < add->numArgs(); ++i) {
    const ir::Value* v = add->arg(i).value();
    if (v && v->isTensor() && v->meta().dtype && !target::cpuAddReluRuns(*v->meta().dtype)) return v->meta().dtype;
  }
  return std::nullopt;
}

}  // namespace

PassResult FuseAddReluPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  if (!hasAddReluKernel(ctx.targetDevice)) {
    ctx.decline(name(), graph.block()->outputNode(),
                "the target is " + ctx.targetDevice + ": aten::_add_relu has no kernel there (only the CPU's)");
    return r;
  }
  ir::Rewriter rw(graph, ctx.edits, name());
  std::vector<ir::Node*> relus;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::relu") || n->is("aten::relu_")) relus.push_back(n);
  });
  for (ir::Node* relu : relus) {
    ir::Value* sum = ir::OpView::of(relu).value("self");
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
    if (auto dtype = rejectedDtype(add)) {
      ctx.decline(name(), relu, "its operands are " + std::string(c10::toString(*dtype)) +
                                    ", which this LibTorch's _add_relu does not take (probed)");
      r.count("declined");
      continue;
    }
    // add(self, other, alpha) and _add_relu(self, other, alpha) share their
    // arguments.
    ir::Node* node = graph.createCall(fused, add->args(), {c10::TensorType::get()});
    node->setScope(relu->scope());
    node->output()->meta() = relu->output()->meta();  // lint: detached (its insert is the edit)
    node->setProvenance("fuse(" + add->target().substr(6) + ", " + relu->target().substr(6) + ")");  // drop "aten::"
    rw.insert(node, relu);
    rw.replace(relu, node->output());
    rw.erase(add);
    r.count("fused");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
