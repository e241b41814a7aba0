#include "quant/fuse_int8_activations.h"

#include "ir/interpreter.h"
#include "ir/model.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/name_list.h"
#include "target/kernel_probes.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace ptopt::quant {

using rewriters::OptionKind;
using rewriters::OptionSpec;
using rewriters::PassContext;
using rewriters::PassResult;

namespace {

constexpr const char* kQConv = "onednn::qconv2d_pointwise";
constexpr const char* kQConvPrepack = "onednn::qconv_prepack";
constexpr const char* kQLinear = "onednn::qlinear_pointwise";
constexpr const char* kQLinearPrepack = "onednn::qlinear_prepack";
constexpr const char* kMakeQuantized = "aten::_make_per_tensor_quantized_tensor";

struct QuantParams {
  double scale = 1.0;
  int64_t zeroPoint = 0;
  bool operator==(const QuantParams& o) const { return scale == o.scale && zeroPoint == o.zeroPoint; }
};

ir::Node* onlyReader(const ir::Value* v) {
  if (v->uses().size() != 1 || v->uses()[0].argIndex != 0) return nullptr;
  ir::Node* u = v->uses()[0].user;
  return u->owningBlock() == v->node()->owningBlock() ? u : nullptr;
}

// Quantized ops that keep their input's quantization (the quantize pass's
// pass-through ops, in their quantized forms).
bool keepsQuantization(const ir::Node* n) {
  static const std::set<std::string> ops = {"aten::relu", "aten::hardtanh", "aten::max_pool2d", "aten::avg_pool2d",
                                            "aten::adaptive_avg_pool2d", "aten::flatten", "aten::reshape",
                                            "aten::contiguous", "aten::mean"};
  return ops.count(n->target()) > 0;
}

// The quantization of quantized tensor `v`, read from the op that made it.
std::optional<QuantParams> quantizationOf(const ir::Value* v) {
  for (int depth = 0; depth < 32 && v && v->node() && v->node()->isCall(); ++depth) {
    ir::Node* p = v->node();
    const ir::OpView op = ir::OpView::of(p);
    if (p->is("aten::quantize_per_tensor") || p->is(kMakeQuantized)) {
      const std::optional<double> s = op.floatArg("scale");
      const std::optional<int64_t> z = op.intArg("zero_point");
      if (!s || !z) return std::nullopt;
      return QuantParams{*s, *z};
    }
    if (p->target().rfind("quantized::", 0) == 0) {
      // Every static quantized op ends with its output scale and zero point
      // (output_scale/output_zero_point, scale/zero_point, Y_scale_i/...).
      const auto* schema = p->schema();
      if (!schema || schema->arguments().size() < 2) return std::nullopt;
      const auto& formals = schema->arguments();
      const auto s = op.floatArg(formals[formals.size() - 2].name());
      const auto z = op.intArg(formals.back().name());
      if (!s || !z) return std::nullopt;
      return QuantParams{*s, *z};
    }
    if (p->is("aten::hardsigmoid")) return QuantParams{1.0 / 256, 0};  // the quantized kernel's fixed one
    if (!keepsQuantization(p)) return std::nullopt;
    v = op.value("self");
  }
  return std::nullopt;
}

// A chain conv/linear -> dequantize -> activation: oneDNN's post-op for the
// activation (attr, and for gelu its algorithm), and the activation's node.
struct Chain {
  std::string attr, algorithm;
  ir::Node* act = nullptr;
};

std::optional<Chain> chainOf(const ir::Node& op) {
  const bool linear = op.is("quantized::linear");
  if ((!op.is("quantized::conv2d") && !linear) || op.numOutputs() != 1) return std::nullopt;
  ir::Node* dq = onlyReader(op.output());
  if (!dq || !dq->is("aten::dequantize")) return std::nullopt;
  ir::Node* act = onlyReader(dq->output());
  if (!act || act->numOutputs() != 1) return std::nullopt;
  if (act->is("aten::silu") || act->is("aten::silu_")) return Chain{"swish", "", act};
  if (act->is("aten::hardswish") || act->is("aten::hardswish_")) return Chain{"hardswish", "", act};
  if (linear && act->is("aten::gelu")) {
    // BERT's and ViT's erf GELU, GPT-2's tanh one (fuse-gelu made it aten::gelu).
    const ir::OpView g = ir::OpView::of(act);
    if (!g.has("approximate")) return Chain{"gelu", "none", act};
    const ir::Literal* approximate = g.literal("approximate");
    if (!approximate || !approximate->is<std::string>()) return std::nullopt;
    const std::string algorithm = approximate->as<std::string>();
    if (algorithm != "none" && algorithm != "tanh") return std::nullopt;
    return Chain{"gelu", algorithm, act};
  }
  return std::nullopt;
}

// An int8 conv 2-D without a chain: quantized::conv2d or quantized::conv2d_relu.
bool isPlainConv(const ir::Node& op) {
  return (op.is("quantized::conv2d") || op.is("quantized::conv2d_relu")) && op.numOutputs() == 1 && !chainOf(op);
}

// A packed conv or linear weight as qconv2d_pointwise / qlinear_pointwise take it.
struct Int8Weight {
  at::Tensor weight, scales, zeroPoints;  // int8 [O, I/g, kh, kw] or [O, I]; float [O]; long [O] (zeros)
  c10::IValue bias;                        // float [O] or None
  std::vector<int64_t> stride, padding, dilation;  // convs only
  int64_t groups = 1;
};

// Its packed parameters unpacked, or the reason they cannot be used.
std::optional<Int8Weight> unpackWeight(const c10::IValue& packed, bool linear, std::string& why) {
  try {
    if (!linear && ir::callOperator("quantized::conv2d_transpose", "", {packed}).toInt() != 0) {
      why = "a transposed conv";
      return std::nullopt;
    }
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        linear ? "quantized::linear_unpack" : "quantized::conv2d_unpack", "");
    std::vector<c10::IValue> stack{packed};
    handle.callBoxed(&stack);  // (weight, bias)
    const at::Tensor q = stack.at(0).toTensor();
    Int8Weight w;
    const int64_t out = q.size(0);
    if (q.qscheme() == at::kPerChannelAffine || q.qscheme() == at::kPerChannelSymmetric) {
      if (q.q_per_channel_axis() != 0 || q.q_per_channel_zero_points().ne(0).any().item<bool>()) {
        why = "its int8 weight is not symmetric per output channel";
        return std::nullopt;
      }
      w.scales = q.q_per_channel_scales().to(at::kFloat);
    } else if (q.qscheme() == at::kPerTensorAffine || q.qscheme() == at::kPerTensorSymmetric) {
      if (q.q_zero_point() != 0) {
        why = "its int8 weight is not symmetric";
        return std::nullopt;
      }
      w.scales = at::full({out}, q.q_scale(), at::kFloat);
    } else {
      why = "its weight's quantization scheme is not per tensor or per channel";
      return std::nullopt;
    }
    if (q.scalar_type() != at::kQInt8) {
      why = "its weight is not qint8";
      return std::nullopt;
    }
    w.weight = q.int_repr().contiguous();
    w.zeroPoints = at::zeros({out}, at::kLong);
    w.bias = stack.at(1);
    if (w.bias.isTensor()) w.bias = w.bias.toTensor().to(at::kFloat).contiguous();
    if (linear) return w;
    w.stride = ir::callOperator("quantized::conv2d_stride", "", {packed}).toIntVector();
    w.padding = ir::callOperator("quantized::conv2d_padding", "", {packed}).toIntVector();
    w.dilation = ir::callOperator("quantized::conv2d_dilation", "", {packed}).toIntVector();
    w.groups = ir::callOperator("quantized::conv2d_groups", "", {packed}).toInt();
    return w;
  } catch (const std::exception& e) {
    why = std::string("its packed weight cannot be unpacked: ") + ir::torchErrorMessage(e);
    return std::nullopt;
  }
}

// The first node after the graph's inputs (its placeholders).
ir::Node* firstAfterInputs(ir::Graph& g) {
  for (ir::Node* n : *g.block())
    if (n->opcode() != ir::Opcode::Placeholder) return n;
  return g.block()->outputNode();
}

c10::TypePtr scalarListType() { return c10::ListType::create(c10::OptionalType::create(c10::NumberType::get())); }

class Rewrite {
 public:
  Rewrite(ir::Graph& g, PassContext& ctx, const std::string& pass)
      : g_(g), ctx_(ctx), pass_(pass), rw_(g, ctx.edits, pass), top_(firstAfterInputs(g)) {}

  PassResult run(const std::set<std::string>& names, const std::set<std::string>& plain) {
    auto named = [](const std::set<std::string>& set, const ir::Node* n) {
      return set.count("*") || set.count(n->output()->name());
    };
    std::vector<std::pair<ir::Node*, bool>> ops;  // in graph order (a rewritten op's uint8 feeds later ones); plain?
    for (ir::Node* n : *g_.block()) {
      if (chainOf(*n)) {
        if (named(names, n)) ops.push_back({n, false});
      } else if (isPlainConv(*n) && named(plain, n)) {
        ops.push_back({n, true});
      }
    }
    for (auto [n, isPlain] : ops) isPlain ? rewritePlain(n) : rewrite(n);
    // quantized:: ops are opaque to dead code elimination: what the
    // rewrites left unread goes here, readers first.
    for (auto it = dead_.rbegin(); it != dead_.rend(); ++it) {
      ir::Node* n = *it;
      if (n->output()->hasUses()) continue;
      std::vector<ir::Value*> reads;
      for (const ir::Arg& a : n->args())
        if (a.isValue()) reads.push_back(a.value());
      rw_.erase(n);
      for (ir::Value* v : reads)
        if (v->node() && v->node()->opcode() == ir::Opcode::GetAttr) rw_.eraseConstantIfUnused(v);
    }
    // Quantized views that only rewritten ops would have read (they read the uint8).
    for (auto& [q, u] : uint8_)
      if (!q->hasUses()) rw_.erase(q->node());
    return std::move(result_);
  }

 private:
  void decline(const ir::Node* n, const std::string& why) {
    if (ctx_.declineOnce(pass_, n, why)) result_.count("declined");
  }

  // What every rewrite reads off the int8 op: its input, the input's
  // quantization and its unpacked weight; nullopt (declined) when one is unknown.
  struct Operands {
    ir::Value* qx = nullptr;
    QuantParams in;
    Int8Weight w;
    std::string weightName;
  };
  std::optional<Operands> operandsOf(ir::Node* op, bool linear) {
    const ir::OpView view = ir::OpView::of(op);
    ir::Value* qx = view.value(linear ? "X" : "qx");
    ir::Value* packed = view.value(linear ? "W_prepack" : "packed_weight");
    if (!qx || !packed || !packed->node() || packed->node()->opcode() != ir::Opcode::GetAttr ||
        !g_.constants().contains(packed->node()->target())) {
      decline(op, "its packed weight is not a constant");
      return std::nullopt;
    }
    const std::optional<QuantParams> in = quantizationOf(qx);
    if (!in) {
      decline(op, "the quantization of its input is not known (not made by a quantized op)");
      return std::nullopt;
    }
    const std::string weightName = packed->node()->target();
    std::string why;
    std::optional<Int8Weight> w = unpackWeight(g_.constants().at(weightName), linear, why);
    if (!w) {
      decline(op, why);
      return std::nullopt;
    }
    if (linear && !ir::findSchema(kQLinear, "")) {
      decline(op, std::string("this LibTorch has no ") + kQLinear);
      return std::nullopt;
    }
    return Operands{qx, *in, std::move(*w), weightName};
  }

  // A conv or linear chain: the op and its activation as one oneDNN kernel.
  void rewrite(ir::Node* op) {
    const Chain chain = *chainOf(*op);
    const bool linear = op->is("quantized::linear");
    ir::Node* act = chain.act;
    ir::Node* dq = onlyReader(op->output());
    const std::optional<Operands> o = operandsOf(op, linear);
    if (!o) return;
    ir::Value* qx = o->qx;
    const QuantParams* in = &o->in;
    const Int8Weight* w = &o->w;
    const std::string& weightName = o->weightName;

    // The output: uint8 where every reader quantizes the activation alike.
    std::vector<ir::Node*> quantizes;
    std::optional<QuantParams> out;
    for (const ir::Use& u : act->output()->uses()) {
      const ir::OpView q = ir::OpView::of(u.user);
      std::optional<QuantParams> p;
      if (u.user->is("aten::quantize_per_tensor") && u.argIndex == q.index("self") && q.dtypeArg("dtype") == at::kQUInt8)
        if (const std::optional<double> s = q.floatArg("scale"); s && q.intArg("zero_point"))
          p = QuantParams{*s, *q.intArg("zero_point")};
      if (!p || (out && !(*out == *p))) {
        out.reset();
        quantizes.clear();
        break;
      }
      out = p;
      quantizes.push_back(u.user);
    }

    ir::Node* before = act;
    ir::Value* x = uint8Of(qx);
    const WeightConstants& c = constants(*w, weightName);
    ir::Value* wp = prepacked(*w, c, weightName, *in, qx, linear);
    ir::Value* scalars = rw_.call(before, "prim::ListConstruct", {}, scalarListType());
    // The result's quantization and dtype (None: uint8), then the post-op.
    const QuantParams result = out.value_or(QuantParams{1.0, 0});
    const ir::Arg dtype = out ? ir::Arg(ir::Literal()) : ir::Arg(ir::Literal(at::kFloat));
    std::vector<ir::Arg> args{x, in->scale, in->zeroPoint, wp, c.scales, c.zeroPoints, c.bias};
    if (linear) {
      // qlinear_pointwise: ..., bias, output_scale, output_zero_point, output_dtype, post_op_name,
      // post_op_args, post_op_algorithm (a string, "" when the post-op has none).
      args.insert(args.end(), {result.scale, result.zeroPoint, dtype, ir::Literal(chain.attr), scalars,
                               ir::Literal(chain.algorithm)});
    } else {
      args.insert(args.end(), {w->stride, w->padding, w->dilation, w->groups, result.scale, result.zeroPoint, dtype,
                               ir::Literal(chain.attr), scalars,
                               chain.algorithm.empty() ? ir::Literal() : ir::Literal(chain.algorithm)});
    }
    ir::Value* y = rw_.call(before, linear ? kQLinear : kQConv, std::move(args));
    if (out) {
      ir::TensorMeta m = act->output()->meta();
      m.dtype = at::kByte;
      rw_.setMeta(y, m);
      rw_.setName(y, act->output()->name() + "_u8");
      ir::Value* q = rw_.call(before, kMakeQuantized, {y, out->scale, out->zeroPoint});
      rw_.setMeta(q, quantizes.front()->output()->meta());
      const std::string qName = quantizes.front()->output()->name();
      for (ir::Node* qn : quantizes) {
        rw_.replaceAllUsesWith(qn->output(), q);
        rw_.erase(qn);
      }
      rw_.setName(q, qName);
      uint8_[q] = y;
    } else {
      rw_.setMeta(y, act->output()->meta());
      const std::string name = act->output()->name();
      rw_.replaceAllUsesWith(act->output(), y);
      rw_.setName(y, name);
      result_.count("float-out");
    }
    rw_.erase(act);
    rw_.erase(dq);
    dead_.push_back(op);
    result_.changed = true;
    result_.count(linear ? "fused-linear" : "fused");
  }

  // A conv without a chain (quantized::conv2d, conv2d_relu) on oneDNN's
  // int8 kernel: uint8 in and out, relu as the post-op; the quantized tensor
  // its other readers take is a view made from the uint8.
  void rewritePlain(ir::Node* op) {
    const std::optional<Operands> o = operandsOf(op, false);
    if (!o) return;
    const ir::OpView view = ir::OpView::of(op);
    const std::optional<double> outScale = view.floatArg("output_scale");
    const std::optional<int64_t> outZero = view.intArg("output_zero_point");
    if (!outScale || !outZero) return decline(op, "its output quantization is not a literal");
    ir::Value* x = uint8Of(o->qx);
    const WeightConstants& c = constants(o->w, o->weightName);
    ir::Value* wp = prepacked(o->w, c, o->weightName, o->in, o->qx, false);
    ir::Value* scalars = rw_.call(op, "prim::ListConstruct", {}, scalarListType());
    const std::string attr = op->is("quantized::conv2d_relu") ? "relu" : "none";
    ir::Value* y = rw_.call(op, kQConv,
                            {x, o->in.scale, o->in.zeroPoint, wp, c.scales, c.zeroPoints, c.bias, o->w.stride,
                             o->w.padding, o->w.dilation, o->w.groups, *outScale, *outZero, ir::Literal(),
                             ir::Literal(attr), scalars, ir::Literal()});
    ir::TensorMeta m = op->output()->meta();
    m.dtype = at::kByte;
    rw_.setMeta(y, m);
    const std::string name = op->output()->name();
    rw_.setName(y, name + "_u8");
    ir::Value* q = rw_.call(op, kMakeQuantized, {y, *outScale, *outZero});
    rw_.setMeta(q, op->output()->meta());
    rw_.replaceAllUsesWith(op->output(), q);
    rw_.setName(q, name);
    uint8_[q] = y;
    dead_.push_back(op);
    result_.changed = true;
    result_.count("onednn-conv");
  }

  // The op's input as uint8: a rewritten op's own result, else int_repr.
  ir::Value* uint8Of(ir::Value* qx) {
    if (auto it = uint8_.find(qx); it != uint8_.end()) {
      result_.count("int8-chained");
      return it->second;
    }
    if (auto it = intRepr_.find(qx); it != intRepr_.end()) return it->second;
    ir::Value* u = rw_.call(qx->node()->next(), "aten::int_repr", {qx});
    ir::TensorMeta m = qx->meta();
    m.dtype = at::kByte;
    rw_.setMeta(u, m);
    return intRepr_[qx] = u;
  }

  // The weight's constants, once per weight (at the top of the graph).
  struct WeightConstants {
    ir::Value *weight = nullptr, *scales = nullptr, *zeroPoints = nullptr;
    ir::Arg bias = ir::Literal();
  };
  const WeightConstants& constants(const Int8Weight& w, const std::string& weightName) {
    if (auto it = constants_.find(weightName); it != constants_.end()) return it->second;
    const std::string base = weightName + "_onednn";
    WeightConstants c;
    c.weight = rw_.addConstant(base + "_int8", w.weight, top_);
    c.scales = rw_.addConstant(base + "_scales", w.scales, top_);
    c.zeroPoints = rw_.addConstant(base + "_zero_points", w.zeroPoints, top_);
    if (w.bias.isTensor()) c.bias = rw_.addConstant(base + "_bias", w.bias.toTensor(), top_);
    return constants_.emplace(weightName, std::move(c)).first->second;
  }

  // onednn::qconv_prepack of the weight for this input quantization (one
  // per weight and quantization: a module called at several places), or
  // onednn::qlinear_prepack of a linear's (its layout does not depend on
  // the input's quantization), made when the file loads.
  ir::Value* prepacked(const Int8Weight& w, const WeightConstants& c, const std::string& weightName,
                       const QuantParams& in, ir::Value* qx, bool linear) {
    const auto key = linear ? std::make_tuple(weightName, 0.0, int64_t{0})
                            : std::make_tuple(weightName, in.scale, in.zeroPoint);
    if (auto it = packs_.find(key); it != packs_.end()) return it->second;
    ir::Arg shape = qx->meta().shape ? ir::Arg(ir::Literal(*qx->meta().shape)) : ir::Arg(ir::Literal());
    ir::Value* wp = linear ? rw_.call(top_, kQLinearPrepack, {c.weight, shape})
                           : rw_.call(top_, kQConvPrepack,
                                      {c.weight, c.scales, in.scale, in.zeroPoint, w.stride, w.padding, w.dilation,
                                       w.groups, shape});
    return packs_[key] = wp;
  }

  ir::Graph& g_;
  PassContext& ctx_;
  const std::string& pass_;
  ir::Rewriter rw_;
  ir::Node* top_;  // the graph's first node before the rewrite: constants and packs go before it, in order
  PassResult result_;
  std::map<ir::Value*, ir::Value*> uint8_;    // quantized result of a rewritten conv -> its uint8
  std::map<ir::Value*, ir::Value*> intRepr_;  // quantized value -> its int_repr
  std::map<std::string, WeightConstants> constants_;                       // by packed weight
  std::map<std::tuple<std::string, double, int64_t>, ir::Value*> packs_;  // by weight and input quantization
  std::vector<ir::Node*> dead_;
};

}  // namespace

std::optional<std::string> int8ActivationChain(const ir::Node& conv) {
  const std::optional<Chain> chain = chainOf(conv);
  if (!chain) return std::nullopt;
  return chain->attr;
}

bool int8PlainConv(const ir::Node& conv) { return isPlainConv(conv); }

bool int8DepthwiseConv(const ir::Graph& graph, const ir::Node& conv) {
  if (!isPlainConv(conv)) return false;
  ir::Value* packed = ir::OpView::of(const_cast<ir::Node*>(&conv)).value("packed_weight");
  if (!packed || !packed->node() || packed->node()->opcode() != ir::Opcode::GetAttr ||
      !graph.constants().contains(packed->node()->target()))
    return false;
  std::string why;
  const std::optional<Int8Weight> w = unpackWeight(graph.constants().at(packed->node()->target()), false, why);
  return w && w->groups > 1 && w->weight.dim() == 4 && w->weight.size(1) == 1;  // one input channel per group
}

std::string fuseInt8ActivationsMissing(const PassContext& ctx) {
  if (ctx.targetDevice != "cpu") return "the target is " + ctx.targetDevice + ": oneDNN's int8 convs are CPU kernels";
  if (ctx.tensorValuesOnly) return "OUT is a .pt2, which holds no packed oneDNN weight";
  return target::oneDnnInt8ConvMissing();
}

std::vector<OptionSpec> FuseInt8ActivationsPass::optionSpecs() const {
  return {{"convs", OptionKind::String, "*",
           "int8 convs and linears (their results' names, ';'-separated; * for all) whose activation is fused", {}, {},
           {}},
          {"plain", OptionKind::String, "",
           "int8 convs without such an activation (quantized::conv2d, conv2d_relu; names as convs=, * for all) also "
           "moved to oneDNN's kernel, uint8 in and out (default none)",
           {}, {}, {}}};
}

PassResult FuseInt8ActivationsPass::run(ir::Graph& graph, PassContext& ctx) {
  const std::set<std::string> names = rewriters::parseNameList(options().getString("convs"));
  const std::set<std::string> plain = rewriters::parseNameList(options().getString("plain"));
  bool any = false;
  for (ir::Node* n : *graph.block())
    any = any || (chainOf(*n) && !names.empty()) || (isPlainConv(*n) && !plain.empty());
  if (!any) return unchanged();
  if (std::string why = fuseInt8ActivationsMissing(ctx); !why.empty()) {
    ctx.decline(name(), graph.block()->outputNode(), why);
    return unchanged();
  }
  return Rewrite(graph, ctx, name()).run(names, plain);
}

}  // namespace ptopt::quant
