// XNNPACK convs (the contract is in the header).
#include "kernels/xnnpack_convs.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "kernels/tuned_kernels.h"
#include "rewriters/constants.h"
#include "target/kernel_probes.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cmath>

namespace ptopt::kernels {

FusedClamp fusableClamp(ir::Node* conv) {
  ir::Value* y = conv->output();
  if (y->uses().size() != 1 || y->uses()[0].argIndex != 0) return {};
  ir::Node* u = y->uses()[0].user;
  if (!u->isCall() || u->owningBlock() != conv->owningBlock() || u->numOutputs() != 1) return {};
  if (u->is("aten::relu") || u->is("aten::relu_")) return {u, 0.0, std::nullopt};
  if (u->is("aten::hardtanh") || u->is("aten::hardtanh_")) {
    const auto clamp = ir::ClampOp::match(u);
    if (const auto bounds = clamp ? clamp->bounds() : std::nullopt) return {u, bounds->first, bounds->second};
  }
  return {};
}

std::string xnnpackIneligible(const ir::Node& n) {
  if (std::string why = mkldnnIneligible(n); !why.empty()) return why;  // conv2d with literal geometry, 4-D
  const auto conv = ir::ConvOp::match(&n);
  const at::Tensor w = *rewriters::constantTensor(conv->weight());
  if (w.scalar_type() != at::kFloat || w.layout() != c10::kStrided) return "XNNPACK convs are float32 (the weight is not)";
  if (conv->input()->meta().dtype != c10::ScalarType::Float) return "XNNPACK convs are float32 (the input is not)";
  if (rewriters::isWrittenAnywhere(conv->weight())) return "the conv's weight is written in place";
  if (conv->bias() && !rewriters::constantTensor(conv->bias())) return "the conv's bias is not a constant";
  if (!target::xnnpackConvRuns()) return "this LibTorch has no XNNPACK convs (prepacked::conv2d_clamp_run)";
  return "";
}

std::string xnnpackLinearIneligible(const ir::Node& n) {
  if (!n.is("aten::linear")) return "not an aten::linear";
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(&n));
  ir::Value* x = op.value("input");
  ir::Value* wv = op.value("weight");
  const auto w = wv ? rewriters::constantTensor(wv) : std::nullopt;
  if (!w || w->dim() != 2 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "the linear's weight is not a constant 2-D CPU tensor";
  if (w->scalar_type() != at::kFloat) return "XNNPACK linears are float32 (the weight is not)";
  if (!x || !x->meta().shape || x->meta().shape->size() < 2 || x->meta().dtype != c10::ScalarType::Float ||
      (x->meta().device && !x->meta().device->is_cpu()))
    return "its input is not known to be a float32 CPU tensor of rank 2 or more (run shape-prop)";
  if (rewriters::isWrittenAnywhere(wv)) return "the linear's weight is written in place";
  if (op.has("bias") && op.value("bias") && !rewriters::constantTensor(op.value("bias")))
    return "the linear's bias is not a constant";
  if (!target::xnnpackConvRuns()) return "this LibTorch has no XNNPACK (prepacked::linear_clamp_run)";
  return "";
}

c10::IValue xnnpackContext(const ir::Node& n, const FusedClamp& clamp) {  // for the tuner's candidates
  auto optional = [](const std::optional<double>& v) { return v ? c10::IValue(*v) : c10::IValue(); };
  if (n.is("aten::linear")) {
    const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(&n));
    const auto bias = op.value("bias") ? rewriters::constantTensor(op.value("bias")) : std::nullopt;
    torch::jit::Stack stack{*rewriters::constantTensor(op.value("weight")), bias ? c10::IValue(*bias) : c10::IValue(),
                            optional(clamp.min), optional(clamp.max)};
    c10::Dispatcher::singleton().findSchemaOrThrow("prepacked::linear_clamp_prepack", "").callBoxed(&stack);
    return stack.at(0);
  }
  const auto conv = ir::ConvOp::match(&n);
  const auto bias = conv->bias() ? rewriters::constantTensor(conv->bias()) : std::nullopt;
  torch::jit::Stack stack{*rewriters::constantTensor(conv->weight()), bias ? c10::IValue(*bias) : c10::IValue(),
                          *conv->stride(), *conv->padding(), *conv->dilation(), conv->groups(),
                          optional(clamp.min), optional(clamp.max)};
  c10::Dispatcher::singleton().findSchemaOrThrow("prepacked::conv2d_clamp_prepack", "").callBoxed(&stack);
  return stack.at(0);
}

namespace {

// linear(x, W, b) [-> relu/hardtanh] as linear_clamp_run(x, linear_clamp_prepack(W, b, min, max)).
template <typename Bound>
void packXnnpackLinear(ir::Graph& graph, ir::Rewriter& rw, ir::Node* n, const Bound& bound) {
  const ir::OpView op = ir::OpView::of(n);
  const FusedClamp clamp = fusableClamp(n);
  const c10::FunctionSchema* prepack = ir::findSchema("prepacked::linear_clamp_prepack", "");
  ir::Node* pack = graph.createCall("prepacked::linear_clamp_prepack",
                                    {op.arg("weight"), op.has("bias") ? op.arg("bias") : ir::Arg(ir::Literal()),
                                     ir::Arg(bound(clamp.min)), ir::Arg(bound(clamp.max))},
                                    {prepack->returns().at(0).type()});
  pack->setScope(n->scope());
  pack->setProvenance("tuned-kernels(xnnpack)");
  rw.insert(pack, n);
  ir::Node* replaced = clamp.activation ? clamp.activation : n;
  ir::Value* y = rw.createLike(replaced, "prepacked::linear_clamp_run", {op.arg("input"), ir::Arg(pack->output())},
                               "tuned-kernels(xnnpack)");
  rw.replace(replaced, y);
  if (clamp.activation) rw.erase(n);
}

}  // namespace

void packXnnpackConvs(ir::Graph& graph, rewriters::PassContext& ctx, ir::Rewriter& rw,
                      const std::set<std::string>& names, rewriters::PassResult& r, const std::string& pass) {
  std::vector<ir::Node*> convs;
  graph.walk([&](ir::Node* n) {
    if ((n->is("aten::conv2d") || n->is("aten::linear")) && n->numOutputs() == 1 &&
        (names.count("*") || names.count(n->output()->name())))
      convs.push_back(n);
  });
  const c10::FunctionSchema* prepack = ir::findSchema("prepacked::conv2d_clamp_prepack", "");
  auto bound = [](const std::optional<double>& v) { return v ? ir::Literal(*v) : ir::Literal(); };
  for (ir::Node* n : convs) {
    if (n->is("aten::linear")) {
      if (std::string why = xnnpackLinearIneligible(*n); !why.empty()) {
        if (ctx.declineOnce(pass, n, why)) r.count("declined");
        continue;
      }
      packXnnpackLinear(graph, rw, n, bound);
      r.count("xnnpack-linear");
      continue;
    }
    if (std::string why = xnnpackIneligible(*n); !why.empty()) {
      if (ctx.declineOnce(pass, n, why)) r.count("declined");
      continue;
    }
    const auto conv = ir::ConvOp::match(n);
    const FusedClamp clamp = fusableClamp(n);
    // conv2d_clamp_prepack(W, B, stride, padding, dilation, groups, min, max):
    // a function of constants, made when the file loads (ir/load_time.h).
    ir::Node* pack = graph.createCall(
        "prepacked::conv2d_clamp_prepack",
        {ir::Arg(conv->weight()), conv->bias() ? ir::Arg(conv->bias()) : ir::Arg(ir::Literal()),
         ir::Arg(ir::Literal(*conv->stride())), ir::Arg(ir::Literal(*conv->padding())),
         ir::Arg(ir::Literal(*conv->dilation())), ir::Arg(ir::Literal(conv->groups())), ir::Arg(bound(clamp.min)),
         ir::Arg(bound(clamp.max))},
        {prepack->returns().at(0).type()});
    pack->setScope(n->scope());
    pack->setProvenance("tuned-kernels(xnnpack)");
    rw.insert(pack, n);
    // The clamp's result is the conv's now: it takes the activation's place.
    ir::Node* replaced = clamp.activation ? clamp.activation : n;
    ir::Value* y = rw.createLike(replaced, "prepacked::conv2d_clamp_run", {conv->input(), ir::Arg(pack->output())},
                                 "tuned-kernels(xnnpack)");
    rw.replace(replaced, y);
    if (clamp.activation) rw.erase(n);
    r.count("xnnpack");
  }
}

void raiseXnnpackConvs(ir::Graph& g) {
  ir::Rewriter rw(g, nullptr, "tuned-kernels");
  std::vector<ir::Node*> runs;
  for (ir::Node* n : *g.block())
    if (n->is("prepacked::conv2d_clamp_run") || n->is("prepacked::linear_clamp_run")) runs.push_back(n);
  std::set<ir::Node*> packs;
  for (ir::Node* n : runs) {
    const ir::OpView run = ir::OpView::of(n);
    ir::Value* packed = run.value("W_prepack");
    ir::Node* pack = packed ? packed->node() : nullptr;
    const bool linear = n->is("prepacked::linear_clamp_run");
    if (!pack || !pack->is(linear ? "prepacked::linear_clamp_prepack" : "prepacked::conv2d_clamp_prepack")) continue;
    const ir::OpView p = ir::OpView::of(pack);
    ir::Value* y = linear ? rw.call(n, "aten::linear", {run.arg("X"), p.arg("W"), p.arg("B")})
                          : rw.call(n, "aten::conv2d",
                                    {run.arg("X"), p.arg("W"), p.arg("B"), p.arg("stride"), p.arg("padding"),
                                     p.arg("dilation"), p.arg("groups")});
    y->node()->setScope(n->scope());
    const std::optional<double> lo = p.floatArg("output_min"), hi = p.floatArg("output_max");
    if (lo == 0.0 && !hi) {
      y = rw.call(n, "aten::relu", {y});
    } else if (lo || hi) {
      y = rw.call(n, "aten::hardtanh", {y, ir::Literal(lo.value_or(-INFINITY)), ir::Literal(hi.value_or(INFINITY))});
    }
    y->node()->setScope(n->scope());
    rw.setMeta(y, n->output()->meta());
    rw.replace(n, y);
    packs.insert(pack);
  }
  for (ir::Node* pack : packs)
    if (!pack->output()->hasUses()) rw.erase(pack);
}

}  // namespace ptopt::kernels
