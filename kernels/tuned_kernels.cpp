#include "kernels/tuned_kernels.h"

#include "kernels/onednn_fused_convs.h"
#include "kernels/xnnpack_convs.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"
#include "rewriters/registry.h"

#include <memory>

namespace ptopt::kernels {

using namespace rewriters;

std::vector<OptionSpec> TunedKernelsPass::optionSpecs() const {
  return {{"mkldnn", OptionKind::String, "",
           "convs (their results' names, ';'-separated; * for all) to run as aten::mkldnn_convolution", {}, {}, {}},
          {"prepacked", OptionKind::String, "",
           "convs and linears (their results' names, ';'-separated; * for all) to run as oneDNN convs with the weight "
           "packed when the model loads (mkldnn_prepacked::conv2d_run; a linear as a 1x1 conv)", {}, {}, {}},
          {"xnnpack", OptionKind::String, "",
           "convs and linears (their results' names, ';'-separated; * for all) to run on XNNPACK "
           "(prepacked::conv2d_clamp_run, linear_clamp_run; a following relu/relu6/hardtanh fused as its clamp)",
           {}, {}, {}},
          {"fused", OptionKind::String, "",
           "convs and linears (their results' names, ';'-separated; * for all) to run on oneDNN with the weight packed "
           "when the model loads and the following activation fused (mkldnn::_convolution_pointwise, "
           "mkldnn::_linear_pointwise; LibTorch 2.x)",
           {}, {}, {}},
          {"skip", OptionKind::String, "",
           "convs and linears (their results' names, ';'-separated) left as they are whatever the lists above say, "
           "* included (--tune: the ops it kept in fp32 beside a fused=* network)",
           {}, {}, {}}};
}

std::string onednnDtypeIneligible(const ir::TensorMeta& m, const at::Tensor& w) {
  if (!m.dtype) return "the input's dtype is not known (run shape-prop with --input-shape)";
  if (*m.dtype != c10::ScalarType::Float && *m.dtype != c10::ScalarType::BFloat16)
    return "the input is " + ir::dtypeName(*m.dtype) + ", not float32 or bfloat16";
  if (m.device && !m.device->is_cpu()) return "the input is not on the CPU";
  if (w.scalar_type() != *m.dtype) return "the weight's dtype differs from the input's";
  return "";
}

namespace {

// The same for a conv, whose input must be 4-D.
std::string inputIneligible(const ir::TensorMeta& m, const at::Tensor& w) {
  if (!m.shape || m.shape->size() != 4)
    return "the input is not known to be a 4-D tensor (run shape-prop with --input-shape)";
  return onednnDtypeIneligible(m, w);
}

}  // namespace

bool hasPrepackedConvs() {
  return ir::findSchema("mkldnn_prepacked::conv2d_prepack", "") && ir::findSchema("mkldnn_prepacked::conv2d_run", "");
}

std::string prepackIneligible(const ir::Node& n) {
  auto c = ir::Conv2dKernelOp::match(&n);
  if (!c) return "not an aten::conv2d (int-list padding) or aten::mkldnn_convolution with all its arguments";
  if (!c->hasLiteralGeometry()) return "the conv's stride/padding/dilation/groups are not literals";
  const auto w = c->weight().isValue() ? rewriters::constantTensor(c->weight().value()) : std::nullopt;
  if (!w || w->dim() != 4 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "the conv's weight is not a constant 4-D CPU tensor";
  if (rewriters::isWrittenAnywhere(c->weight().value())) return "the conv's weight is written in place";
  if (c->bias().isValue() && !rewriters::constantTensor(c->bias().value())) return "the conv's bias is not a constant";
  return c->input().isValue() ? inputIneligible(c->input().value()->meta(), *w) : "the input is not a value";
}

std::string packedLinearIneligible(const ir::Node& n, std::optional<size_t> maxRank) {
  const auto linear = ir::LinearOp::match(&n);
  if (!linear || n.numArgs() != 3 || n.numOutputs() != 1) return "not an aten::linear with all its arguments";
  const auto w = linear->weight() ? rewriters::constantTensor(linear->weight()) : std::nullopt;
  if (!w || w->dim() != 2 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "the linear's weight is not a constant 2-D dense CPU tensor";
  // The pack is made once, at load: a weight written later would not reach it.
  if (rewriters::isWrittenAnywhere(linear->weight())) return "the linear's weight is written in place";
  const ir::Arg& bias = linear->arg("bias");
  if (bias.isValue() ? !rewriters::constantTensor(bias.value()) : !(bias.isLiteral() && bias.literal().isNone()))
    return "the linear's bias is not a constant";
  if (!linear->input()) return "the input is not a value";
  const ir::TensorMeta& m = linear->input()->meta();
  if (!m.shape || m.shape->size() < 2 || (maxRank && m.shape->size() > *maxRank))
    return maxRank ? "the input is not known to be a 2-D, 3-D or 4-D tensor (run shape-prop with --input-shape)"
                   : "the input is not known to have rank 2 or more (run shape-prop with --input-shape)";
  if (m.shape->back() != w->size(1)) return "the input's last dimension is not the weight's input features";
  return onednnDtypeIneligible(m, *w);
}

std::string linearPrepackIneligible(const ir::Node& n) {
  // [N, C] runs as [N, C, 1, 1], [N, T, C] as [N, C, 1, T] and [N, H, W, C]
  // (ConvNeXt's MLP) as [N, C, H, W]: channels-last views of its memory.
  return packedLinearIneligible(n, 4);
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

std::string oneDnnFormMissing(const ir::Node& n, target::OneDnnConv form) {
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(&n));
  const ir::Value* x = op.value(op.has("input") ? "input" : "self");
  if (!x || !x->meta().dtype) return "";  // the eligibility checks say why
  return target::oneDnnConvMissing(form, *x->meta().dtype);
}

namespace {

// `names` without the skipped ops; `*` becomes the names of every conv and
// linear the graph has but those.
std::set<std::string> withoutSkipped(std::set<std::string> names, const std::set<std::string>& skip,
                                     const ir::Graph& graph) {
  if (skip.empty()) return names;
  if (names.erase("*"))
    graph.walk([&](ir::Node* n) {
      if ((n->is("aten::conv2d") || n->is("aten::mkldnn_convolution") || n->is("aten::linear")) &&
          n->numOutputs() == 1)
        names.insert(n->output()->name());
    });
  for (const std::string& s : skip) names.erase(s);
  return names;
}

}  // namespace

PassResult TunedKernelsPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  const std::set<std::string> skip = parseNameList(options().getString("skip"));
  std::set<std::string> names = withoutSkipped(parseNameList(options().getString("mkldnn")), skip, graph);
  std::set<std::string> packed = withoutSkipped(parseNameList(options().getString("prepacked")), skip, graph);
  std::set<std::string> xnnpack = withoutSkipped(parseNameList(options().getString("xnnpack")), skip, graph);
  const std::set<std::string> fused = withoutSkipped(parseNameList(options().getString("fused")), skip, graph);
  if (names.empty() && packed.empty() && xnnpack.empty() && fused.empty()) return r;
  if (ctx.targetDevice != "cpu") {
    ctx.decline(name(), graph.block()->outputNode(), "the target is " + ctx.targetDevice + ": oneDNN convs are CPU kernels");
    return r;
  }
  ir::Rewriter rw(graph, ctx.edits, name());
  if (ctx.tensorValuesOnly && (!xnnpack.empty() || !packed.empty())) {
    ctx.decline(name(), graph.block()->outputNode(),
                "OUT is a .pt2, which holds no packed op contexts: prepacked= and xnnpack= convs stay dense");
    xnnpack.clear();
    packed.clear();
  }
  // A conv named for XNNPACK runs there, whatever the other lists say.
  if (!xnnpack.empty()) {
    packXnnpackConvs(graph, ctx, rw, xnnpack, r, name());
    for (const std::string& x : xnnpack) packed.erase(x), names.erase(x);
  }
  // Then a conv named for a fused post-op runs so, whatever the lists after.
  if (!fused.empty()) {
    packFusedConvs(graph, ctx, rw, fused, r, name());
    packFusedLinears(graph, ctx, rw, fused, r, name());
    for (const std::string& f : fused) packed.erase(f), names.erase(f);
  }
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
    std::string why = mkldnnIneligible(*n);
    if (why.empty()) why = oneDnnFormMissing(*n, target::OneDnnConv::Dense);
    if (!why.empty()) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
      continue;
    }
    const auto conv = ir::Conv2dKernelOp::match(n);
    ir::Value* k = rw.createLike(n, "aten::mkldnn_convolution", conv->mkldnnConvolutionArgs(), "tuned-kernels(mkldnn)");
    rw.replace(n, k);
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
    std::string why = linear ? linearPrepackIneligible(*n) : prepackIneligible(*n);
    if (why.empty()) why = oneDnnFormMissing(*n, target::OneDnnConv::Prepacked);
    if (!why.empty()) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
      continue;
    }
    if (linear) {
      packLinear(graph, rw, n, contextType);
      r.count("prepacked-linear");
      continue;
    }
    const auto c = ir::Conv2dKernelOp::match(n);
    // A relu that is the conv's only reader runs as oneDNN's post-op: the
    // pack's attr "relu" (its only fused form).
    const FusedClamp clamp = fusableClamp(n);
    ir::Node* relu = clamp.activation && clamp.min == 0.0 && !clamp.max ? clamp.activation : nullptr;
    // conv2d_prepack(W, B, stride, padding, dilation, groups, input_size, attr)
    std::vector<ir::Arg> packArgs;
    for (size_t i : c->prepackOrder()) packArgs.push_back(n->arg(i));
    packArgs.emplace_back(ir::Literal(*c->input().value()->meta().shape));
    packArgs.emplace_back(ir::Literal(relu ? "relu" : "none"));
    ir::Node* pack = graph.createCall("mkldnn_prepacked::conv2d_prepack", std::move(packArgs), {contextType});
    pack->setScope(n->scope());
    pack->setProvenance("tuned-kernels(prepacked)");
    rw.insert(pack, n);
    // The relu's result is the conv's now: it takes the relu's place.
    ir::Node* replaced = relu ? relu : n;
    ir::Value* run = rw.createLike(replaced, "mkldnn_prepacked::conv2d_run", {c->input(), ir::Arg(pack->output())},
                                   "tuned-kernels(prepacked)");
    rw.replace(replaced, run);
    if (relu) {
      rw.erase(n);
      r.count("prepacked-relu-fused");
    }
    r.count("prepacked");
  }
}

std::vector<LinearView> linearInputViews(size_t rank) {
  using K = LinearView::Kind;
  if (rank == 2) return {{K::Unsqueeze, {2}}, {K::Unsqueeze, {3}}};   // [N, C] -> [N, C, 1, 1]
  if (rank == 3) return {{K::Permute, {0, 2, 1}}, {K::Unsqueeze, {2}}};  // [N, T, C] -> [N, C, 1, T]
  return {{K::Permute, {0, 3, 1, 2}}};                                  // [N, H, W, C] -> [N, C, H, W]
}

std::vector<LinearView> linearOutputViews(size_t rank) {
  using K = LinearView::Kind;
  // The views give a contiguous result wherever the conv's result is
  // channels-last; `contiguous` (a no-op then) keeps linear's contiguous
  // result for any shape the model meets later.
  if (rank == 2) return {{K::Flatten, {1}}, {K::Contiguous, {}}};
  if (rank == 3) return {{K::Squeeze, {2}}, {K::Permute, {0, 2, 1}}, {K::Contiguous, {}}};
  return {{K::Permute, {0, 2, 3, 1}}, {K::Contiguous, {}}};
}

at::Tensor applyViews(at::Tensor t, const std::vector<LinearView>& views) {
  for (const LinearView& v : views) {
    switch (v.kind) {
      case LinearView::Kind::Permute: t = t.permute(v.dims); break;
      case LinearView::Kind::Unsqueeze: t = t.unsqueeze(v.dims.at(0)); break;
      case LinearView::Kind::Squeeze: t = t.squeeze(v.dims.at(0)); break;
      case LinearView::Kind::Flatten: t = t.flatten(v.dims.at(0)); break;
      case LinearView::Kind::Contiguous: t = t.contiguous(); break;
    }
  }
  return t;
}

namespace {

std::vector<int64_t> viewedShape(std::vector<int64_t> s, const LinearView& v) {
  switch (v.kind) {
    case LinearView::Kind::Permute: {
      std::vector<int64_t> p;
      for (int64_t d : v.dims) p.push_back(s.at(d));
      return p;
    }
    case LinearView::Kind::Unsqueeze: s.insert(s.begin() + v.dims.at(0), 1); return s;
    case LinearView::Kind::Squeeze: s.erase(s.begin() + v.dims.at(0)); return s;
    case LinearView::Kind::Flatten: {
      int64_t rest = 1;
      for (size_t i = v.dims.at(0); i < s.size(); ++i) rest *= s[i];
      s.resize(v.dims.at(0));
      s.push_back(rest);
      return s;
    }
    case LinearView::Kind::Contiguous: return s;
  }
  return s;
}

// Emits `views` on `x` before `before`; each result gets x's dtype and device
// and its shape (when `shape` is known).
ir::Value* emitViews(ir::Rewriter& rw, ir::Node* before, ir::Value* x, std::optional<std::vector<int64_t>> shape,
                     const std::vector<LinearView>& views) {
  for (const LinearView& v : views) {
    std::vector<ir::Arg> args{ir::Arg(x)};
    std::string op;
    switch (v.kind) {
      case LinearView::Kind::Permute: op = "aten::permute", args.emplace_back(ir::Literal(v.dims)); break;
      case LinearView::Kind::Unsqueeze: op = "aten::unsqueeze", args.emplace_back(ir::Literal(v.dims.at(0))); break;
      case LinearView::Kind::Squeeze: op = "aten::squeeze.dim", args.emplace_back(ir::Literal(v.dims.at(0))); break;
      case LinearView::Kind::Flatten:
        op = "aten::flatten.using_ints", args.emplace_back(ir::Literal(v.dims.at(0))), args.emplace_back(ir::Literal(-1));
        break;
      case LinearView::Kind::Contiguous:
        op = "aten::contiguous", args.emplace_back(c10::MemoryFormat::Contiguous);
        break;
    }
    ir::Value* y = rw.call(before, op, std::move(args));
    y->node()->setScope(before->scope());
    y->node()->setProvenance("tuned-kernels(prepacked)");
    ir::TensorMeta m = x->meta();
    m.memoryFormat.reset();
    if (shape) shape = viewedShape(*shape, v);
    m.shape = shape;
    rw.setMeta(y, m);
    x = y;
  }
  return x;
}

}  // namespace

// linear(x, W, b) ->
//   out_views(conv2d_run(in_views(x), conv2d_prepack(W.reshape(O, C, 1, 1), b, [1, 1], [0, 0], [1, 1], 1,
//                                                    size(in_views(x)), "none")))
// The input views (linearInputViews) make x a 4-D tensor whose channels are
// x's last dimension and whose memory is x's, channels-last: no copy is made,
// and conv2d_run keeps that layout, so the output views give back a
// contiguous result, as linear's is (and `contiguous` makes sure of it).
void TunedKernelsPass::packLinear(ir::Graph& graph, ir::Rewriter& rw, ir::Node* n, const c10::TypePtr& contextType) {
  const auto linear = ir::LinearOp::match(n);
  ir::Value* x = linear->input();
  const std::vector<int64_t> shape = *x->meta().shape;
  ir::Value* weight = linear->weight();
  const at::Tensor w = *rewriters::constantTensor(weight);
  const std::string base =
      weight->node() && weight->node()->opcode() == ir::Opcode::GetAttr ? weight->node()->target() : "linear.weight";
  ir::Value* w4 = rw.addConstant(base + "_1x1", w.reshape({w.size(0), w.size(1), 1, 1}).contiguous(), n);
  ir::Value* x4 = emitViews(rw, n, x, shape, linearInputViews(shape.size()));
  ir::Node* pack = graph.createCall(
      "mkldnn_prepacked::conv2d_prepack",
      {ir::Arg(w4), linear->arg("bias"), ir::Arg(ir::Literal(std::vector<int64_t>{1, 1})),
       ir::Arg(ir::Literal(std::vector<int64_t>{0, 0})), ir::Arg(ir::Literal(std::vector<int64_t>{1, 1})),
       ir::Arg(ir::Literal(1)), ir::Arg(ir::Literal(*x4->meta().shape)), ir::Arg(ir::Literal("none"))},
      {contextType});
  pack->setScope(n->scope());
  pack->setProvenance("tuned-kernels(prepacked)");
  rw.insert(pack, n);
  ir::Node* run = graph.createCall("mkldnn_prepacked::conv2d_run", {ir::Arg(x4), ir::Arg(pack->output())},
                                   {c10::TensorType::get()});
  run->setScope(n->scope());
  run->setProvenance("tuned-kernels(prepacked)");
  rw.insert(run, n);
  // conv2d_run's result: the 4-D shape whose output views give linear's.
  ir::TensorMeta runMeta = x4->meta();
  std::vector<int64_t> runShape = *x4->meta().shape;
  runShape[1] = w.size(0);
  runMeta.shape = runShape;
  rw.setMeta(run->output(), runMeta);
  ir::Value* y = emitViews(rw, n, run->output(), runShape, linearOutputViews(shape.size()));
  rw.setMeta(y, n->output()->meta());
  rw.replace(n, y);
  rw.eraseConstantIfUnused(weight);
}

void raisePrepackedConvs(ir::Graph& g) {
  ir::Rewriter rw(g, nullptr, "tuned-kernels");
  std::vector<ir::Node*> runs;
  for (ir::Node* n : *g.block())
    if (n->is("mkldnn_prepacked::conv2d_run")) runs.push_back(n);
  std::set<ir::Node*> packs;
  for (ir::Node* n : runs) {
    const ir::OpView run = ir::OpView::of(n);
    ir::Value* packed = n->numArgs() == 2 ? run.value("W_prepack") : nullptr;
    auto pack = packed && packed->node() ? ir::ConvPrepackOp::match(packed->node()) : std::nullopt;
    if (!pack || (pack->attr() != "none" && pack->attr() != "relu")) continue;
    ir::Node* conv = g.createCall("aten::conv2d",
                                  {run.arg("X"), pack->weight(), pack->bias(), pack->stride(), pack->padding(),
                                   pack->dilation(), pack->groups()},
                                  {c10::TensorType::get()});
    conv->output()->meta() = n->output()->meta();  // lint: detached (its insert is the edit)
    conv->setScope(n->scope());
    conv->setSourceLocation(n->sourceLocation());
    rw.insert(conv, n);
    ir::Value* y = conv->output();
    if (pack->attr() == "relu") {  // the fused post-op, a node again
      y = rw.call(n, "aten::relu", {y});
      y->node()->setScope(n->scope());
      rw.setMeta(y, n->output()->meta());
    }
    rw.replace(n, y);
    packs.insert(pack->node());
  }
  for (ir::Node* pack : packs)
    if (!pack->output()->hasUses()) rw.erase(pack);
}

}  // namespace ptopt::kernels
