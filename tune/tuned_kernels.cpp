#include "tune/tuned_kernels.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"
#include "rewriters/registry.h"

#include <memory>

namespace ptopt::tune {

using namespace rewriters;

std::vector<OptionSpec> TunedKernelsPass::optionSpecs() const {
  return {{"mkldnn", OptionKind::String, "",
           "convs (their results' names, ';'-separated; * for all) to run as aten::mkldnn_convolution", {}, {}, {}},
          {"prepacked", OptionKind::String, "",
           "convs and linears (their results' names, ';'-separated; * for all) to run as oneDNN convs with the weight "
           "packed when the model loads (mkldnn_prepacked::conv2d_run; a linear as a 1x1 conv)", {}, {}, {}}};
}

namespace {

// The arguments of a conv in either form, by name: aten::conv2d(input,
// weight, bias, stride, padding, dilation, groups) or
// aten::mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups).
struct ConvArgs {
  ir::Arg input, weight, bias, stride, padding, dilation, groups;
};
std::optional<ConvArgs> convArgs(const ir::Node& n) {
  if (n.numArgs() != 7) return std::nullopt;
  if (n.is("aten::conv2d") && n.overload().empty())
    return ConvArgs{n.arg(0), n.arg(1), n.arg(2), n.arg(3), n.arg(4), n.arg(5), n.arg(6)};
  if (n.is("aten::mkldnn_convolution"))
    return ConvArgs{n.arg(0), n.arg(1), n.arg(2), n.arg(4), n.arg(3), n.arg(5), n.arg(6)};
  return std::nullopt;
}

// Why an op with weight `w` on an input shape-prop saw as `m` (its shape
// checked by the caller) cannot run on oneDNN, or "".
std::string dtypeIneligible(const ir::TensorMeta& m, const at::Tensor& w) {
  if (!m.dtype) return "the input's dtype is not known (run shape-prop with --input-shape)";
  if (*m.dtype != c10::ScalarType::Float && *m.dtype != c10::ScalarType::BFloat16)
    return "the input is " + ir::dtypeName(*m.dtype) + ", not float32 or bfloat16";
  if (m.device && !m.device->is_cpu()) return "the input is not on the CPU";
  if (w.scalar_type() != *m.dtype) return "the weight's dtype differs from the input's";
  return "";
}

// The same for a conv, whose input must be 4-D.
std::string inputIneligible(const ir::TensorMeta& m, const at::Tensor& w) {
  if (!m.shape || m.shape->size() != 4)
    return "the input is not known to be a 4-D tensor (run shape-prop with --input-shape)";
  return dtypeIneligible(m, w);
}

bool isIntListLiteral(const ir::Arg& a) { return a.isLiteral() && a.literal().is<std::vector<int64_t>>(); }

}  // namespace

bool hasPrepackedConvs() {
  return ir::findSchema("mkldnn_prepacked::conv2d_prepack", "") && ir::findSchema("mkldnn_prepacked::conv2d_run", "");
}

std::string prepackIneligible(const ir::Node& n) {
  auto c = convArgs(n);
  if (!c) return "not an aten::conv2d (int-list padding) or aten::mkldnn_convolution with all its arguments";
  if (!isIntListLiteral(c->stride) || !isIntListLiteral(c->padding) || !isIntListLiteral(c->dilation) ||
      !(c->groups.isLiteral() && c->groups.literal().is<int64_t>()))
    return "the conv's stride/padding/dilation/groups are not literals";
  const auto w = c->weight.isValue() ? rewriters::constantTensor(c->weight.value()) : std::nullopt;
  if (!w || w->dim() != 4 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "the conv's weight is not a constant 4-D CPU tensor";
  if (c->bias.isValue() && !rewriters::constantTensor(c->bias.value())) return "the conv's bias is not a constant";
  return c->input.isValue() ? inputIneligible(c->input.value()->meta(), *w) : "the input is not a value";
}

std::string linearPrepackIneligible(const ir::Node& n) {
  if (!n.is("aten::linear") || n.numArgs() != 3 || n.numOutputs() != 1)
    return "not an aten::linear with all its arguments";
  const auto w = n.arg(1).isValue() ? rewriters::constantTensor(n.arg(1).value()) : std::nullopt;
  if (!w || w->dim() != 2 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "the linear's weight is not a constant 2-D CPU tensor";
  const ir::Arg& bias = n.arg(2);
  if (bias.isValue() ? !rewriters::constantTensor(bias.value()) : !(bias.isLiteral() && bias.literal().isNone()))
    return "the linear's bias is not a constant";
  if (!n.arg(0).isValue()) return "the input is not a value";
  const ir::TensorMeta& m = n.arg(0).value()->meta();
  // [N, C] runs as [N, C, 1, 1]; [N, H, W, C] (channels-last data, as in
  // ConvNeXt's MLP) as its NCHW view, a channels-last [N, C, H, W].
  if (!m.shape || (m.shape->size() != 2 && m.shape->size() != 4))
    return "the input is not known to be a 2-D or 4-D tensor (run shape-prop with --input-shape)";
  if (m.shape->back() != w->size(1)) return "the input's last dimension is not the weight's input features";
  return dtypeIneligible(m, *w);
}

std::string mkldnnIneligible(const ir::Node& n) {
  if (!n.is("aten::conv2d")) return "not an aten::conv2d";
  if (!n.overload().empty()) return "the conv's padding is a string (\"same\"/\"valid\")";
  const auto conv = ir::ConvOp::match(&n);
  if (!conv) return "the conv's groups or transposed flag is not a literal";
  if (!conv->has("groups")) return "the conv has defaulted arguments";
  for (const char* list : {"stride", "padding", "dilation"})
    if (!conv->intListArg(list)) return "the conv's stride/padding/dilation are not literal";
  const auto w = rewriters::constantTensor(conv->weight());
  if (!w || w->dim() != 4) return "the conv's weight is not a constant 4-D tensor";
  if (!w->device().is_cpu()) return "the conv's weight is not on the CPU";
  return inputIneligible(conv->input()->meta(), *w);
}

PassResult TunedKernelsPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  std::set<std::string> names = parseNameList(options().getString("mkldnn"));
  const std::set<std::string> packed = parseNameList(options().getString("prepacked"));
  if (names.empty() && packed.empty()) return r;
  if (ctx.targetDevice != "cpu") {
    ctx.decline(name(), graph.block()->outputNode(), "the target is " + ctx.targetDevice + ": oneDNN convs are CPU kernels");
    return r;
  }
  ir::Rewriter rw(graph, ctx.edits, name());
  if (!packed.empty()) {
    if (hasPrepackedConvs()) {
      packConvs(graph, ctx, rw, packed, r);
      if (packed.count("*")) names.clear();
      for (const std::string& p : packed) names.erase(p);
    } else {
      ctx.decline(name(), graph.block()->outputNode(), "this LibTorch has no mkldnn_prepacked::conv2d_prepack");
    }
  }
  if (!names.empty() && !ir::findSchema("aten::mkldnn_convolution", "")) {
    ctx.decline(name(), graph.block()->outputNode(), "this LibTorch has no aten::mkldnn_convolution");
    names.clear();
  }
  std::vector<ir::Node*> convs;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && n->numOutputs() == 1 && (names.count("*") || names.count(n->output()->name())))
      convs.push_back(n);
  });
  for (ir::Node* n : convs) {
    if (std::string why = mkldnnIneligible(*n); !why.empty()) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
      continue;
    }
    const auto conv = ir::ConvOp::match(n);
    // mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups)
    std::vector<ir::Arg> args{conv->arg("input"),   conv->arg("weight"),   conv->arg("bias"),
                              conv->arg("padding"), conv->arg("stride"),   conv->arg("dilation"),
                              conv->arg("groups")};
    ir::Node* k = graph.createCall("aten::mkldnn_convolution", std::move(args), {c10::TensorType::get()});
    k->setScope(n->scope());
    k->output()->meta() = n->output()->meta();
    k->setProvenance("tuned-kernels(mkldnn)");
    rw.insert(k, n);
    rw.replace(n, k->output());
    r.count("mkldnn");
  }
  r.changed = rw.changed();
  return r;
}

void TunedKernelsPass::packConvs(ir::Graph& graph, PassContext& ctx, ir::Rewriter& rw,
                                 const std::set<std::string>& names, PassResult& r) {
  std::vector<ir::Node*> convs;
  graph.walk([&](ir::Node* n) {
    if ((n->is("aten::conv2d") || n->is("aten::mkldnn_convolution") || n->is("aten::linear")) &&
        n->numOutputs() == 1 && (names.count("*") || names.count(n->output()->name())))
      convs.push_back(n);
  });
  const c10::FunctionSchema* prepack = ir::findSchema("mkldnn_prepacked::conv2d_prepack", "");
  const c10::TypePtr contextType = prepack->returns().at(0).type();
  for (ir::Node* n : convs) {
    const bool linear = n->is("aten::linear");
    if (std::string why = linear ? linearPrepackIneligible(*n) : prepackIneligible(*n); !why.empty()) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
      continue;
    }
    if (linear) {
      packLinear(graph, rw, n, contextType);
      r.count("prepacked-linear");
      continue;
    }
    const ConvArgs c = *convArgs(*n);
    // conv2d_prepack(W, B, stride, padding, dilation, groups, input_size, attr)
    ir::Node* pack = graph.createCall(
        "mkldnn_prepacked::conv2d_prepack",
        {c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups,
         ir::Arg(ir::Literal(*c.input.value()->meta().shape)), ir::Arg(ir::Literal("none"))},
        {contextType});
    pack->setScope(n->scope());
    pack->setProvenance("tuned-kernels(prepacked)");
    rw.insert(pack, n);
    ir::Node* run = graph.createCall("mkldnn_prepacked::conv2d_run", {c.input, ir::Arg(pack->output())},
                                     {c10::TensorType::get()});
    run->setScope(n->scope());
    run->output()->meta() = n->output()->meta();
    run->setProvenance("tuned-kernels(prepacked)");
    rw.insert(run, n);
    rw.replace(n, run->output());
    r.count("prepacked");
  }
}

// linear(x, W, b) on x = [N, C] or [N, H, W, C] ->
//   conv2d_run(x4, conv2d_prepack(W.reshape(O, C, 1, 1), b, [1, 1], [0, 0], [1, 1], 1, size(x4), "none"))
// read back as [N, O] or [N, H, W, O], where x4 is x.unsqueeze(2).unsqueeze(3)
// or x.permute(0, 3, 1, 2): views, so no copy is made, and conv2d_run keeps
// the input's layout (channels-last for the permuted view), so the result's
// permute back is contiguous, as linear's result is.
void TunedKernelsPass::packLinear(ir::Graph& graph, ir::Rewriter& rw, ir::Node* n, const c10::TypePtr& contextType) {
  ir::Value* x = n->arg(0).value();
  const std::vector<int64_t> shape = *x->meta().shape;
  ir::Value* weight = n->arg(1).value();
  const at::Tensor w = *rewriters::constantTensor(weight);
  const bool image = shape.size() == 4;
  const std::string base =
      weight->node() && weight->node()->opcode() == ir::Opcode::GetAttr ? weight->node()->target() : "linear.weight";
  ir::Value* w4 = rw.addConstant(base + "_1x1", w.reshape({w.size(0), w.size(1), 1, 1}).contiguous(), n);
  auto made = [&](ir::Value* v, std::optional<std::vector<int64_t>> sizes) {
    v->node()->setScope(n->scope());
    v->node()->setProvenance("tuned-kernels(prepacked)");
    v->meta() = x->meta();
    v->meta().shape = std::move(sizes);
    v->meta().memoryFormat.reset();
    return v;
  };
  std::vector<int64_t> size4;
  ir::Value* x4 = nullptr;
  if (image) {
    size4 = {shape[0], shape[3], shape[1], shape[2]};
    x4 = made(rw.call(n, "aten::permute", {ir::Arg(x), ir::Arg(ir::Literal(std::vector<int64_t>{0, 3, 1, 2}))}), size4);
  } else {
    size4 = {shape[0], shape[1], 1, 1};
    ir::Value* x3 = made(rw.call(n, "aten::unsqueeze", {ir::Arg(x), ir::Arg(ir::Literal(2))}), std::vector<int64_t>{shape[0], shape[1], 1});
    x4 = made(rw.call(n, "aten::unsqueeze", {ir::Arg(x3), ir::Arg(ir::Literal(3))}), size4);
  }
  ir::Node* pack = graph.createCall(
      "mkldnn_prepacked::conv2d_prepack",
      {ir::Arg(w4), n->arg(2), ir::Arg(ir::Literal(std::vector<int64_t>{1, 1})),
       ir::Arg(ir::Literal(std::vector<int64_t>{0, 0})), ir::Arg(ir::Literal(std::vector<int64_t>{1, 1})),
       ir::Arg(ir::Literal(1)), ir::Arg(ir::Literal(size4)), ir::Arg(ir::Literal("none"))},
      {contextType});
  pack->setScope(n->scope());
  pack->setProvenance("tuned-kernels(prepacked)");
  rw.insert(pack, n);
  ir::Node* run = graph.createCall("mkldnn_prepacked::conv2d_run", {ir::Arg(x4), ir::Arg(pack->output())},
                                   {c10::TensorType::get()});
  run->setScope(n->scope());
  run->setProvenance("tuned-kernels(prepacked)");
  rw.insert(run, n);
  // [N, O, H, W] / [N, O, 1, 1]: the result's shape read as conv2d_run's.
  const auto& outShape = n->output()->meta().shape;
  const bool outKnown = outShape && outShape->size() == shape.size();
  ir::Value* y = nullptr;
  if (image) {
    made(run->output(), outKnown ? std::optional<std::vector<int64_t>>({(*outShape)[0], (*outShape)[3], (*outShape)[1],
                                                                        (*outShape)[2]})
                                 : std::nullopt);
    y = rw.call(n, "aten::permute", {ir::Arg(run->output()), ir::Arg(ir::Literal(std::vector<int64_t>{0, 2, 3, 1}))});
  } else {
    made(run->output(),
         outKnown ? std::optional<std::vector<int64_t>>({(*outShape)[0], (*outShape)[1], 1, 1}) : std::nullopt);
    y = rw.call(n, "aten::flatten.using_ints",
                {ir::Arg(run->output()), ir::Arg(ir::Literal(1)), ir::Arg(ir::Literal(-1))});
  }
  y->node()->setScope(n->scope());
  y->node()->setProvenance("tuned-kernels(prepacked)");
  y->meta() = n->output()->meta();
  rw.replace(n, y);
  rw.eraseConstantIfUnused(weight);
}

void registerTunePasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<TunedKernelsPass>(); });
}

}  // namespace ptopt::tune
