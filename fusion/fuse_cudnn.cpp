#include "fusion/fuse_cudnn.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>

namespace ptopt::fusion {

using namespace rewriters;

namespace {

// conv2d's int[2] arguments accept one element for both dims; cuDNN's
// fused ops read two.
ir::Literal twoDims(const ir::Arg& a) {
  std::vector<int64_t> v = a.literal().as<std::vector<int64_t>>();
  if (v.size() == 1) v.push_back(v[0]);
  return ir::Literal(v);
}

struct ConvMatch {
  std::optional<ir::ConvOp> conv;
  std::string why;  // why it cannot be fused, when conv is empty
};

class Fuser {
 public:
  Fuser(ir::Graph& g, PassContext& ctx, std::string pass)
      : g_(g), ctx_(ctx), pass_(std::move(pass)), rw_(g, ctx.edits, pass_) {}

  PassResult run() {
    std::vector<ir::Node*> candidates;
    g_.walk([&](ir::Node* n) {
      if (n->is("aten::relu") || n->is("aten::relu_") || n->is("aten::_add_relu") || n->is("aten::_add_relu_"))
        candidates.push_back(n);
    });
    for (ir::Node* n : candidates) {
      if (!n->isAttached()) continue;
      if (n->is("aten::_add_relu") || n->is("aten::_add_relu_")) fuseAdd(n, n, n->is("aten::_add_relu_"));
      else visitRelu(n);
    }
    r_.changed = rw_.changed();
    return std::move(r_);
  }

 private:
  void visitRelu(ir::Node* relu) {
    ir::Value* in = ir::OpView::of(relu).value("self");
    ir::Node* producer = in ? in->node() : nullptr;
    if (!producer || producer->owningBlock() != relu->owningBlock()) return;
    if ((producer->is("aten::add") || producer->is("aten::add_")) && producer->overload() == "Tensor") {
      if (in->uses().size() != 1) return decline(relu, "the add's result has another user");
      // relu (not relu_) of add_: the add's input keeps the sum, which relu does not change.
      if (producer->is("aten::add_") && !relu->is("aten::relu_"))
        return decline(relu, "an in-place add followed by an out-of-place relu");
      return fuseAdd(relu, producer, producer->is("aten::add_"));
    }
    if (producer->is("aten::conv2d") || producer->is("aten::_convolution") || producer->is("aten::convolution")) {
      ConvMatch m = fusibleConv(in);
      if (!m.conv) return decline(relu, m.why);
      const ir::ConvOp& conv = *m.conv;
      // cudnn_convolution_relu(self, weight, bias, stride, padding, dilation, groups)
      std::vector<ir::Arg> args{conv.arg("input"),          storedWeight(conv),           conv.arg("bias"),
                                twoDims(conv.arg("stride")), twoDims(conv.arg("padding")), twoDims(conv.arg("dilation")),
                                conv.arg("groups")};
      replace(relu, {conv.node()}, "aten::cudnn_convolution_relu", std::move(args), "conv+relu");
      r_.count("relu");
    }
  }

  // `root` computes relu(a + alpha*b) from `add` (the same node for _add_relu).
  void fuseAdd(ir::Node* root, ir::Node* add, bool inPlace) {
    const ir::OpView sum = ir::OpView::of(add);  // add / _add_relu(self, other, alpha)
    ir::Value* a = sum.value("self");
    ir::Value* b = sum.value("other");
    if (!a || !b) return;
    const ir::Arg alpha = sum.has("alpha") ? sum.arg("alpha") : ir::Arg(ir::Literal(int64_t{1}));
    ConvMatch ma = fusibleConv(a), mb = fusibleConv(b);
    ir::Value* z = nullptr;
    std::optional<ir::ConvOp> conv;
    if (ma.conv) {
      conv = ma.conv;
      z = b;
    } else if (mb.conv) {
      // a + alpha*conv: cuDNN scales z, not the conv; and add_ would write a.
      const bool alphaIsOne = alpha.isLiteral() && ((alpha.literal().is<int64_t>() && alpha.literal().as<int64_t>() == 1) ||
                                                    (alpha.literal().is<double>() && alpha.literal().as<double>() == 1.0));
      if (!alphaIsOne) return decline(root, "the conv is the scaled operand of the add (alpha != 1)");
      if (inPlace) return decline(root, "the in-place add writes the residual, not the conv's result");
      conv = mb.conv;
      z = a;
    } else {
      return decline(root, ma.why.empty() ? mb.why : ma.why);
    }
    const ir::Value* y = conv->node()->output();
    if (!z->meta().shape || !y->meta().shape || *z->meta().shape != *y->meta().shape)
      return decline(root, "the residual is not known to have the conv's shape (cuDNN does not broadcast it; run shape-prop)");
    if (!z->meta().dtype || z->meta().dtype != y->meta().dtype)
      return decline(root, "the residual is not known to have the conv's dtype");
    // cudnn_convolution_add_relu(self, weight, z, alpha, bias, stride, padding, dilation, groups)
    std::vector<ir::Arg> args{conv->arg("input"),          storedWeight(*conv),           ir::Arg(z),
                              alpha,                        conv->arg("bias"),             twoDims(conv->arg("stride")),
                              twoDims(conv->arg("padding")), twoDims(conv->arg("dilation")), conv->arg("groups")};
    std::vector<ir::Node*> gone{conv->node()};  // producers first
    if (add != root) gone.push_back(add);
    replace(root, gone, "aten::cudnn_convolution_add_relu", std::move(args), "conv+add+relu");
    r_.count("add-relu");
  }

  // `v` as the result of a conv2d (or of a traced model's 2-D
  // aten::_convolution / aten::convolution) that cuDNN can fuse, or why not.
  ConvMatch fusibleConv(ir::Value* v) {
    ir::Node* node = v->node();
    const bool unified = node && (node->is("aten::_convolution") || node->is("aten::convolution"));
    if (!node || !(node->is("aten::conv2d") || unified)) return {std::nullopt, "no conv2d feeds it"};
    if (!unified && node->overload() != "") return {std::nullopt, "the conv's padding is a string (\"same\"/\"valid\")"};
    if (v->uses().size() != 1) return {std::nullopt, "the conv's result has another user"};
    const ir::OpView args = ir::OpView::of(node);
    if (!args.has("groups")) return {std::nullopt, "the conv has defaulted arguments"};
    for (const char* list : {"stride", "padding", "dilation"})
      if (!args.intListArg(list)) return {std::nullopt, "the conv's stride/padding/dilation are not literal"};
    if (unified) {
      if (auto why = unifiedConvProblem(args)) return {std::nullopt, *why};
    }
    auto conv = ir::ConvOp::match(node);
    if (!conv) return {std::nullopt, "groups is not literal"};
    auto w = constantTensor(conv->weight());
    if (!w || w->dim() != 4) return {std::nullopt, "the conv's weight is not a constant 4-D tensor"};
    return {conv, ""};
  }

  // Why the unified form (traced models) cannot become cuDNN's fused conv:
  // it must be a plain convolution, and the cuDNN flags that the graph fixes
  // must be ones the fused kernel, which reads the global flags, agrees with.
  static std::optional<std::string> unifiedConvProblem(const ir::OpView& args) {
    const auto transposed = args.boolArg("transposed");
    if (!transposed || *transposed) return "the conv is transposed (or its 'transposed' flag is not literal)";
    const auto outputPadding = args.intListArg("output_padding");
    if (!outputPadding) return "the conv's output_padding is not literal";
    for (int64_t p : *outputPadding)
      if (p != 0) return "the conv has a non-zero output_padding";
    if (args.has("cudnn_enabled") && args.boolArg("cudnn_enabled") != std::optional<bool>(true))
      return "the traced conv has cuDNN disabled (cudnn_enabled=False)";
    if (args.has("deterministic") && args.boolArg("deterministic") != std::optional<bool>(false))
      return "the traced conv asks for deterministic cuDNN algorithms, which the fused kernel does not promise";
    if (args.has("allow_tf32") && args.boolArg("allow_tf32") != std::optional<bool>(true))
      return "the traced conv forbids TF32 (allow_tf32=False) while the fused kernel follows the global flag";
    return std::nullopt;
  }

  // The conv's weight, stored contiguous when it is in neither format.
  ir::Arg storedWeight(const ir::ConvOp& conv) {
    ir::Value* w = conv.weight();
    at::Tensor t = *constantTensor(w);
    if (t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast)) return ir::Arg(w);
    r_.count("weights");
    return ir::Arg(rw_.addConstant(w->node()->target() + "_contig", t.contiguous(), w->node()));
  }

  void replace(ir::Node* root, const std::vector<ir::Node*>& gone, const std::string& op, std::vector<ir::Arg> args,
               const std::string& what) {
    ir::Node* fused = g_.createCall(op, std::move(args), {c10::TensorType::get()});
    fused->setScope(gone.front()->scope());
    // The fused result has the conv's shape and dtype.
    fused->output()->meta() = root->output()->meta().empty() ? gone.front()->output()->meta() : root->output()->meta();  // lint: detached (its insert is the edit)
    fused->setProvenance("fuse-cudnn(" + what + ")");
    rw_.insert(fused, root);
    ir::Value* oldWeight = ir::ConvOp::match(gone.front())->weight();
    rw_.replace(root, fused->output());
    for (auto it = gone.rbegin(); it != gone.rend(); ++it)  // users before producers
      if (*it != root && (*it)->isAttached()) rw_.erase(*it);
    rw_.eraseConstantIfUnused(oldWeight);
  }

  void decline(ir::Node* n, const std::string& why) { ctx_.decline(pass_, n, why); }

  ir::Graph& g_;
  PassContext& ctx_;
  std::string pass_;
  ir::Rewriter rw_;
  PassResult r_;
};

}  // namespace

PassResult FuseCudnnPass::run(ir::Graph& graph, PassContext& ctx) {
  if (ctx.targetDevice != "cuda") {
    ctx.decline(name(), graph.block()->outputNode(),
                "the target is " + ctx.targetDevice + ": cuDNN's fused kernels run on CUDA only");
    return {};
  }
  if (!ir::findSchema("aten::cudnn_convolution_relu", "") || !ir::findSchema("aten::cudnn_convolution_add_relu", "")) {
    ctx.decline(name(), graph.block()->outputNode(), "this LibTorch has no cuDNN fused convolution ops");
    return {};
  }
  return Fuser(graph, ctx, name()).run();
}

}  // namespace ptopt::fusion
