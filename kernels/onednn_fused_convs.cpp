// oneDNN convs with their activation fused (the contract is in the header).
#include "kernels/onednn_fused_convs.h"

#include "ir/literal.h"
#include "ir/dead_code.h"
#include "ir/op_views.h"
#include "kernels/tuned_kernels.h"
#include "rewriters/constants.h"
#include "target/kernel_probes.h"

#include <cmath>
#include <set>

namespace ptopt::kernels {

namespace {

constexpr const char* kFusedConv = "mkldnn::_convolution_pointwise";
constexpr const char* kFusedLinear = "mkldnn::_linear_pointwise";
constexpr const char* kReorderLinearWeight = "mkldnn::_reorder_linear_weight";
constexpr const char* kProvenance = "tuned-kernels(fused)";

// The type of the operator's `scalars` (Scalar?[]): a list literal would be
// float[], which TorchScript does not pass there, so the list is built.
c10::TypePtr scalarListType() { return c10::ListType::create(c10::OptionalType::create(c10::NumberType::get())); }

// The numbers of a list argument: a literal, or a ListConstruct of literals
// (how the import reads the built list back).
std::optional<std::vector<double>> numberList(const ir::Arg& a) {
  if (a.isLiteral()) {
    const ir::Literal& l = a.literal();
    if (l.is<std::vector<double>>()) return l.as<std::vector<double>>();
    if (l.is<std::vector<int64_t>>()) return std::vector<double>(l.as<std::vector<int64_t>>().begin(), l.as<std::vector<int64_t>>().end());
    return std::nullopt;
  }
  const ir::Node* list = a.value()->node();
  if (!list || !list->is("prim::ListConstruct")) return std::nullopt;
  std::vector<double> out;
  for (size_t i = 0; i < list->numArgs(); ++i) {
    const ir::Arg& item = list->arg(i);
    if (!item.isLiteral()) return std::nullopt;
    if (item.literal().is<double>()) out.push_back(item.literal().as<double>());
    else if (item.literal().is<int64_t>()) out.push_back(static_cast<double>(item.literal().as<int64_t>()));
    else return std::nullopt;
  }
  return out;
}

// attr -> the activation the import puts back after the conv.
ir::Value* activationAfter(ir::Rewriter& rw, ir::Node* before, ir::Value* y, const std::string& attr,
                           const std::vector<double>& scalars, const std::string& algorithm) {
  if (attr == "relu") return rw.call(before, "aten::relu", {y});
  if (attr == "hardtanh" && scalars.size() == 2)
    return rw.call(before, "aten::hardtanh", {y, ir::Literal(scalars[0]), ir::Literal(scalars[1])});
  if (attr == "swish") return rw.call(before, "aten::silu", {y});
  if (attr == "hardswish") return rw.call(before, "aten::hardswish", {y});
  if (attr == "hardsigmoid") return rw.call(before, "aten::hardsigmoid", {y});
  if (attr == "sigmoid") return rw.call(before, "aten::sigmoid", {y});
  if (attr == "tanh") return rw.call(before, "aten::tanh", {y});
  if (attr == "gelu") return rw.call(before, "aten::gelu", {y, ir::Literal(algorithm.empty() ? "none" : algorithm)});
  if (attr == "leaky_relu" && scalars.size() == 1)
    return rw.call(before, "aten::leaky_relu", {y, ir::Literal(scalars[0])});
  return nullptr;
}

// `op(args..., attr, scalars, algorithm)` in place of `n` and its fused
// activation (the result takes the activation's place).
void replaceWithFused(ir::Rewriter& rw, ir::Node* n, const FusedPostOp& post, const char* op, std::vector<ir::Arg> args) {
  std::vector<ir::Arg> scalarItems;
  for (double s : post.scalars) scalarItems.emplace_back(ir::Literal(s));
  ir::Value* scalars = rw.call(n, "prim::ListConstruct", std::move(scalarItems), scalarListType());
  args.emplace_back(ir::Literal(post.attr));
  args.emplace_back(scalars);
  args.emplace_back(post.algorithm.empty() ? ir::Literal() : ir::Literal(post.algorithm));
  ir::Node* replaced = post.activation ? post.activation : n;
  ir::Value* y = rw.createLike(replaced, op, std::move(args), kProvenance);
  rw.replace(replaced, y);
  if (post.activation) rw.erase(n);
}

// The post-op of a `_convolution_pointwise` or `_linear_pointwise` run, read
// back: the activation it stands for after `y` (inserted before `run`), `y`
// itself for "none", or null for one ptopt does not write.
ir::Value* raisedPostOp(ir::Rewriter& rw, ir::Node* run, ir::Value* y) {
  const ir::OpView view = ir::OpView::of(run);
  const ir::Literal* attr = view.literal("attr");
  const auto scalars = numberList(view.arg("scalars"));
  const ir::Literal* algorithm = view.literal("algorithm");
  if (!attr || !attr->is<std::string>() || !scalars) return nullptr;
  if (attr->as<std::string>() == "none") return y;
  const std::string alg = algorithm && algorithm->is<std::string>() ? algorithm->as<std::string>() : "";
  ir::Value* act = activationAfter(rw, run, y, attr->as<std::string>(), *scalars, alg);
  if (act) act->node()->setScope(run->scope());
  return act;
}

// ResNet's `relu(conv(x) + identity)`: the conv's only reader adds another
// tensor of its shape, dtype and (channels-last) layout, alpha 1, and the
// sum's only reader may be a relu. oneDNN adds `other` as the conv's binary
// post-op and applies the relu after it, in one pass over the output.
struct BinaryPostOp {
  ir::Node* add = nullptr;   // add, add_ (the conv's result written), _add_relu or _add_relu_
  ir::Value* other = nullptr;
  ir::Node* relu = nullptr;  // relu/relu_ after add/add_; null otherwise
  bool withRelu = false;     // relu or _add_relu
  ir::Node* last() const { return relu ? relu : add; }
};

// Whether a and b are known to have the same shape and dtype, both in
// `layout`.
bool sameTensorMeta(const ir::Value* a, const ir::Value* b, c10::MemoryFormat layout) {
  const ir::TensorMeta &x = a->meta(), &y = b->meta();
  return x.shape && y.shape && *x.shape == *y.shape && x.dtype && x.dtype == y.dtype && x.memoryFormat == layout &&
         y.memoryFormat == layout;
}

// The residual add after `producer` (a conv: channels-last, a relu after the
// sum fused too; a linear, `withRelu` false: contiguous, and the sum's relu,
// if any, stays an op of its own, the linear's binary form having no unary
// post-op).
std::optional<BinaryPostOp> fusableBinaryPostOp(ir::Node* producer, c10::MemoryFormat layout, bool withRelu) {
  ir::Value* y = producer->output();
  if (y->uses().size() != 1) return std::nullopt;
  ir::Node* add = y->uses()[0].user;
  const size_t at = y->uses()[0].argIndex;
  if (!add->isCall() || add->owningBlock() != producer->owningBlock() || add->overload() != "Tensor" ||
      add->numArgs() != 3 || add->numOutputs() != 1 || at > 1)
    return std::nullopt;
  const bool inPlace = add->is("aten::add_") || add->is("aten::_add_relu_");
  const bool addRelu = add->is("aten::_add_relu") || add->is("aten::_add_relu_");
  if (!(add->is("aten::add") || addRelu || inPlace) || (inPlace && at != 0) || (addRelu && !withRelu))
    return std::nullopt;
  const ir::Arg& alpha = ir::OpView::of(add).arg("alpha");
  if (!alpha.isLiteral() || !((alpha.literal().is<int64_t>() && alpha.literal().as<int64_t>() == 1) ||
                              (alpha.literal().is<double>() && alpha.literal().as<double>() == 1.0)))
    return std::nullopt;
  BinaryPostOp b;
  b.add = add;
  b.other = add->arg(1 - at).value();
  if (!b.other || b.other == y || !sameTensorMeta(b.other, y, layout)) return std::nullopt;
  b.withRelu = addRelu;
  ir::Value* sum = add->output();
  if (withRelu && !b.withRelu && sum->uses().size() == 1 && sum->uses()[0].argIndex == 0) {
    ir::Node* u = sum->uses()[0].user;
    if (u->owningBlock() == add->owningBlock() && u->numOutputs() == 1 && (u->is("aten::relu") || u->is("aten::relu_")))
      b.relu = u, b.withRelu = true;
  }
  // The fused op runs where the last of them ran: nothing in between may
  // write (its input, or anything: an in-place op, a raise, a random draw).
  for (const ir::Node* m = producer->next(); m && m != b.last(); m = m->next())
    if (m != add && ir::hasSideEffects(m)) return std::nullopt;
  return b;
}

}  // namespace

FusedPostOp fusablePostOp(ir::Node* conv) {
  ir::Value* y = conv->output();
  if (y->uses().size() != 1 || y->uses()[0].argIndex != 0) return {};
  ir::Node* u = y->uses()[0].user;
  if (!u->isCall() || u->owningBlock() != conv->owningBlock() || u->numOutputs() != 1) return {};
  const ir::OpView op = ir::OpView::of(u);
  auto named = [&](const std::string& base) {
    return u->target() == "aten::" + base || u->target() == "aten::" + base + "_";
  };
  if (named("relu")) return {u, "relu", {}, ""};
  if (named("hardtanh")) {
    const auto clamp = ir::ClampOp::match(u);
    if (const auto bounds = clamp ? clamp->bounds() : std::nullopt)
      if (std::isfinite(bounds->first) && std::isfinite(bounds->second))
        return {u, "hardtanh", {bounds->first, bounds->second}, ""};
    return {};
  }
  if (named("relu6")) return {u, "hardtanh", {0.0, 6.0}, ""};
  if (named("silu")) return {u, "swish", {}, ""};
  if (named("hardswish")) return {u, "hardswish", {}, ""};
  if (named("hardsigmoid")) return {u, "hardsigmoid", {}, ""};
  if (named("sigmoid")) return {u, "sigmoid", {}, ""};
  if (named("tanh")) return {u, "tanh", {}, ""};
  if (u->is("aten::gelu")) {
    if (!op.has("approximate")) return {u, "gelu", {}, "none"};
    const ir::Literal* approx = op.literal("approximate");
    if (approx && approx->is<std::string>() && (approx->as<std::string>() == "none" || approx->as<std::string>() == "tanh"))
      return {u, "gelu", {}, approx->as<std::string>()};
    return {};
  }
  if (named("leaky_relu")) {
    const std::optional<double> slope = op.has("negative_slope") ? op.floatArg("negative_slope") : 0.01;
    if (slope) return {u, "leaky_relu", {*slope}, ""};
  }
  return {};
}

bool hasFusedConvs() { return ir::findSchema(kFusedConv, "") != nullptr; }

std::string fusedIneligible(const ir::Node& n) {
  if (std::string why = mkldnnIneligible(n); !why.empty()) return why;  // conv2d, literal geometry, 4-D float input
  if (!hasFusedConvs()) return std::string("this LibTorch has no ") + kFusedConv + " (LibTorch 2.x has it)";
  const auto conv = ir::ConvOp::match(&n);
  const at::Tensor w = *rewriters::constantTensor(conv->weight());
  if (w.layout() != c10::kStrided) return "the conv's weight is not a dense tensor";
  if (conv->input()->meta().dtype != w.scalar_type()) return "the conv's weight's dtype differs from its input's";
  if (conv->bias() && !rewriters::constantTensor(conv->bias())) return "the conv's bias is not a constant";
  if (rewriters::isWrittenAnywhere(conv->weight())) return "the conv's weight is written in place";
  if (conv->input()->meta().memoryFormat != c10::MemoryFormat::ChannelsLast)
    return "its input is not known to be channels-last (with a packed weight oneDNN returns channels-last, where "
           "conv2d returns the input's layout; run channels-last first)";
  return "";
}

void packFusedConvs(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw, const std::set<std::string>& names,
                    rewriters::PassResult& r, const std::string& pass) {
  std::vector<ir::Node*> convs;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && n->numOutputs() == 1 && (names.count("*") || names.count(n->output()->name())))
      convs.push_back(n);
  });
  for (ir::Node* n : convs) {
    std::string why = fusedIneligible(*n);
    if (why.empty()) why = oneDnnFormMissing(*n, target::OneDnnConv::Fused);
    if (!why.empty()) {
      if (ctx.declineOnce(pass, n, why)) r.count("declined");
      continue;
    }
    const auto conv = ir::Conv2dKernelOp::match(n);
    const std::optional<BinaryPostOp> binary =
        ir::findSchema(kFusedConv, "binary") ? fusableBinaryPostOp(n, c10::MemoryFormat::ChannelsLast, true)
                                             : std::nullopt;
    const FusedPostOp post = binary ? FusedPostOp{} : fusablePostOp(n);
    // The weight packed when the file loads, as onednn-blocked packs it.
    ir::Value* wm = rw.call(n, "aten::to_mkldnn", {conv->weight(), ir::Literal()});
    std::vector<ir::Arg> reorderArgs{wm};
    for (const ir::Arg& a : conv->reorderGeometry()) reorderArgs.push_back(a);
    ir::Value* packed = rw.call(n, "aten::mkldnn_reorder_conv2d_weight", std::move(reorderArgs));
    std::vector<ir::Arg> args = conv->mkldnnConvolutionArgs(std::nullopt, ir::Arg(packed));
    if (binary) {
      // _convolution_pointwise.binary(X, other, W, B, padding, stride,
      // dilation, groups, binary_attr, alpha, unary_attr, unary_scalars,
      // unary_algorithm)
      args.insert(args.begin() + 1, ir::Arg(binary->other));
      args.emplace_back(ir::Literal("add"));
      args.emplace_back(ir::Literal(1.0));
      args.emplace_back(binary->withRelu ? ir::Literal("relu") : ir::Literal());
      args.emplace_back(rw.call(n, "prim::ListConstruct", {}, scalarListType()));
      args.emplace_back(ir::Literal());
      ir::Value* y = rw.createLike(binary->last(), std::string(kFusedConv) + ".binary", std::move(args), kProvenance);
      rw.replace(binary->last(), y);
      if (binary->relu) rw.erase(binary->add);
      rw.erase(n);
      r.count("fused-add");
      continue;
    }
    replaceWithFused(rw, n, post, kFusedConv, std::move(args));
    r.count("fused");
  }
}

void raiseFusedConvs(ir::Graph& g) {
  ir::Rewriter rw(g, nullptr, "tuned-kernels");
  std::vector<ir::Node*> runs;
  for (ir::Node* n : *g.block())
    if (n->is(kFusedConv) && (n->overload().empty() || n->overload() == "binary")) runs.push_back(n);
  std::vector<ir::Node*> dead;  // in the order they can go: users first
  for (ir::Node* n : runs) {
    const ir::OpView run = ir::OpView::of(n);
    ir::Value* packed = run.value("W");
    ir::Node* reorder = packed ? packed->node() : nullptr;
    if (!reorder || !reorder->is("aten::mkldnn_reorder_conv2d_weight")) continue;
    ir::Value* wm = ir::OpView::of(reorder).value("self");
    ir::Node* toMkldnn = wm ? wm->node() : nullptr;
    if (!toMkldnn || !toMkldnn->is("aten::to_mkldnn")) continue;
    const bool binary = n->overload() == "binary";
    ir::Value* y = nullptr;
    if (binary) {
      // relu(conv2d(...) + other), or the sum alone.
      const ir::Literal* binaryAttr = run.literal("binary_attr");
      const ir::Literal* unary = run.literal("unary_attr");
      if (!binaryAttr || !binaryAttr->is<std::string>() || binaryAttr->as<std::string>() != "add" || !unary ||
          !(unary->isNone() || (unary->is<std::string>() && unary->as<std::string>() == "relu")))
        continue;
      ir::Value* conv = rw.call(n, "aten::conv2d",
                                {run.arg("X"), ir::OpView::of(toMkldnn).arg("self"), run.arg("B"), run.arg("stride"),
                                 run.arg("padding"), run.arg("dilation"), run.arg("groups")});
      conv->node()->setScope(n->scope());
      y = rw.call(n, "aten::add.Tensor", {conv, run.arg("other"), ir::Literal(int64_t{1})});
      y->node()->setScope(n->scope());
      if (!unary->isNone()) {
        y = rw.call(n, "aten::relu", {y});
        y->node()->setScope(n->scope());
      }
      rw.setMeta(y, n->output()->meta());
      if (ir::Value* scalars = run.value("unary_scalars")) dead.push_back(scalars->node());
      rw.replace(n, y);
      dead.push_back(reorder);
      dead.push_back(toMkldnn);
      continue;
    }
    const ir::Literal* attr = run.literal("attr");
    if (!attr || !attr->is<std::string>() || !numberList(run.arg("scalars"))) continue;
    ir::Value* conv = rw.call(n, "aten::conv2d",
                              {run.arg("X"), ir::OpView::of(toMkldnn).arg("self"), run.arg("B"), run.arg("stride"),
                               run.arg("padding"), run.arg("dilation"), run.arg("groups")});
    conv->node()->setScope(n->scope());
    y = raisedPostOp(rw, n, conv);
    if (!y) {  // a post-op ptopt does not write: leave the conv as it is
      rw.erase(conv->node());
      continue;
    }
    rw.setMeta(y, n->output()->meta());
    rw.replace(n, y);
    if (run.value("scalars")) dead.push_back(run.value("scalars")->node());
    dead.push_back(reorder);
    dead.push_back(toMkldnn);
  }
  std::set<ir::Node*> erased;
  for (ir::Node* d : dead)
    if (d && erased.insert(d).second && !d->output()->hasUses()) rw.erase(d);
}

bool hasFusedLinears() {
  return ir::findSchema(kFusedLinear, "") != nullptr && ir::findSchema(kReorderLinearWeight, "") != nullptr;
}

std::string fusedLinearIneligible(const ir::Node& n) {
  const auto linear = ir::LinearOp::match(&n);
  if (!linear || n.numArgs() != 3 || n.numOutputs() != 1) return "not an aten::linear with all its arguments";
  if (!hasFusedLinears()) return std::string("this LibTorch has no ") + kFusedLinear + " (LibTorch 2.x has it)";
  return packedLinearIneligible(n, std::nullopt);  // any rank of 2 or more
}

namespace {

// GPT-2's Conv1D views the linear's [B*T, N] result back to [B, T, N] before
// its activation. An elementwise activation commutes with a view, so oneDNN
// may apply it to the linear's result and the view follow: the view (the
// linear's only reader, an aten::view or aten::reshape of it) and the
// activation fusablePostOp finds after it; a null view otherwise.
std::pair<ir::Node*, FusedPostOp> activationAfterView(ir::Node* linear) {
  ir::Value* y = linear->output();
  if (y->uses().size() != 1) return {nullptr, {}};
  ir::Node* view = y->uses()[0].user;
  if (!(view->is("aten::view") || view->is("aten::reshape")) || view->owningBlock() != linear->owningBlock() ||
      view->numOutputs() != 1 || ir::OpView::of(view).value("self") != y)
    return {nullptr, {}};
  FusedPostOp post = fusablePostOp(view);
  if (!post.activation) return {nullptr, {}};
  return {view, post};
}

}  // namespace

void packFusedLinears(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw,
                      const std::set<std::string>& names, rewriters::PassResult& r, const std::string& pass) {
  std::vector<ir::Node*> linears;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::linear") && n->numOutputs() == 1 && (names.count("*") || names.count(n->output()->name())))
      linears.push_back(n);
  });
  for (ir::Node* n : linears) {
    std::string why = fusedLinearIneligible(*n);
    // What this CPU cannot run is declined here; --tune offers it anyway, to be out with oneDNN's error.
    const auto dtype = why.empty() ? ir::LinearOp::match(n)->input()->meta().dtype : std::nullopt;
    if (dtype && !target::cpuOneDnnLinearRuns(*dtype))
      why = "this CPU's oneDNN has no " + ir::dtypeName(*dtype) + " linear (probed)";
    if (!why.empty()) {
      if (ctx.declineOnce(pass, n, why)) r.count("declined");
      continue;
    }
    const auto linear = ir::LinearOp::match(n);
    // The rows the linear saw (a hint for the pack's blocking), when known.
    int64_t rows = 1;
    const std::vector<int64_t>& shape = *linear->input()->meta().shape;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows = shape[i] > 0 && rows > 0 ? rows * shape[i] : -1;
    ir::Value* packed = rw.call(n, kReorderLinearWeight,
                                {linear->weight(), rows > 0 ? ir::Literal(rows) : ir::Literal()});
    FusedPostOp post = fusablePostOp(n);
    auto [view, postAfterView] = post.activation ? std::pair<ir::Node*, FusedPostOp>{} : activationAfterView(n);
    // A residual add with no activation first (a transformer block's output
    // projection): oneDNN's binary post-op, `_linear_pointwise.binary(X,
    // other, W, B, "add")`, at the add's place.
    const std::optional<BinaryPostOp> binary =
        !post.activation && !view && ir::findSchema(kFusedLinear, "binary")
            ? fusableBinaryPostOp(n, c10::MemoryFormat::Contiguous, false)
            : std::nullopt;
    if (binary) {
      ir::Value* y = rw.createLike(binary->add, std::string(kFusedLinear) + ".binary",
                                   {linear->input(), binary->other, packed, linear->arg("bias"), ir::Literal("add")},
                                   kProvenance);
      rw.replace(binary->add, y);
      rw.erase(n);
      r.count("fused-linear-add");
    } else if (!view) {
      replaceWithFused(rw, n, post, kFusedLinear, {linear->input(), packed, linear->arg("bias")});
    } else {
      // The linear's result takes the activation; the view reads it, and the
      // activation's readers read the view.
      ir::Node* activation = postAfterView.activation;
      postAfterView.activation = nullptr;
      replaceWithFused(rw, n, postAfterView, kFusedLinear, {linear->input(), packed, linear->arg("bias")});
      rw.replace(activation, view->output());
      r.count("fused-through-view");
    }
    r.count("fused-linear");
  }
}

FusedPostOpKind fusedPostOpKind(ir::Node* n) {
  const bool linear = n->is("aten::linear");
  if (!linear && !n->is("aten::conv2d")) return FusedPostOpKind::None;
  const char* op = linear ? kFusedLinear : kFusedConv;
  // As packFusedConvs and packFusedLinears try them: a conv's residual add
  // first; a linear's activation, also through a view, first.
  auto residual = [&] {
    return ir::findSchema(op, "binary") &&
           fusableBinaryPostOp(n, linear ? c10::MemoryFormat::Contiguous : c10::MemoryFormat::ChannelsLast, !linear);
  };
  if (!linear && residual()) return FusedPostOpKind::ResidualAdd;
  if (fusablePostOp(n).activation || (linear && activationAfterView(n).first)) return FusedPostOpKind::Activation;
  if (linear && residual()) return FusedPostOpKind::ResidualAdd;
  return FusedPostOpKind::None;
}

void raiseFusedLinears(ir::Graph& g) {
  ir::Rewriter rw(g, nullptr, "tuned-kernels");
  std::vector<ir::Node*> runs;
  for (ir::Node* n : *g.block())
    if (n->is(kFusedLinear) && (n->overload().empty() || n->overload() == "binary")) runs.push_back(n);
  std::set<ir::Node*> dead;
  for (ir::Node* n : runs) {
    const ir::OpView run = ir::OpView::of(n);
    ir::Value* packed = run.value("W");
    ir::Node* reorder = packed ? packed->node() : nullptr;
    if (!reorder || !reorder->is(kReorderLinearWeight)) continue;
    if (n->overload() == "binary") {  // linear(...) + other
      const ir::Literal* attr = run.literal("attr");
      if (!attr || !attr->is<std::string>() || attr->as<std::string>() != "add") continue;
      ir::Value* linear = rw.call(n, "aten::linear", {run.arg("X"), ir::OpView::of(reorder).arg("self"), run.arg("B")});
      linear->node()->setScope(n->scope());
      ir::Value* y = rw.call(n, "aten::add.Tensor", {linear, run.arg("other"), ir::Literal(int64_t{1})});
      y->node()->setScope(n->scope());
      rw.setMeta(y, n->output()->meta());
      rw.replace(n, y);
      dead.insert(reorder);
      continue;
    }
    ir::Value* linear = rw.call(n, "aten::linear", {run.arg("X"), ir::OpView::of(reorder).arg("self"), run.arg("B")});
    linear->node()->setScope(n->scope());
    ir::Value* y = raisedPostOp(rw, n, linear);
    if (!y) {  // a post-op ptopt does not write: leave the linear as it is
      rw.erase(linear->node());
      continue;
    }
    rw.setMeta(y, n->output()->meta());
    ir::Value* scalars = run.value("scalars");
    rw.replace(n, y);
    if (scalars && !scalars->hasUses()) rw.erase(scalars->node());
    dead.insert(reorder);
  }
  for (ir::Node* d : dead)
    if (!d->output()->hasUses()) rw.erase(d);
}

}  // namespace ptopt::kernels
